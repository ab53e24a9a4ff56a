// studies/contention/study.h: the study contention, ours (compiled and eager) and libtorch at one
// thread and two, on an idle machine and beside busy processes, on the large model rows. Its page
// is README.md beside this file; its figure, figure.py (plots/plot.py draws it).
#pragma once

#include "harness/runner/studies.h"
#include "studies/contention/rows.h"
#include "studies/contention/table.h"

namespace bp {

inline constexpr Study kContentionStudy{
    .name = "contention",
    .question = "do two threads still pay when other work shares the machine?",
    .backends =
        "compiled,compiled_2t,compiled_busy,compiled_2t_busy,engine,engine_2t,engine_busy,"
        "engine_2t_busy,libtorch,libtorch_2t,libtorch_busy,libtorch_2t_busy",
    .workloads = "char_mlp,mini_gpt,mini_gpt_wide,mlp_width",
    .sizes = "hidden=1024 batch=32,64 width=2048",
    .table = contention_table,
    .rows = kContentionRows};

}  // namespace bp
