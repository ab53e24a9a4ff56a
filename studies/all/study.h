// studies/all/study.h: the study all, everything: every backend and size, every study's phase. Its
// page is README.md beside this file; its figures are the main ones (plots/plot.py).
#pragma once

#include "harness/runner/studies.h"

namespace bp {

inline constexpr Study kAllStudy{
    .name = "all",
    .question = "everything: every backend and size, and every study's own measurement",
    .backends = "",
    .workloads = "",
    .sizes = "",
    .everything = true};

}  // namespace bp
