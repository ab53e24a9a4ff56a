// studies/first_step/rows.h: the study first_step's backends, the cold starts: the compiled mode's
// first step, with and without a plan cache, and TorchScript's, with its CPU fuser and without. A
// variant names its backend (variant_of), and its column follows that backend's.
#pragma once

#include "harness/runner/backends.h"
#include "studies/main/rows.h"

namespace bp {

inline constexpr BackendSpec kFirstStepRows[] = {
    {.name = "compiled_first_step",
     .variant_of = "compiled",
     .program = "bench_compiled",
     .mode_flags = "--time_first_step",
     .default_sizes_up_to = kLengthsUpTo10k,
     .color = "#b3b3b3",
     .plan_cache = true},
    {.name = "compiled_warm_start",
     .variant_of = "compiled",
     .program = "bench_compiled",
     .mode_flags = "--time_first_step",
     .default_sizes_up_to = kLengthsUpTo10k,
     .warm_plans = true,
     .color = "#a6d854",
     .plan_cache = true},
    {.name = "torchscript_first_step",
     .variant_of = "torchscript",
     .program = "baselines/pytorch/pytorch_bench.py",
     .mode_flags = "--mode=torchscript --time_first_step",
     .default_sizes_up_to = kPythonUpTo,
     .color = "#f4a6c8"},
    // TorchScript with its CPU fuser on: its first step also compiles each fused group (NNC).
    {.name = "torchscript_fused_first_step",
     .variant_of = "torchscript",
     .program = "baselines/pytorch/pytorch_bench.py",
     .mode_flags = "--mode=torchscript_fused --time_first_step",
     // the model rows the fuser is for (the study fusion's); a process each costs a torch import
     .only_workloads = "char_mlp,mini_gpt,mini_gpt_wide,mlp_width,char_rnn,char_rnn_wide,"
                       "lstm_tensor,gmm_d10_tensor",
     .default_sizes_up_to = kPythonUpTo,
     .color = "#de77ae",
     .marker = "v"}};

}  // namespace bp
