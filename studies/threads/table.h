// studies/threads/table.h: the study threads's table in summary.txt (harness/runner/summary_text.h
// prints every study's after the main tables; "" when the run holds none of its data).
#pragma once

#include <fmt/format.h>

#include <string>

#include "harness/runner/summary_text.h"

namespace bp {

// The study threads: each backend's two-thread variant against itself at one thread.
inline std::string threads_table(const Summary& s) {
  std::vector<std::string> pairs;
  for (const std::string& b : s.backends)
    if (b.ends_with("_2t") && std::find(s.backends.begin(), s.backends.end(),
                                        b.substr(0, b.size() - 3)) != s.backends.end())
      pairs.push_back(b.substr(0, b.size() - 3));
  if (pairs.empty()) return "";
  std::string out = fmt::format(
      "\ntwo threads against one: time per step at 2 threads, and its speedup over 1 "
      "thread\n{:<30}",
      "instance");
  for (const std::string& b : pairs) out += fmt::format(" {:>16}", b);
  out += "\n";
  for (const SummaryRow& row : s.rows) {
    out += fmt::format("{:<30}", row.instance);
    for (const std::string& b : pairs) {
      const Cell *one = ran(row, b), *two = ran(row, b + "_2t");
      out += fmt::format(" {:>16}",
                         !one || !two
                             ? "-"
                             : fmt::format("{} {}", human_time(two->median_seconds),
                                           human_ratio(one->median_seconds / two->median_seconds)));
    }
    out += "\n";
  }
  return out;
}

}  // namespace bp
