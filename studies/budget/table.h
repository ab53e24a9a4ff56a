// studies/budget/table.h: the study budget's table in summary.txt (harness/runner/summary_text.h
// prints every study's after the main tables; "" when the run holds none of its data).
#pragma once

#include <fmt/format.h>

#include <string>

#include "harness/runner/summary_text.h"

namespace bp {

// The study budget: the compiled mode with and without a memory budget, per instance.
inline std::string budget_table(const Summary& s) {
  std::string out;
  for (const SummaryRow& row : s.rows) {
    const Cell *p = ran(row, "compiled"), *b = ran(row, "compiled_budget");
    if (!p || !b) continue;
    out +=
        fmt::format("  {:<28} {:>10} {:>10} {:>6} {:>10} {:>10} {:>10} {:>10} {:>6}\n",
                    row.instance, human_time(p->median_seconds), human_time(b->median_seconds),
                    human_ratio(b->median_seconds / p->median_seconds), human_mb(p->max_rss_bytes),
                    human_mb(b->max_rss_bytes), human_mb(p->counter("planned_arena_bytes")),
                    human_mb(b->counter("planned_arena_bytes")), b->counter("recomputed_nodes"));
  }
  if (out.empty()) return "";
  return fmt::format(
             "\ncompiled under a memory budget (compiled_budget) against without one:\n"
             "  {:<28} {:>10} {:>10} {:>6} {:>10} {:>10} {:>10} {:>10} {:>6}\n",
             "instance", "step", "budgeted", "ratio", "peak RSS", "budgeted", "arena", "budgeted",
             "recomp") +
         out;
}

}  // namespace bp
