// studies/optim/table.h: the study optim's table in summary.txt (harness/runner/summary_text.h
// prints every study's after the main tables; "" when the run holds none of its data).
#pragma once

#include <fmt/format.h>

#include <string>

#include "harness/runner/summary_text.h"

namespace bp {

// The study optim: the optimizer alone against the memory-bandwidth bound of its bytes, 16 read
// and 12 written per parameter (workloads/optimizer.h).
inline std::string optim_table(const Summary& s) {
  std::string out;
  for (const SummaryRow& row : s.rows) {
    const Cell *ours = ran(row, "engine"), *bound = ran(row, "bound");
    if (!ours || !bound) continue;
    const double params = double(std::max<int64_t>(1, row.size / 1000) * 1000);
    auto time_of = [&](const char* b) { return time_or_dash(ran(row, b)); };
    const Cell* libtorch = ran(row, "libtorch");
    out += fmt::format(
        "  {:<27} {:>10} {:>10} {:>10} {:>10} {:>10} {:>6} {:>7.1f} {:>8}\n", row.instance,
        time_of("engine"), time_of("compiled"), time_of("libtorch"), time_of("pytorch"),
        time_of("bound"), fmt::format("{:.2f}x", ours->median_seconds / bound->median_seconds),
        28 * params / ours->median_seconds / 1e9,
        libtorch ? human_ratio(libtorch->median_seconds / ours->median_seconds) : "-");
  }
  if (out.empty()) return "";
  return fmt::format(
             "\nthe optimizer alone (AdamW), against the memory-bandwidth bound of its 28 bytes "
             "per parameter:\n  {:<27} {:>10} {:>10} {:>10} {:>10} {:>10} {:>6} {:>7} {:>8}\n",
             "instance", "engine", "compiled", "libtorch", "pytorch", "bound", "/bound", "GB/s",
             "libtorch/") +
         out;
}

}  // namespace bp
