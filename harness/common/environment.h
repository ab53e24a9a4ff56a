// harness/common/environment.h: what a timing depends on beyond the code, and which differences
// between two runs' environments (harness/common/proc.h's proc_environment, as recorded in run.json
// and summary.json) make their numbers incomparable.
//
// Decisive, each changes what a step costs: another processor (vendor, family, model, stepping),
// another instruction set (the CPU flags the kernels are chosen by at run time: AVX-512 or not),
// fewer CPUs or another affinity, another frequency governor or boost setting. bench_run --resume
// and bench_run compare refuse to mix such runs unless told --force, and name every difference.
// Informative, said but not refused: the microcode, the other CPU flags (a hypervisor exposes
// more or fewer of them on one model), the kernel release. The memory size and the load are
// recorded but not compared: they change no step's cost unless the run swaps, which the memory
// limit prevents, and the load is reported with the run.
//   Tests: harness/runner/results_test.cc.
#pragma once

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "harness/common/json.h"
#include "harness/common/text.h"

namespace bp {

inline constexpr const char* kDecisiveFields[] = {
    "cpu_vendor",  "cpu_family",   "cpu_model_number", "cpu_stepping", "cpu_flags",
    "cpus_online", "cpu_affinity", "cpu_governor",     "cpu_boost"};
inline constexpr const char* kInformativeFields[] = {"cpu_microcode", "cpu_flags", "kernel"};

// A CPU flag that names an instruction set the kernels may be chosen by (engine/runtime/isa.h): a
// difference in these is another build and other kernels.
inline bool is_instruction_set_flag(const std::string& f) {
  for (const char* prefix : {"avx", "fma", "sse", "ssse", "f16c", "bmi", "amx", "vaes",
                             "vpclmulqdq", "gfni", "sha_ni", "adx", "popcnt", "abm", "movbe"})
    if (f.rfind(prefix, 0) == 0) return true;
  return false;
}

// The environment variables that change what a backend computes or how fast: ours (BP_SPLIT,
// BP_BF16_PATH, BP_ISA, ...), and the libraries' threads and instruction sets (OMP_, OPENBLAS_,
// BLIS_, MKL_, DNNL_, ONEDNN_, LIBXSMM_, ATEN_, GOMP_, KMP_), "NAME=value" sorted, as this process
// has them. run.json records them; a resume with others is refused (harness/runner/resume.cc).
inline std::vector<std::string> result_variables(char** env) {
  static constexpr const char* kPrefixes[] = {"BP_",   "OMP_",  "OPENBLAS_", "BLIS_",
                                              "MKL_",  "DNNL_", "ONEDNN_",   "LIBXSMM_",
                                              "ATEN_", "GOMP_", "KMP_"};
  std::vector<std::string> out;
  for (char** e = env; e && *e; e++)
    for (const char* prefix : kPrefixes)
      if (std::string_view(*e).starts_with(prefix)) {
        out.emplace_back(*e);
        break;
      }
  std::sort(out.begin(), out.end());
  return out;
}

// "NAME: a then, b now" for each variable set differently (or only on one side: "unset").
inline std::vector<std::string> variable_differences(const std::vector<std::string>& then,
                                                     const std::vector<std::string>& now) {
  const auto value_of = [](const std::vector<std::string>& list, const std::string& name) {
    for (const std::string& v : list)
      if (v.substr(0, v.find('=')) == name) return v.substr(v.find('=') + 1);
    return std::string("unset");
  };
  std::vector<std::string> names, out;
  for (const auto* list : {&then, &now})
    for (const std::string& v : *list) names.push_back(v.substr(0, v.find('=')));
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  for (const std::string& n : names)
    if (value_of(then, n) != value_of(now, n))
      out.push_back(n + ": " + value_of(then, n) + " then, " + value_of(now, n) + " now");
  return out;
}

struct EnvironmentDifferences {
  std::vector<std::string> decisive, informative;  // "field: A vs B", one line each
};

// The flags only one side has, among those `keep` accepts; "" when none.
inline std::string flag_difference(const std::string& x, const std::string& y,
                                   bool (*keep)(const std::string&), bool want) {
  const std::vector<std::string> fx = fields(x, ' '), fy = fields(y, ' ');
  std::string only_a, only_b;
  for (const std::string& f : fx)
    if (keep(f) == want && std::find(fy.begin(), fy.end(), f) == fy.end()) only_a += " " + f;
  for (const std::string& f : fy)
    if (keep(f) == want && std::find(fx.begin(), fx.end(), f) == fx.end()) only_b += " " + f;
  if (only_a.empty() && only_b.empty()) return "";
  return std::string(want ? "instruction sets" : "cpu_flags") +
         ": only in the first:" + (only_a.empty() ? " -" : only_a) +
         "; only in the second:" + (only_b.empty() ? " -" : only_b);
}

// One line per field that differs; for the CPU flags, the flags only one side has (the list is
// long), and for the kernel, its release (the build date after it matters not).
inline EnvironmentDifferences environment_differences(JsonView a, JsonView b) {
  EnvironmentDifferences out;
  auto compare = [&](const char* field, std::vector<std::string>& into, bool decisive) {
    std::string x = a[field].str_or("(not recorded)"), y = b[field].str_or("(not recorded)");
    if (std::string(field) == "kernel") x = x.substr(0, x.find(' ')), y = y.substr(0, y.find(' '));
    if (x == y) return;
    if (std::string(field) == "cpu_flags") {
      if (!a[field].is_string() || !b[field].is_string()) {
        if (decisive) into.push_back("cpu_flags: " + x + " vs " + y);
        return;
      }
      const std::string d = flag_difference(x, y, is_instruction_set_flag, decisive);
      if (!d.empty()) into.push_back(d);
      return;
    }
    into.push_back(std::string(field) + ": " + x + " vs " + y);
  };
  for (const char* field : kDecisiveFields) compare(field, out.decisive, true);
  for (const char* field : kInformativeFields) compare(field, out.informative, false);
  return out;
}

// The decisive differences only: what refuses a comparison or a resume.
inline std::vector<std::string> performance_differences(JsonView a, JsonView b) {
  return environment_differences(a, b).decisive;
}

}  // namespace bp
