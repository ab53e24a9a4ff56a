// studies/optim/study.h: the study optim, the optimizer alone against the memory bandwidth its
// bytes need. Its page is README.md beside this file; its figure, figure.py (plots/plot.py draws
// it).
#pragma once

#include "harness/runner/studies.h"
#include "studies/optim/rows.h"
#include "studies/optim/table.h"

namespace bp {

inline constexpr Study kOptimStudy{
    .name = "optim",
    .question = "what does the optimizer alone cost against the memory bandwidth its bytes need?",
    .backends = "engine,compiled,libtorch,pytorch,bound",
    .workloads = "adamw",
    .sizes = "params=100000,1000000,10000000",
    .table = optim_table,
    .rows = kOptimRows};

}  // namespace bp
