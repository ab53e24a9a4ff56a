// studies/fusion/rows.h: the study fusion's backend, TorchScript with its CPU fuser on: the
// compiler peer for the compiled mode's fused loops. A variant names its backend (variant_of), and
// its column follows that backend's.
#pragma once

#include "harness/runner/backends.h"
#include "studies/main/rows.h"

namespace bp {

inline constexpr BackendSpec kFusionRows[] = {
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
