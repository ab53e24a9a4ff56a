// studies/threads/study.h: the study threads, two threads over one on the large model rows. Its
// page is README.md beside this file; its figure, figure.py (plots/plot.py draws it).
#pragma once

#include "harness/runner/studies.h"
#include "studies/threads/rows.h"
#include "studies/threads/table.h"

namespace bp {

inline constexpr Study kThreadsStudy{
    .name = "threads",
    .question = "what do two threads buy each backend on the large model rows?",
    .backends =
        "engine,engine_2t,compiled,compiled_2t,libtorch,libtorch_2t,pytorch,pytorch_2t,"
        "torchscript,torchscript_2t,torchscript_fused,torchscript_fused_2t",
    .workloads = "char_mlp,mini_gpt,mini_gpt_wide,mlp_width",
    .sizes = "hidden=1024 batch=8,32,64 width=1024,2048",
    .table = threads_table,
    .rows = kThreadsRows};

}  // namespace bp
