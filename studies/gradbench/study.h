// studies/gradbench/study.h: the study gradbench, GradBench's evals at its sizes, against ADOL-C.
// Its page is README.md beside this file; its figures are the main ones (plots/plot.py).
#pragma once

#include "harness/runner/studies.h"
#include "studies/gradbench/rows.h"

namespace bp {

inline constexpr Study kGradbenchStudy{
    .name = "gradbench",
    .question =
        "GradBench's evals at its sizes: how does our engine fare against ADOL-C on another "
        "suite's workloads?",
    .backends = "engine,compiled,adolc,adolc_retape",
    .workloads = "tiny_graph,small_graph,scalar_chain,lse,llsq,lstm,gmm_d2,gmm_d10,ode,det",
    .sizes =
        "nodes=10,1000,100000 elements=2500,20000,160000,1280000 points=16,128,1024,16392 "
        "chars=1024,4096,8192 k=5,10,25,50,100 equations=100,1000,10000 ell=5,6,7,8,9,10",
    .rows = kGradbenchRows};

}  // namespace bp
