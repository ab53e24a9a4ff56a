// studies/amp/table.h: the study amp's table in summary.txt (harness/runner/summary_text.h prints
// every study's after the main tables; "" when the run holds none of its data).
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <string>

#include "harness/runner/summary_text.h"

namespace bp {

// Each backend under bf16 against itself in float32, row by row: time per step and peak RSS,
// each as bf16's over float32's; then the last training loss of the check (200 steps in this
// study) under bf16 against float32's. Only in a run with a bf16 row.
inline std::string amp_table(const Summary& s) {
  static constexpr const char* kPairs[][2] = {{"engine_bf16", "engine"},
                                              {"compiled_bf16", "compiled"},
                                              {"libtorch_bf16", "libtorch"},
                                              {"pytorch_bf16", "pytorch"},
                                              {"torchscript_bf16", "torchscript"}};
  bool any = false;
  for (const auto& p : kPairs)
    any |= std::find(s.backends.begin(), s.backends.end(), p[0]) != s.backends.end();
  if (!any) return "";
  const auto cell = [](const SummaryRow& row, const char* bf16, const char* fp32, bool memory) {
    const Cell *b = ran(row, bf16), *f = ran(row, fp32);
    if (!b || !f) return std::string("-");
    return memory ? human_ratio(b->max_rss_bytes / f->max_rss_bytes)
                  : human_ratio(b->median_seconds / f->median_seconds);
  };
  // One table: a title, then a column per pair, each cell cell_of(row, bf16 row, float32 row).
  const auto table = [&](const std::string& title, const auto& cell_of) {
    std::string out = title + fmt::format("{:<28}", "instance");
    for (const auto& p : kPairs) out += fmt::format(" {:>15}", p[1]);
    out += "\n";
    for (const SummaryRow& row : s.rows) {
      out += fmt::format("{:<28}", row.instance);
      for (const auto& p : kPairs) out += fmt::format(" {:>15}", cell_of(row, p[0], p[1]));
      out += "\n";
    }
    return out;
  };
  std::string out = table(
      "\nbf16 over float32, each backend against itself: time per step | peak RSS (below 1: bf16 "
      "is faster | smaller)\n",
      [&](const SummaryRow& row, const char* bf16, const char* fp32) {
        return cell(row, bf16, fp32, false) + " | " + cell(row, bf16, fp32, true);
      });
  out += table(
      "\nthe check's last training loss under bf16 against float32's (the study's check trains "
      "200 steps), each backend\n",
      [](const SummaryRow& row, const char* bf16, const char* fp32) {
        const auto b = row.cells.find(bf16), f = row.cells.find(fp32);
        const bool both = b != row.cells.end() && f != row.cells.end() &&
                          !b->second.check_losses.empty() &&
                          b->second.check_losses.size() == f->second.check_losses.size();
        return both ? fmt::format(
                          "{:+.2f}%",
                          100 * (b->second.check_losses.back() / f->second.check_losses.back() - 1))
                    : std::string("-");
      });
  return out;
}

}  // namespace bp
