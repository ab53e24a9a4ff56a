// studies/first_step/study.h: the study first_step, a cold start to the first step, with and
// without a cached plan. Its page is README.md beside this file; its figure, figure.py
// (plots/plot.py draws it).
#pragma once

#include "harness/runner/studies.h"
#include "studies/first_step/rows.h"
#include "studies/first_step/table.h"

namespace bp {

inline constexpr Study kFirstStepStudy{
    .name = "first_step",
    .question =
        "how long from a cold start to the first step, with and without a cached plan, against a "
        "step and TorchScript's?",
    .backends =
        "engine,compiled,compiled_first_step,compiled_warm_start,torchscript,"
        "torchscript_first_step,torchscript_fused_first_step",
    .workloads = "",
    .sizes = "length=100,1000 params=100000",
    .table = first_step_table,
    .rows = kFirstStepRows};

}  // namespace bp
