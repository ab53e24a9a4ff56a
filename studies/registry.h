// studies/registry.h: every study, in the order bench_run --list and --help show them. A study is
// its folder under studies/: study.h (its row: backends, workloads, sizes, and its phase and table
// if it has them), README.md (its page), and where it has them phase.cc, table.h and figure.py.
// Adding a study is its folder and one line here: its rows join the table of backends below.
#pragma once

#include <array>
#include <string_view>
#include <utility>

#include "studies/all/study.h"
#include "studies/amp/study.h"
#include "studies/bptt/study.h"
#include "studies/budget/study.h"
#include "studies/contention/study.h"
#include "studies/first_step/study.h"
#include "studies/fusion/study.h"
#include "studies/gradbench/study.h"
#include "studies/gradbench_tensor/study.h"
#include "studies/isa/study.h"
#include "studies/kernels/study.h"
#include "studies/main/study.h"
#include "studies/optim/study.h"
#include "studies/ranks/study.h"
#include "studies/threads/study.h"

namespace bp {

inline constexpr Study kStudyRegistry[] = {kMainStudy,
                                           kBpttStudy,
                                           kBudgetStudy,
                                           kFirstStepStudy,
                                           kFusionStudy,
                                           kKernelsStudy,
                                           kThreadsStudy,
                                           kContentionStudy,
                                           kOptimStudy,
                                           kGradbenchStudy,
                                           kGradbenchTensorStudy,
                                           kAmpStudy,
                                           kRanksStudy,
                                           kIsaStudy,
                                           kAllStudy};

// Every study's rows in one table: backends in the order the studies first name them, each
// variant right after its backend and that backend's earlier variants.
inline constexpr size_t kBackendCount = [] {
  size_t n = 0;
  for (const Study& s : kStudyRegistry) n += s.rows.size();
  return n;
}();
inline constexpr std::array<BackendSpec, kBackendCount> kBackendRegistry = [] {
  std::array<BackendSpec, kBackendCount> all{};
  std::array<size_t, kBackendCount> base{};  // where each row's backend first appears
  size_t n = 0;
  for (const Study& s : kStudyRegistry)
    for (const BackendSpec& b : s.rows) all[n++] = b;
  for (size_t i = 0; i < n; i++) {
    const std::string_view of = all[i].variant_of ? all[i].variant_of : all[i].name;
    base[i] = i;
    for (size_t j = 0; j < n; j++)
      if (std::string_view(all[j].name) == of) base[i] = j;
  }
  for (size_t i = 1; i < n; i++)  // insertion sort by backend: stable, and constexpr
    for (size_t j = i; j > 0 && base[j - 1] > base[j]; j--)
      std::swap(all[j - 1], all[j]), std::swap(base[j - 1], base[j]);
  return all;
}();
constexpr bool backend_names_are_unique() {
  for (size_t i = 0; i < kBackendCount; i++)
    for (size_t j = 0; j < i; j++)
      if (std::string_view(kBackendRegistry[i].name) == kBackendRegistry[j].name) return false;
  return true;
}
static_assert(backend_names_are_unique(), "two studies' rows.h name one backend");

}  // namespace bp
