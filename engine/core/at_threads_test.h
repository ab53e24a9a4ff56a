// engine/core/at_threads_test.h: for tests, the engine's pool at n threads for a scope, and every
// kernel forced to split (thresholds of one) when asked, so that small test shapes take the
// threaded paths; restored to one thread and the default thresholds after.
#pragma once

#include "engine/core/threads.h"

struct AtThreads {
  bp::SplitThresholds saved = bp::split_thresholds();
  AtThreads(int n, bool split_all) {
    bp::thread_pool().resize(n);
    if (split_all) bp::split_thresholds() = {1, 1, 1};
  }
  ~AtThreads() {
    bp::thread_pool().resize(1);
    bp::split_thresholds() = saved;
  }
};
