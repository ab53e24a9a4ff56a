// studies/budget/rows.h: the study budget's backends, the compiled mode under a memory budget. A
// variant names its backend (variant_of), and its column follows that backend's.
#pragma once

#include "harness/runner/backends.h"
#include "studies/main/rows.h"

namespace bp {

inline constexpr BackendSpec kBudgetRows[] = {{.name = "compiled_budget",
                                               .variant_of = "compiled",
                                               .program = "bench_compiled",
                                               .mode_flags = "--memory_budget=0.5",
                                               .only_workloads = "mini_gpt_wide",
                                               .shares_verdicts = true,
                                               .measures_in_setup = true,
                                               .color = "#a6d854",
                                               .plan_cache = true}};

}  // namespace bp
