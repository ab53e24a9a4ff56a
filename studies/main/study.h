// studies/main/study.h: the study main, every workload on the five main backends at the sizes that
// show who wins. Its page is README.md beside this file; its figures are the main ones
// (plots/plot.py).
#pragma once

#include "harness/runner/studies.h"
#include "studies/main/rows.h"

namespace bp {

inline constexpr Study kMainStudy{
    .name = "main",
    .question = "how much faster and smaller is our engine than the torch backends, per workload?",
    .backends = kMainBackends,
    .workloads = "",
    .sizes =
        "nodes=10,1000,100000 hidden=64,1024 batch=1,32 width=16,256,2048 length=100 "
        "params=1000000",
    .rows = kMainRows};

}  // namespace bp
