// engine/core/at_threads_test.h: for tests, the engine's pool at n threads for a scope, under the
// kernels' own thresholds or forced ones so that small test shapes take the threaded paths:
// every kernel split, a backward's two products side by side (none split), or the compiled
// mode's independent ops side by side (none split); restored to one thread and the default
// thresholds after.
#pragma once

#include <cstdint>
#include <limits>

#include "engine/runtime/threads.h"

enum class Forced { nothing, every_split, products_side_by_side, ops_side_by_side };
inline constexpr Forced kEveryWayOfSplitting[] = {
    Forced::nothing, Forced::every_split, Forced::products_side_by_side, Forced::ops_side_by_side};
inline const char* forced_name(Forced f) {
  return f == Forced::nothing                 ? ""
         : f == Forced::every_split           ? ", every kernel split"
         : f == Forced::products_side_by_side ? ", products side by side"
                                              : ", independent ops side by side";
}

struct AtThreads {
  bp::SplitThresholds saved = bp::split_thresholds();
  AtThreads(int n, Forced forced) {
    bp::thread_pool().resize(n);
    if (forced == Forced::every_split) bp::split_thresholds() = {1, 1, 1, 1};
    constexpr int64_t kNever = std::numeric_limits<int64_t>::max();
    if (forced == Forced::products_side_by_side)
      bp::split_thresholds() = {saved.elems, kNever, saved.rows, 1, saved.side_by_side};
    if (forced == Forced::ops_side_by_side)  // no kernel splits; every wave of ops in parts
      bp::split_thresholds() = {kNever, kNever, saved.rows, kNever, 0};
  }
  ~AtThreads() {
    bp::thread_pool().delay_worker_for_tests(0, 0, false);
    bp::thread_pool().machine_has_room_for_tests(-1);
    bp::thread_pool().resize(1);
    bp::split_thresholds() = saved;
  }
};
