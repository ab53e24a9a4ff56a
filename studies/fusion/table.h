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
// our engine, with its fused groups and without, TorchScript with its fuser over TorchScript
// without; a cell that did not run says why in the main table. Beside ours, its fused groups and
// the bytes its program moves per step (program_ir::bytes_moved, a model from the shapes), fused
// and not. Only in a run with torchscript_fused (the study's own row), so that every other run
// with the compiled mode is not given this table too.
inline std::string fusion_table(const Summary& s) {
  if (std::find(s.backends.begin(), s.backends.end(), "torchscript_fused") == s.backends.end())
    return "";
  const auto ratio_cell = [](const SummaryRow& row, const char* fused, const char* plain) {
    const Cell *f = ran(row, fused), *p = ran(row, plain);
    return !f || !p ? std::string("-")
                    : fmt::format("{} {}", human_time(f->median_seconds),
                                  human_ratio(f->median_seconds / p->median_seconds));
  };
  const auto bytes = [](double b) {
    return !std::isfinite(b) ? std::string("-")
           : b < 1e6         ? fmt::format("{:.1f} KB", b / 1e3)
                             : human_mb(b);
  };
  std::string out = fmt::format(
      "\ncompilers against their eager runs: time per step and its ratio to the eager one's; the "
      "compiled program's\nfused groups (of its instructions) and the bytes it moves per step, "
      "fused and unfused (modelled)\n{:<28} {:>17} {:>17} {:>10} {:>9} {:>9} {:>17}\n",
      "instance", "compiled / engine", "unfused / engine", "groups", "moved", "unfused",
      "ts_fused / ts");
  for (const SummaryRow& row : s.rows) {
    const Cell* c = ran(row, "compiled");
    const auto count = [&](const char* name) { return c ? c->counter(name) : NAN; };
    const std::string groups =
        std::isfinite(count("fused_groups"))
            ? fmt::format("{:.0f}/{:.0f}", count("fused_groups"), count("instructions"))
            : "-";
    out += fmt::format("{:<28} {:>17} {:>17} {:>10} {:>9} {:>9} {:>17}\n", row.instance,
                       ratio_cell(row, "compiled", "engine"),
                       ratio_cell(row, "compiled_unfused", "engine"), groups,
                       bytes(count("bytes_moved")), bytes(count("bytes_moved_unfused")),
                       ratio_cell(row, "torchscript_fused", "torchscript"));
  }
  return out;
}

}  // namespace bp
