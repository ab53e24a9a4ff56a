// studies/registry.h: every study, in the order bench_run --list and --help show them. A study is
// its folder under studies/: study.h (its row: backends, workloads, sizes, and its phase and table
// if it has them), README.md (its page), and where it has them phase.cc, table.h and figure.py.
// Adding a study is its folder and one line here.
#pragma once

#include "studies/all/study.h"
#include "studies/bptt/study.h"
#include "studies/budget/study.h"
#include "studies/first_step/study.h"
#include "studies/gradbench/study.h"
#include "studies/gradbench_tensor/study.h"
#include "studies/kernels/study.h"
#include "studies/main/study.h"
#include "studies/optim/study.h"
#include "studies/threads/study.h"

namespace bp {

inline constexpr Study kStudyRegistry[] = {
    kMainStudy,    kBpttStudy,  kBudgetStudy,    kFirstStepStudy,       kKernelsStudy,
    kThreadsStudy, kOptimStudy, kGradbenchStudy, kGradbenchTensorStudy, kAllStudy};

}  // namespace bp
