// studies/first_step/table.h: the study first_step's table in summary.txt
// (harness/runner/summary_text.h prints every study's after the main tables; "" when the run holds
// none of its data).
#pragma once

#include <fmt/format.h>

#include <string>

#include "harness/runner/summary_text.h"

namespace bp {

// The study first_step: the time to a first step from a cold start, with the plan cache empty
// (cold) and holding the plan (warm), against a step; TorchScript's first step beside them, with
// its CPU fuser and without.
inline std::string first_step_table(const Summary& s) {
  std::string out;
  auto compile_of = [](const Cell* c) {
    return c ? human_time(c->counter("compile_seconds")) : std::string("-");
  };
  for (const SummaryRow& row : s.rows) {
    const Cell *step = ran(row, "compiled"), *cold = ran(row, "compiled_first_step");
    if (!step || !cold) continue;
    const Cell *warm = ran(row, "compiled_warm_start"), *ts = ran(row, "torchscript_first_step"),
               *fused = ran(row, "torchscript_fused_first_step");
    out += fmt::format(
        "  {:<30} {:>10} {:>10} {:>10} {:>7} {:>10} {:>10} {:>10} {:>10}\n", row.instance,
        time_or_dash(step), time_or_dash(cold), time_or_dash(warm),
        warm ? fmt::format("{:.1f}%", 100 * warm->median_seconds / cold->median_seconds) : "-",
        compile_of(cold), compile_of(warm), time_or_dash(ts), time_or_dash(fused));
  }
  if (out.empty()) return "";
  return fmt::format(
             "\nfirst step from a cold start, compiled: plan cache empty (cold) and holding the "
             "plan "
             "(warm), and its compile;\nTorchScript's first step, its CPU fuser off and on:\n"
             "  {:<30} {:>10} {:>10} {:>10} {:>7} {:>10} {:>10} {:>10} {:>10}\n",
             "instance", "step", "cold", "warm", "w/cold", "comp cold", "comp warm", "torchscript",
             "ts fused") +
         out;
}

}  // namespace bp
