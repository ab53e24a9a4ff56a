// harness/runner/backends.h: the backends bench_run knows, in the fixed order that decides the
// reference (the first one selected) and the columns of every table.
//
// A variant is another row of this table over the same program with other flags (the compiled
// mode under a memory budget, our engine's checkpointing strategies, a baseline at two threads):
// it has a name of its own in every result and table. The Python backends are scripts in the
// source tree (a program with a '/'); the C++ ones binaries in the build folder.
//   Add a backend: a row here and its program (docs/extending.md).
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "harness/common/text.h"
#include "workloads/workload.h"

namespace bp {

struct BackendSpec {
  const char* name;
  const char* program;     // a binary in the build folder, or a script in the source tree ('/')
  const char* mode_flags;  // the flags that select its mode (space-separated), or null
  bool threaded;           // --threads applies to it
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
};

inline constexpr const char* kRecurrent = "char_rnn,char_rnn_wide";
inline constexpr const char* kLengthsUpTo10k = "length=10000";
inline constexpr const char* kPythonUpTo = "length=10000 lstm_tensor=256";
inline constexpr const char* kLibtorchUpTo =
    "length=10000 elements=2500 points=64 lstm=0 gmm_d2=0 gmm_d10=0 equations=100 ell=7 "
    "lstm_tensor=256";
inline constexpr const char* kModels = "char_mlp,mini_gpt,mini_gpt_wide,mlp_width";
inline constexpr BackendSpec kBackends[] = {
    {"engine", "bench_engine", nullptr, true},
    {"engine_2t", "bench_engine", nullptr, true, kModels, false, nullptr, false, 2},
    {"engine_revolve", "bench_engine", "--strategy=revolve --snapshots=8", false, kRecurrent, false,
     nullptr, false, 0, true},
    {"engine_multistage", "bench_engine", "--strategy=multistage --snapshots=8", false, kRecurrent,
     true, nullptr, false, 0, true},
    {"compiled", "bench_compiled", nullptr, true, nullptr, false, kLengthsUpTo10k, true, 0, true},
    {"compiled_2t", "bench_compiled", nullptr, true, kModels, false, nullptr, true, 2, true},
    {"compiled_budget", "bench_compiled", "--memory_budget=0.5", false, "mini_gpt_wide", false,
     nullptr, true, 0, true},
    {"compiled_first_step", "bench_compiled", "--time_first_step", false, nullptr, false,
     kLengthsUpTo10k},
    {"compiled_warm_start", "bench_compiled", "--time_first_step", false, nullptr, false,
     kLengthsUpTo10k, false, 0, false, nullptr, true},
    {"libtorch", "bench_libtorch", nullptr, true, nullptr, false, kLibtorchUpTo},
    {"libtorch_2t", "bench_libtorch", nullptr, true, kModels, false, nullptr, false, 2},
    {"libtorch_segments", "bench_libtorch", "--strategy=segments", true, kRecurrent, false,
     kLengthsUpTo10k},
    // ADOL-C (baselines/adolc/): tape the first step and replay it, or tape every step.
    {"adolc", "bench_adolc", nullptr, false},
    {"adolc_retape", "bench_adolc", "--taping=every_step", false},
    {"pytorch", "baselines/pytorch/pytorch_bench.py", "--mode=pytorch", true, nullptr, false,
     kPythonUpTo},
    {"pytorch_2t", "baselines/pytorch/pytorch_bench.py", "--mode=pytorch", true, kModels, false,
     nullptr, false, 2},
    {"pytorch_checkpoint", "baselines/pytorch/pytorch_bench.py", "--mode=checkpoint", true,
     kRecurrent, false, kLengthsUpTo10k},
    {"torchscript", "baselines/pytorch/pytorch_bench.py", "--mode=torchscript", true, nullptr,
     false, kPythonUpTo},
    {"torchscript_2t", "baselines/pytorch/pytorch_bench.py", "--mode=torchscript", true, kModels,
     false, nullptr, false, 2},
    {"torchscript_first_step", "baselines/pytorch/pytorch_bench.py",
     "--mode=torchscript --time_first_step", false, nullptr, false, kPythonUpTo},
    // Not a backend: the memory-bandwidth bound of an optimizer step (workloads/optimizer.h).
    {"bound", "bench_engine", "--optimizer=stream", true, "adamw", false, nullptr, false, 0, false,
     "a bound, not a backend: it moves an AdamW step's bytes without its arithmetic"},
};

inline const BackendSpec* find_backend(std::string_view name) {
  for (const BackendSpec& b : kBackends)
    if (name == b.name) return &b;
  return nullptr;
}
inline const BackendSpec& spec_of(std::string_view name) {
  if (const BackendSpec* b = find_backend(name)) return *b;
  std::abort();  // names come from kBackends
}
inline std::vector<std::string> backend_names() {
  std::vector<std::string> names;
  for (const BackendSpec& b : kBackends) names.push_back(b.name);
  return names;
}

// The threads a backend runs with in this run: a variant's own, --threads for the threaded
// backends, 1 for the others.
inline int threads_of(std::string_view backend, int run_threads) {
  const BackendSpec& spec = spec_of(backend);
  return spec.fixed_threads ? spec.fixed_threads : spec.threaded ? run_threads : 1;
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
