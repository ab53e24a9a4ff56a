// harness/common/protocol.h: what bench_run tells a backend process, and what the process writes
// back. This comment is the whole protocol; harness/driver/backend_main.h implements it for the C++
// backends and baselines/pytorch/pytorch_bench.py for Python.
//
// In, as flags (bench_run validated everything against workloads/registry.h first):
//   --instance=workload=W[,size=N][,name=NAME][,check_steps=S]
//                   one per instance to run, in the order given. NAME is the benchmark name to
//                   report under (harness/common/names.h); S the training steps a model's check
//                   reports. bench_run always gives all four (size only for sized workloads); a C++
//                   binary run by hand takes the registry's values for what is left out, and with
//                   no
//                   --instance at all registers every workload at its default sizes.
//   --threads=N     intra-op threads (only to backends that have them)
//   --backend_name=NAME   a variant's name (harness/runner/backends.h), what its results call it
//   --data=FILE     the character corpus, when a selected model reads one
//   --warmup_steps=N   untimed steps after each setup, before the timed ones (default 3): every
//                   backend times its steady state (TorchScript optimises its graph over the
//                   first runs; an engine touches its arena's fresh pages in the first two)
//   --warm_once     set up and warm up once, on a benchmark's first repetition, and time every
//                   later repetition on that same run, which goes on training (bench_run gives
//                   it to benchmarks whose step lasts --benchmark_min_time or longer, a step a
//                   repetition: their setups and warm-ups would be most of their time)
//   --check_out=FILE   run the correctness check of every instance instead of benchmarks
//   --take_turns    benchmarks of one row run in processes alive together, one timing at a time:
//                   before each repetition's timed loop, after its setup and warm-up, the
//                   process writes a line to fd 4 and waits for a line on fd 3 ("go"), one turn
//                   per repetition (Google Benchmark's iteration search runs inside the first:
//                   harness/driver/backend_main.h); at end-of-file on fd 3 it exits with status 0.
//                   Only the process whose turn it is computes. So a slow drift of the machine
//                   hits every backend of the row alike, and repetition i of one backend is
//                   paired with repetition i of another (bench_run, harness/runner/results.h).
//   and otherwise Google Benchmark's own flags: --benchmark_out=FILE --benchmark_out_format=json
//   --benchmark_repetitions=N --benchmark_min_time=S --benchmark_display_aggregates_only=true.
// Out:
//   benchmarks: Google Benchmark's JSON, one entry per repetition plus the aggregates, with the
//     counter `peak_rss_bytes` and a context naming the backend, its version, threads and build.
//   the check: {"context": {...}, "records": [...]}, one record per instance, raw numbers only
//     (harness/runner/judge.h decides what agrees, with the tolerances and known answers of the
//     registry): scalar graph: {"name", "status": "ok",
//                    "step": {"value", "grads": [num_grads]},          first step on a new setup
//                    "step_after_reset": {"value", "grads"}}           the second, same setup
//                   past kCheckedGrads gradients (GradBench's evals), "grads" holds those of
//                   checked_grad_indices (workloads/plain_backend.h) and the step also says
//                   "grad_of": [their indices] and "num_grads": how many the step has
//     model:        {"name", "status": "ok",
//                    "step0": {"loss", "grad_norms": [one per parameter, in creation order]},
//                    "step0_after_reset": {...}   step 0 again on the same setup after zero_grad
//                                                 and end_step, before any update
//                    "step0_fresh_setup": {...}   step 0 on a second setup, made after the first
//                                                 one trained
//                    "losses": [check_steps]}     training losses from step 0 on (SGD/AdamW
//                                                 updates between them)
//                   under --precision=bf16, "bf16_sums": "bfloat16" where its bf16 products
//                   also sum in bfloat16 (judged at bf16_sums_tolerance: workloads/workload.h)
//     both, also:   "step_seconds": the check's wall time over its steps (setups included),
//                   which the runner plans long benchmarks' repetitions with (bench_plan.h,
//                   plan_of)
//     otherwise:    {"name", "status": "failed" | "skipped" | "out_of_memory", "message"}
//     A number that is not finite is written as null.
//   Bad flags: one line "error: ..." on stderr and exit status 2.
//   Out of memory while benchmarking (an allocation refused, e.g. under the memory limit the
//   runner sets): one line "out of memory: ..." on stderr and exit status 12 (ENOMEM).
#pragma once

namespace bp {
inline constexpr int kExitOutOfMemory = 12;  // ENOMEM: see "Out of memory" above
}  // namespace bp

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "harness/common/text.h"

namespace bp {

struct InstanceSpec {
  std::string workload = {};
  std::optional<int64_t> size = {};  // none: the workload's first default size (or no size)
  std::string name = {};             // empty: the backend names it
  int check_steps = 0;               // 0: the registry's
};

// --precision: fp32 (the default) or bf16, on every backend and bench_run; anything else is
// refused with this line (`given` is the flag as written, e.g. "--precision=fp16").
inline bool valid_precision(std::string_view p) { return p == "fp32" || p == "bf16"; }
inline std::string precision_refusal(std::string_view given, std::string_view p) {
  std::string why = std::string(given) +
                    ": valid: fp32 (the default), bf16 (bfloat16 products, float32 accumulation, "
                    "master weights and optimizer)";
  if (p == "fp16" || p == "fp8")
    why += "; " + std::string(p) + " is not supported (no CPU kernels for it here)";
  return why;
}

inline std::string instance_flag(const InstanceSpec& s) {
  std::string f = "--instance=workload=" + s.workload;
  if (s.size) f += ",size=" + std::to_string(*s.size);
  if (!s.name.empty()) f += ",name=" + s.name;
  if (s.check_steps) f += ",check_steps=" + std::to_string(s.check_steps);
  return f;
}

// The value of --instance= (without the flag), or nullopt with *error saying what is wrong.
inline std::optional<InstanceSpec> parse_instance_spec(const std::string& text,
                                                       std::string* error) {
  InstanceSpec s;
  for (const std::string& field : split(text, ',')) {
    const size_t eq = field.find('=');
    const std::string key = field.substr(0, eq),
                      value = eq == std::string::npos ? "" : field.substr(eq + 1);
    std::optional<int64_t> number = parse_whole(value);
    if (eq == std::string::npos || value.empty()) {
      *error = "--instance=" + text + ": '" + field + "' is not KEY=VALUE";
      return std::nullopt;
    } else if (key == "workload") {
      s.workload = value;
    } else if (key == "name") {
      s.name = value;
    } else if ((key == "size" || key == "check_steps") && !number) {
      *error = "--instance=" + text + ": " + key + " '" + value + "' is not a whole number";
      return std::nullopt;
    } else if (key == "size") {
      s.size = *number;
    } else if (key == "check_steps" && *number >= 1 && *number <= 100000) {
      s.check_steps = int(*number);
    } else {
      *error = "--instance=" + text + ": unknown or invalid '" + field +
               "'; keys: workload, size, name, check_steps (1 to 100000)";
      return std::nullopt;
    }
  }
  if (s.workload.empty()) {
    *error = "--instance=" + text + ": name the workload (workload=W)";
    return std::nullopt;
  }
  return s;
}

}  // namespace bp
