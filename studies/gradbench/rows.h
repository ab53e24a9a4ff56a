// studies/gradbench/rows.h: the study gradbench's backends, ADOL-C (baselines/adolc/), the
// operator-overloading baseline: taped once and replayed, or taped every step. A variant names its
// backend (variant_of), and its column follows that backend's.
#pragma once

#include "harness/runner/backends.h"
#include "studies/main/rows.h"

namespace bp {

inline constexpr BackendSpec kGradbenchRows[] = {
    {.name = "adolc", .program = "bench_adolc", .color = "#377eb8", .marker = "P"},
    {.name = "adolc_retape",
     .variant_of = "adolc",
     .program = "bench_adolc",
     .mode_flags = "--taping=every_step",
     .color = "#a6cee3",
     .marker = "X"}};

}  // namespace bp
