// harness/runner/backends.h: what a backend is to the runner (a row: its program, its flags,
// how it is run and drawn), and the registry of them it is given, in the fixed order that decides
// the reference (the first one selected) and the columns of every table. The rows are the
// studies' (studies/<name>/rows.h); studies/registry.h orders them.
//
// A variant is another row over the same program with other flags (the compiled mode under a
// memory budget, our engine's checkpointing strategies, a baseline at two threads): it has a
// name of its own in every result and table, and names its backend (variant_of). The Python
// backends are scripts in the source tree (a program with a '/'); the C++ ones binaries in the
// build folder.
//   Add a backend: a row in a study's rows.h (studies/<name>/rows.h) and its program
//   (docs/extending.md).
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "harness/common/text.h"
#include "workloads/workload.h"

namespace bp {

struct BackendSpec {
  const char* name = nullptr;
  // A variant's backend (the row whose program and mode it varies): its column follows that one's.
  const char* variant_of = nullptr;
  // A binary in the build folder, or a script in the source tree ('/').
  const char* program = nullptr;
  const char* mode_flags = nullptr;  // the flags that select its mode (space-separated), or null
  bool threaded = false;             // --threads applies to it
  const char* only_workloads = nullptr;  // the workloads a variant is measured on (null: every one)
  bool checkpoints = false;  // writes checkpoint files (it is told the run's folder for them)
  // "key=N key=N": of the workloads sized by a key (or of the workload of that name), the default
  // sizes up to its N run and the larger ones are reported skipped (sizes given with --sizes all
  // run). The torch backends take 1 to 2 s a sequence of 10^4 steps, ten times our engine, and
  // libtorch 0.5 to 5 s a step of lstm, gmm and the larger defaults of GradBench's other evals,
  // graphs of 10^5 to 10^6 0-dim tensors (lstm and gmm run on it with --sizes only; their tensor
  // forms by default, lstm_tensor at 256 characters, a quarter of a second a step at 1024); the
  // compiled mode plans the whole unrolled sequence as one program, gigabytes at 10^5 steps.
  const char* default_sizes_up_to = nullptr;
  bool shares_verdicts = false;  // chooses kernels by timing them: gets the run's verdict file
  int fixed_threads = 0;         // a variant at a thread count of its own, whatever --threads says
  // A variant at an instruction-set level of its own ("avx2", "avx512"), whatever --isa says;
  // reported skipped on a processor without it.
  const char* isa = nullptr;
  // Why it runs in float32 only, where it does: under --precision bf16 it is reported skipped with
  // this, and the rest of the run goes on.
  const char* fp32_only = nullptr;
  // Times something while it sets up (the compiled mode its kernels, multistage its writes,
  // Revolve and multistage a plain sweep to weigh their recomputation against): its setup runs
  // alone (harness/runner/process.h, Turns).
  bool measures_in_setup = false;
  // A row that is no backend (a bound to measure against): why its numbers are not judged; its
  // check is "unverified" with this, and it is benchmarked.
  const char* not_judged = nullptr;
  // The compiled mode's plan cache (engine/compiled/plan_cache.h) is off in every benchmark but
  // a variant's that measures it: its plans are kept in the run's folder.
  bool warm_plans = false;
  // How the figures draw it (summary.json's backend_styles; plots/plot.py names no backend): a
  // colour, a variant's near its backend's, and a matplotlib marker.
  const char* color = "#888888";
  const char* marker = "o";
  bool main = false;  // one of the backends of every run's headline figures (the study main's)
  // Takes --cache-dir or --no-cache (the compiled mode's plan cache): off unless --cache-dir or
  // warm_plans.
  bool plan_cache = false;
  // A data-parallel row: its program runs as bench_run --ranks processes under this launcher,
  // "mpirun" (Open MPI) or "torchrun" (PyTorch's), alone on the machine rather than taking
  // turns (its ranks wait on each other every step).
  const char* launcher = nullptr;
  // Timed beside the run's busy processes (--background; 1 at nice 0 unless given), which are
  // stopped during every other row's turns (the study contention's rows).
  bool under_load = false;
};

// The Debian package of each launcher, for the line that says one is missing.
inline const char* launcher_package(std::string_view launcher) {
  return launcher == "mpirun" ? "openmpi-bin" : "python3-torch";
}

// Every backend of this program, in the fixed order of the tables (studies/registry.h: each
// study's rows, each variant after its backend), set by its main().
inline std::span<const BackendSpec>& backend_registry() {
  static std::span<const BackendSpec> registered;
  return registered;
}
inline std::span<const BackendSpec> backend_rows() { return backend_registry(); }

inline const BackendSpec* find_backend(std::string_view name) {
  for (const BackendSpec& b : backend_rows())
    if (name == b.name) return &b;
  return nullptr;
}
inline const BackendSpec& spec_of(std::string_view name) {
  if (const BackendSpec* b = find_backend(name)) return *b;
  std::abort();  // names come from the registry
}
inline std::vector<std::string> backend_names() {
  std::vector<std::string> names;
  for (const BackendSpec& b : backend_rows()) names.push_back(b.name);
  return names;
}

// The threads a backend runs with in this run: a variant's own, --threads for the threaded
// backends, 1 for the others.
inline int threads_of(std::string_view backend, int run_threads) {
  const BackendSpec& spec = spec_of(backend);
  return spec.fixed_threads ? spec.fixed_threads : spec.threaded ? run_threads : 1;
}

// The instruction-set level a backend runs at in this run (harness/common/isa_cap.h): a
// variant's own, else --isa's.
inline std::string isa_of(std::string_view backend, const std::string& run_isa) {
  const char* own = spec_of(backend).isa;
  return own ? own : run_isa;
}

// Whether a backend's row runs under mixed precision: its flags say --precision=bf16.
inline bool backend_in_bf16(std::string_view backend) {
  const char* flags = spec_of(backend).mode_flags;
  return flags && std::string_view(flags).find("--precision=bf16") != std::string_view::npos;
}

// Whether `backend` is measured on workload `w` at all (a variant made for some workloads).
inline bool backend_runs(std::string_view backend, std::string_view workload) {
  const char* only = spec_of(backend).only_workloads;
  if (!only) return true;
  const std::vector<std::string> names = fields(only, ',');
  return std::find(names.begin(), names.end(), workload) != names.end();
}

// Why `backend` leaves out the default size `size` of `w` ("" if it runs it).
inline std::string default_size_skipped(const std::string& backend, const WorkloadInfo& w,
                                        int64_t size) {
  const char* up_to = spec_of(backend).default_sizes_up_to;
  if (!up_to || !w.sizes.sized()) return "";
  for (const std::string& limit : fields(up_to, ' ')) {
    const std::vector<std::string> kv = fields(limit, '=');
    const std::string_view key = w.sizes.key;
    if ((kv[0] != key && kv[0] != w.name) || size <= std::stoll(kv[1])) continue;
    if (std::stoll(kv[1]) == 0)
      return fmt::format("not in {}'s default sweep (seconds a step); --sizes {}={} runs it",
                         backend, key, size);
    return fmt::format(
        "not in the default sweep, which runs {} up to {}={}; --sizes {}=...,{} runs it", backend,
        key, kv[1], key, size);
  }
  return "";
}

}  // namespace bp
