// studies/kernels/study.h: the study kernels, every matmul dialect kernel by kernel, against the
// FMA peak (kernel_rows.h, phase.cc). Its page is README.md beside this file; its figure, figure.py
// (plots/plot.py draws it).
#pragma once

#include "harness/runner/studies.h"
#include "studies/kernels/phase.h"
#include "studies/kernels/table.h"

namespace bp {

inline constexpr Study kKernelsStudy{
    .name = "kernels",
    .question = "which matmul kernel is fastest on each op shape, and how near the FMA peak?",
    .backends = "engine,compiled",
    .workloads = "char_mlp,mlp_width,mini_gpt",
    .sizes = "hidden=1024 width=2048 batch=1",
    .phase = kernel_rows_phase,
    .table = kernels_table};

}  // namespace bp
