// studies/ranks/table.h: the study ranks's table in summary.txt (harness/runner/summary_text.h
// prints every study's after the main tables; "" when the run holds none of its data).
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "harness/runner/summary_text.h"

namespace bp {

// Per instance: the time per step of one rank of two threads (compiled_2t) and of each
// data-parallel row (its slowest rank's step); then ours (the faster of compiled_ranks and
// engine_ranks) over the faster torch peer, and where the optimizer is sharded, its state per
// rank over the unsharded one's. Columns as wide as what they hold.
inline std::string ranks_table(const Summary& s) {
  // Each column's row and its heading (the rows' names would take the table past 120 columns).
  static constexpr const char* kColumns[][2] = {
      {"compiled_2t", "1 rank 2t"}, {"engine_ranks", "engine"},     {"compiled_ranks", "compiled"},
      {"compiled_zero", "zero"},    {"libtorch_ranks", "libtorch"}, {"pytorch_ranks", "pytorch"}};
  std::vector<const char* const*> columns;
  for (const auto& c : kColumns)
    if (std::find(s.backends.begin(), s.backends.end(), c[0]) != s.backends.end())
      columns.push_back(c);
  if (std::none_of(columns.begin(), columns.end(),
                   [](const char* const* c) { return std::string_view(c[0]).ends_with("_ranks"); }))
    return "";
  const auto fastest = [](const SummaryRow& row, std::initializer_list<const char*> of) {
    double best = NAN;
    for (const char* b : of)
      if (const Cell* c = ran(row, b); c && !(c->median_seconds >= best)) best = c->median_seconds;
    return best;
  };
  std::vector<std::vector<std::string>> cells;
  cells.push_back({"instance"});
  for (const char* const* c : columns) cells.back().push_back(c[1]);
  cells.back().insert(cells.back().end(), {"ours/torch", "zero state"});
  for (const SummaryRow& row : s.rows) {
    cells.push_back({row.instance});
    for (const char* const* c : columns) cells.back().push_back(time_or_dash(ran(row, c[0])));
    const double ours = fastest(row, {"engine_ranks", "compiled_ranks"}),
                 torch = fastest(row, {"libtorch_ranks", "pytorch_ranks"});
    cells.back().push_back(ours > 0 && torch > 0 ? human_ratio(ours / torch) : "-");
    const Cell *zero = ran(row, "compiled_zero"), *whole = ran(row, "compiled_ranks");
    const double state = zero && whole ? zero->counter("optimizer_state_bytes_most_of_ranks") /
                                             whole->counter("optimizer_state_bytes_most_of_ranks")
                                       : NAN;
    cells.back().push_back(state > 0 ? human_ratio(state) : "-");
  }
  std::string out = fmt::format(
      "\ndata parallel, {} ranks: time per step (of the slowest rank); 1 rank 2t: compiled_2t; "
      "then each row of ranks\n(engine_ranks, compiled_ranks, compiled_zero, libtorch_ranks, "
      "pytorch_ranks); ours/torch: the faster of ours over\nthe faster torch peer; zero state: "
      "AdamW's state per rank, sharded (compiled_zero) over not (compiled_ranks)\n",
      int(JsonView(s.options)["ranks"].num_or(2)));
  return out + aligned_table(cells);
}

}  // namespace bp
