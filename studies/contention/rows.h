// studies/contention/rows.h: the study contention's backends: ours compiled and libtorch at one
// thread and at two, each timed beside busy processes (bench_run --background; one at nice 0
// unless given), which are stopped during every other row's turns.
#pragma once

#include "harness/runner/backends.h"
#include "studies/threads/rows.h"

namespace bp {

inline constexpr BackendSpec kContentionRows[] = {{.name = "compiled_busy",
                                                   .variant_of = "compiled",
                                                   .program = "bench_compiled",
                                                   .threaded = true,
                                                   .only_workloads = kModels,
                                                   .shares_verdicts = true,
                                                   .measures_in_setup = true,
                                                   .color = "#3f6e12",
                                                   .marker = "P",
                                                   .plan_cache = true,
                                                   .under_load = true},
                                                  {.name = "compiled_2t_busy",
                                                   .variant_of = "compiled",
                                                   .program = "bench_compiled",
                                                   .threaded = true,
                                                   .only_workloads = kModels,
                                                   .shares_verdicts = true,
                                                   .fixed_threads = 2,
                                                   .measures_in_setup = true,
                                                   .color = "#7a9a3c",
                                                   .marker = "X",
                                                   .plan_cache = true,
                                                   .under_load = true},
                                                  {.name = "libtorch_busy",
                                                   .variant_of = "libtorch",
                                                   .program = "bench_libtorch",
                                                   .threaded = true,
                                                   .only_workloads = kModels,
                                                   .color = "#8a3c01",
                                                   .marker = "P",
                                                   .under_load = true},
                                                  {.name = "libtorch_2t_busy",
                                                   .variant_of = "libtorch",
                                                   .program = "bench_libtorch",
                                                   .threaded = true,
                                                   .only_workloads = kModels,
                                                   .fixed_threads = 2,
                                                   .color = "#e8955a",
                                                   .marker = "X",
                                                   .under_load = true}};

}  // namespace bp
