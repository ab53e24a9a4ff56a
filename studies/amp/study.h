// studies/amp/study.h: the study amp, mixed precision (bf16 products, float32 master weights and
// optimizer) against float32, ours and torch.autocast's, on the model rows. Its page is README.md
// beside this file.
#pragma once

#include "harness/runner/studies.h"
#include "studies/amp/rows.h"
#include "studies/amp/table.h"

namespace bp {

inline constexpr Study kAmpStudy{
    .name = "amp",
    .question =
        "what does bf16 buy each backend in time and memory on the model rows, and is the "
        "loss still right?",
    .backends =
        "engine,engine_bf16,compiled,compiled_bf16,libtorch,libtorch_bf16,pytorch,pytorch_bf16,"
        "torchscript,torchscript_bf16",
    .workloads = "char_mlp,mini_gpt_wide,mlp_width,char_rnn_wide",
    .sizes = "hidden=1024 batch=32 width=2048 length=100",
    .table = amp_table,
    .rows = kAmpRows,
    .check_steps = 200};  // its check trains each model 200 steps: the loss curves of amp.png

}  // namespace bp
