// studies/gradbench_tensor/study.h: the study gradbench_tensor, GradBench's lstm and gmm as tensor
// code, against the torch backends. Its page is README.md beside this file; its figures are the
// main ones (plots/plot.py).
#pragma once

#include "harness/runner/studies.h"

namespace bp {

inline constexpr Study kGradbenchTensorStudy{
    .name = "gradbench_tensor",
    .question =
        "GradBench's lstm and gmm as tensor code: is our tensor engine ahead of the torch "
        "backends?",
    .backends = "engine,compiled,libtorch,pytorch,torchscript",
    .workloads = "lstm_tensor,gmm_d2_tensor,gmm_d10_tensor",
    .sizes = "chars=1024,4096,8192 k=5,10,25,50,100,200"};

}  // namespace bp
