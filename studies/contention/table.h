// studies/contention/table.h: the study contention's table in summary.txt: per row, each
// backend's speedup at two threads (its one-thread time over its two-thread time), idle and beside
// the busy processes, and at two threads the others' time over the compiled mode's (or the first
// backend's, without it), idle and busy ("" when the run holds none of it).
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <vector>

#include "harness/runner/summary_text.h"

namespace bp {

inline std::string contention_table(const Summary& s) {
  auto has = [&](const std::string& b) {
    return std::find(s.backends.begin(), s.backends.end(), b) != s.backends.end();
  };
  std::vector<std::string> bases;  // backends with all four rows: 1 and 2 threads, idle and busy
  for (const std::string& b : s.backends)
    if (has(b + "_busy") && has(b + "_2t") && has(b + "_2t_busy")) bases.push_back(b);
  if (bases.empty()) return "";
  // the others' time over the compiled mode's when the run has it, else over the first's
  std::stable_partition(bases.begin(), bases.end(),
                        [](const std::string& b) { return b == "compiled"; });
  auto ratio = [&](const SummaryRow& row, const std::string& num, const std::string& den) {
    const Cell *a = ran(row, num), *b = ran(row, den);
    return a && b ? human_ratio(a->median_seconds / b->median_seconds) : std::string("-");
  };
  std::vector<std::vector<std::string>> cells;
  cells.push_back({"instance"});
  for (const std::string& b : bases) cells.back().insert(cells.back().end(), {b, "busy"});
  for (size_t i = 1; i < bases.size(); i++)
    cells.back().insert(cells.back().end(), {bases[i] + "/" + bases[0], "busy"});
  for (const SummaryRow& row : s.rows) {
    if (!ran(row, bases[0] + "_2t_busy") && !ran(row, bases[0] + "_2t")) continue;
    cells.push_back({row.instance});
    for (const std::string& b : bases)
      cells.back().insert(cells.back().end(),
                          {ratio(row, b, b + "_2t"), ratio(row, b + "_busy", b + "_2t_busy")});
    for (size_t i = 1; i < bases.size(); i++)
      cells.back().insert(cells.back().end(),
                          {ratio(row, bases[i] + "_2t", bases[0] + "_2t"),
                           ratio(row, bases[i] + "_2t_busy", bases[0] + "_2t_busy")});
  }
  return fmt::format(
             "\nbeside other work (busy: {} during the _busy rows' turns): the speedup of two "
             "threads\nover one, idle and busy (below 1: the second thread costs more than it "
             "gives){}\n",
             JsonView(s.options)["background"].str_or("?"),
             bases.size() < 2
                 ? std::string()
                 : fmt::format(", and at two\nthreads the time of {} over {}'s",
                               fmt::join(bases.begin() + 1, bases.end(), ", "), bases[0])) +
         aligned_table(cells);
}

}  // namespace bp
