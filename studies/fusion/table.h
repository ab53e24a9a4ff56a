// studies/fusion/table.h: the study fusion's table in summary.txt (harness/runner/summary_text.h
// prints every study's after the main tables; "" when the run holds none of its data).
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <utility>

#include "harness/runner/summary_text.h"

namespace bp {

// Each compiler against the eager run of its own framework, row by row: the compiled mode over
// our engine, TorchScript with its fuser over TorchScript without; a cell that did not run says
// why in the main table. Only in a run with torchscript_fused (the study's own row), so that
// every other run with the compiled mode is not given this table too.
inline std::string fusion_table(const Summary& s) {
  const std::pair<const char*, const char*> pairs[] = {{"compiled", "engine"},
                                                       {"torchscript_fused", "torchscript"}};
  if (std::find(s.backends.begin(), s.backends.end(), "torchscript_fused") == s.backends.end())
    return "";
  std::string out = fmt::format(
      "\ncompilers against their eager runs: time per step, and its ratio to the eager one's\n"
      "{:<30} {:>24} {:>30}\n",
      "instance", "compiled / engine", "torchscript_fused / torchscript");
  for (const SummaryRow& row : s.rows) {
    out += fmt::format("{:<30}", row.instance);
    for (const auto& [fused, plain] : pairs) {
      const Cell *f = ran(row, fused), *p = ran(row, plain);
      const std::string cell =
          !f || !p ? "-"
                   : fmt::format("{} {}", human_time(f->median_seconds),
                                 human_ratio(f->median_seconds / p->median_seconds));
      out += fmt::format(" {:>{}}", cell, fused == pairs[0].first ? 24 : 30);
    }
    out += "\n";
  }
  return out;
}

}  // namespace bp
