// studies/fusion/rows.h: the study fusion's backends: the compiled mode without its fused groups,
// and TorchScript with its CPU fuser on, the compiler peer for them. A variant names its backend
// (variant_of), and its column follows that backend's.
#pragma once

#include "harness/runner/backends.h"
#include "studies/main/rows.h"

namespace bp {

inline constexpr BackendSpec kFusionRows[] = {
    // The compiled mode with its tiled groups off: fusion's before, beside `compiled`'s after.
    {.name = "compiled_unfused",
     .variant_of = "compiled",
     .program = "bench_compiled",
     .mode_flags = "--fusion=off",
     .threaded = true,
     .default_sizes_up_to = kLengthsUpTo10k,
     .shares_verdicts = true,
     .measures_in_setup = true,
     .color = "#a6d96a",
     .marker = "d",
     .plan_cache = true},
    {.name = "torchscript_fused",
     .variant_of = "torchscript",
     .program = "baselines/pytorch/pytorch_bench.py",
     .mode_flags = "--mode=torchscript_fused",
     .threaded = true,
     .only_workloads = "char_mlp,mini_gpt,mini_gpt_wide,mlp_width,char_rnn,char_rnn_wide,"
                       "lstm_tensor,gmm_d10_tensor",
     .default_sizes_up_to = kPythonUpTo,
     .color = "#c51b7d",
     .marker = "v"}};

}  // namespace bp
