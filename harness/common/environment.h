// harness/common/environment.h: what a timing depends on beyond the code, and which differences
// between two runs' environments (harness/common/proc.h's proc_environment, as recorded in run.json
// and summary.json) make their numbers incomparable.
//
// A different processor generation, a different set of CPU flags (AVX-512 or not), another
// microcode, fewer CPUs or another affinity, another frequency governor or boost setting, another
// kernel: each changes what a step costs, so bench_run --resume and bench_run compare refuse to
// mix such runs unless told --force, and name every difference. The memory size and the load are
// recorded but not compared: they change no step's cost unless the run swaps, which the memory
// limit prevents, and the load is reported with the run.
//   Tests: harness/harness_test.cc.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "harness/common/json.h"
#include "harness/common/text.h"

namespace bp {

inline constexpr const char* kPerformanceFields[] = {
    "cpu_vendor",  "cpu_family",   "cpu_model_number", "cpu_stepping", "cpu_microcode", "cpu_flags",
    "cpus_online", "cpu_affinity", "cpu_governor",     "cpu_boost",    "kernel"};

// One line per field that differs, "field: A vs B"; for the CPU flags, the flags only one side
// has (the list is long), and for the kernel, its release (the build date after it matters not).
inline std::vector<std::string> performance_differences(const Json& a, const Json& b) {
  std::vector<std::string> out;
  for (const char* field : kPerformanceFields) {
    std::string x = a[field].str_or("(not recorded)"), y = b[field].str_or("(not recorded)");
    if (std::string(field) == "kernel") x = x.substr(0, x.find(' ')), y = y.substr(0, y.find(' '));
    if (x == y) continue;
    if (std::string(field) == "cpu_flags" && a[field].kind == Json::Kind::string &&
        b[field].kind == Json::Kind::string) {
      const std::vector<std::string> fx = fields(x, ' '), fy = fields(y, ' ');
      std::string only_a, only_b;
      for (const std::string& f : fx)
        if (std::find(fy.begin(), fy.end(), f) == fy.end()) only_a += " " + f;
      for (const std::string& f : fy)
        if (std::find(fx.begin(), fx.end(), f) == fx.end()) only_b += " " + f;
      out.push_back("cpu_flags: only in the first:" + (only_a.empty() ? " -" : only_a) +
                    "; only in the second:" + (only_b.empty() ? " -" : only_b));
      continue;
    }
    out.push_back(std::string(field) + ": " + x + " vs " + y);
  }
  return out;
}

}  // namespace bp
