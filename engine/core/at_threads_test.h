// engine/core/at_threads_test.h: for tests, the engine's pool at n threads for a scope, under the
// kernels' own thresholds or forced ones so that small test shapes take the threaded paths:
// every kernel split, or a backward's two products side by side (none split); restored to one
// thread and the default thresholds after.
#pragma once

#include <cstdint>
#include <limits>

#include "engine/core/threads.h"

enum class Forced { nothing, every_split, products_side_by_side };
inline constexpr Forced kEveryWayOfSplitting[] = {Forced::nothing, Forced::every_split,
                                                  Forced::products_side_by_side};
inline const char* forced_name(Forced f) {
  return f == Forced::nothing       ? ""
         : f == Forced::every_split ? ", every kernel split"
                                    : ", products side by side";
}

struct AtThreads {
  bp::SplitThresholds saved = bp::split_thresholds();
  AtThreads(int n, Forced forced) {
    bp::thread_pool().resize(n);
    if (forced == Forced::every_split) bp::split_thresholds() = {1, 1, 1, 1};
    if (forced == Forced::products_side_by_side)
      bp::split_thresholds() = {saved.elems, std::numeric_limits<int64_t>::max(), saved.rows, 1};
  }
  ~AtThreads() {
    bp::thread_pool().resize(1);
    bp::split_thresholds() = saved;
  }
};
