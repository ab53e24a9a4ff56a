// studies/budget/study.h: the study budget, the compiled mode under half its memory. Its page is
// README.md beside this file; its figure, figure.py (plots/plot.py draws it).
#pragma once

#include "harness/runner/studies.h"
#include "studies/budget/rows.h"
#include "studies/budget/table.h"

namespace bp {

inline constexpr Study kBudgetStudy{
    .name = "budget",
    .question = "what does planning under half its memory cost the compiled mode?",
    .backends = "engine,compiled,compiled_budget",
    .workloads = "mini_gpt_wide",
    .sizes = "",
    .table = budget_table,
    .rows = kBudgetRows};

}  // namespace bp
