// studies/bptt/table.h: the study bptt's table in summary.txt (harness/runner/summary_text.h
// prints every study's after the main tables; "" when the run holds none of its data).
#pragma once

#include <fmt/format.h>

#include <string>

#include "harness/runner/summary_text.h"

namespace bp {

// The study bptt: the interval sweep, and what each checkpointing strategy recomputed.
inline std::string bptt_table(const Summary& s) {
  std::string out;
  if (s.intervals.is_array() && !s.intervals.empty()) {
    out +=
        "\nmultistage against its checkpoint interval k, time per sequence over store-all's "
        "(medians of 5 paired ratios):\n";
    std::map<std::string, std::string> lines;  // "workload length" -> its k's
    for (JsonView r : JsonView(s.intervals).elements()) {
      std::string& line =
          lines[fmt::format("{} length {}", r["workload"].str_or("?"), r["length"].num_or(NAN))];
      const std::string k = r["k"].str_or("?");
      line += k == "auto" ? fmt::format(" auto (k={:.0f}) {:.2f}x;", r["interval"].num_or(NAN),
                                        r["slowdown"].num_or(NAN))
                          : fmt::format(" {} {:.2f}x;", k, r["slowdown"].num_or(NAN));
    }
    for (const auto& [what, line] : lines) out += wrapped(fmt::format("  {}:{}", what, line), 4);
  }
  std::string recomputed;
  for (const SummaryRow& row : s.rows) {
    const Cell* c = ran(row, "engine_revolve");
    if (!c || !c->counters.count("measured_advance_ratio") ||
        !c->counters.count("predicted_advanced_per_step"))
      continue;
    recomputed += fmt::format("  {:<30} measured {:6.2f}, t(n, c)/n {:6.2f}\n", row.instance,
                              c->counter("measured_advance_ratio"),
                              c->counter("predicted_advanced_per_step"));
  }
  if (!recomputed.empty())
    out += "\nRevolve's recomputation, steps advanced per step: measured against its minimum:\n" +
           recomputed;
  return out;
}

}  // namespace bp
