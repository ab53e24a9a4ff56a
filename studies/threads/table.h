// studies/threads/table.h: the study threads's table in summary.txt (harness/runner/summary_text.h
// prints every study's after the main tables; "" when the run holds none of its data).
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <vector>

#include "harness/runner/summary_text.h"

namespace bp {

// The study threads: each backend's two-thread variant against itself at one thread. Columns as
// wide as what they hold; past 120 characters, the speedups alone (the times are in the main
// table).
inline std::string threads_table(const Summary& s) {
  std::vector<std::string> pairs;
  for (const std::string& b : s.backends)
    if (b.ends_with("_2t") && std::find(s.backends.begin(), s.backends.end(),
                                        b.substr(0, b.size() - 3)) != s.backends.end())
      pairs.push_back(b.substr(0, b.size() - 3));
  if (pairs.empty()) return "";
  auto table = [&](bool with_times) {
    std::vector<std::vector<std::string>> cells;  // per row: the instance, then each pair's
    cells.push_back({"instance"});
    for (const std::string& b : pairs) cells.back().push_back(b);
    for (const SummaryRow& row : s.rows) {
      cells.push_back({row.instance});
      for (const std::string& b : pairs) {
        const Cell *one = ran(row, b), *two = ran(row, b + "_2t");
        const std::string speedup =
            one && two ? human_ratio(one->median_seconds / two->median_seconds) : "-";
        cells.back().push_back(!one || !two || !with_times
                                   ? speedup
                                   : human_time(two->median_seconds) + " " + speedup);
      }
    }
    return aligned_table(cells);
  };
  std::string body = table(true);
  bool with_times = true;
  for (size_t at = 0, end; (end = body.find('\n', at)) != std::string::npos; at = end + 1)
    if (end - at > 120) with_times = false;
  if (!with_times) body = table(false);
  return fmt::format("\ntwo threads against one: {}its speedup over 1 thread\n",
                     with_times ? "time per step at 2 threads, and " : "") +
         body;
}

}  // namespace bp
