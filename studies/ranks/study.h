// studies/ranks/study.h: the study ranks, data parallel: two ranks of one thread against one rank
// of two threads, ours against libtorch over Gloo and PyTorch's DDP. Its page is README.md beside
// this file; its figure, figure.py (plots/plot.py draws it).
#pragma once

#include "harness/runner/studies.h"
#include "studies/ranks/rows.h"
#include "studies/ranks/table.h"

namespace bp {

inline constexpr Study kRanksStudy{
    .name = "ranks",
    .question = "what do N data-parallel ranks give each backend, against one rank of N threads?",
    .backends =
        "compiled,compiled_2t,engine_ranks,compiled_ranks,compiled_zero,libtorch_ranks,"
        "pytorch_ranks",
    .workloads = "char_mlp,mini_gpt_wide,mlp_width",
    .sizes = "hidden=1024 batch=32 width=2048",
    .table = ranks_table,
    .rows = kRanksRows};

}  // namespace bp
