// studies/fusion/table.h: the study fusion's table in summary.txt (harness/runner/summary_text.h
// prints every study's after the main tables; "" when the run holds none of its data).
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "harness/runner/summary_text.h"

namespace bp {

// Each compiler against the eager run of its own framework, row by row: the compiled mode over
// our engine, TorchScript with its fuser over TorchScript without; a cell that did not run says
// why in the main table. Beside ours, its program's size: instructions and the bytes they move
// per step (program_ir::bytes_moved, a model from the shapes), what fusion is to bring down.
// Only in a run with torchscript_fused (the study's own row), so that every other run with the
// compiled mode is not given this table too.
inline std::string fusion_table(const Summary& s) {
  if (std::find(s.backends.begin(), s.backends.end(), "torchscript_fused") == s.backends.end())
    return "";
  const auto ratio_cell = [](const SummaryRow& row, const char* fused, const char* plain) {
    const Cell *f = ran(row, fused), *p = ran(row, plain);
    return !f || !p ? std::string("-")
                    : fmt::format("{} {}", human_time(f->median_seconds),
                                  human_ratio(f->median_seconds / p->median_seconds));
  };
  std::string out = fmt::format(
      "\ncompilers against their eager runs: time per step, and its ratio to the eager one's; "
      "the compiled program's\ninstructions and the bytes they move per step (modelled)\n"
      "{:<30} {:>22} {:>12} {:>11} {:>31}\n",
      "instance", "compiled / engine", "instructions", "moved", "torchscript_fused / torchscript");
  for (const SummaryRow& row : s.rows) {
    const Cell* c = ran(row, "compiled");
    const double instructions = c ? c->counter("instructions") : NAN;
    const double moved = c ? c->counter("bytes_moved") : NAN;
    out += fmt::format("{:<30} {:>22} {:>12} {:>11} {:>31}\n", row.instance,
                       ratio_cell(row, "compiled", "engine"),
                       std::isfinite(instructions) ? fmt::format("{:.0f}", instructions) : "-",
                       !std::isfinite(moved) ? "-"
                       : moved < 1e6         ? fmt::format("{:.1f} KB", moved / 1e3)
                                             : human_mb(moved),
                       ratio_cell(row, "torchscript_fused", "torchscript"));
  }
  return out;
}

}  // namespace bp
