// workloads/registry.h: the list of workloads every backend binary registers, in this order.
//
// Adding a workload is one line here plus its own header. A backend that does not satisfy the
// concept a workload's Run<B> requires reports that workload as skipped (see harness/backend_main.h).
#pragma once

#include <tuple>

#include "workloads/models.h"
#include "workloads/scalar.h"

namespace bp {

using Workloads = std::tuple<EmptyStep, TinyGraph, SmallGraph, ScalarChain, CharMlp, MiniGpt,
                             MiniGptWide, MlpWidth>;

}  // namespace bp
