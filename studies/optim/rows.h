// studies/optim/rows.h: the study optim's backends, the memory-bandwidth bound of an optimizer step
// (not a backend: workloads/optimizer.h). A variant names its backend (variant_of), and its column
// follows that backend's.
#pragma once

#include "harness/runner/backends.h"
#include "studies/main/rows.h"

namespace bp {

inline constexpr BackendSpec kOptimRows[] = {
    {.name = "bound",
     .program = "bench_engine",
     .mode_flags = "--optimizer=stream",
     .threaded = true,
     .only_workloads = "adamw",
     .not_judged = "a bound, not a backend: it moves an AdamW step's bytes without its arithmetic",
     .color = "#444444"}};

}  // namespace bp
