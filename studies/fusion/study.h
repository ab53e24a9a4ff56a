// studies/fusion/study.h: the study fusion, the compiled mode against our eager engine beside
// TorchScript's fuser against TorchScript, on the model rows. Its page is README.md beside this
// file.
#pragma once

#include "harness/runner/studies.h"
#include "studies/fusion/rows.h"
#include "studies/fusion/table.h"

namespace bp {

inline constexpr Study kFusionStudy{
    .name = "fusion",
    .question =
        "what does compiling a step buy over its eager run, ours and TorchScript's with its CPU "
        "fuser?",
    .backends = "engine,compiled,compiled_unfused,torchscript,torchscript_fused",
    .workloads =
        "char_mlp,mini_gpt,mini_gpt_wide,mlp_width,char_rnn,char_rnn_wide,lstm_tensor,"
        "gmm_d10_tensor",
    .sizes = "hidden=1024 batch=1,32,64 width=2048 length=100 chars=256,1024 k=25",
    .table = fusion_table,
    .rows = kFusionRows};

}  // namespace bp
