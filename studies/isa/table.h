// studies/isa/table.h: the study isa's table in summary.txt (harness/runner/summary_text.h prints
// every study's after the main tables; "" when the run holds none of its data).
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <string>

#include "harness/runner/summary_text.h"

namespace bp {

// Per row: libtorch's time over ours at each level (above 1: ours faster), eager and compiled;
// then each backend's avx2 time over its avx512 time (above 1: AVX-512 helps it).
inline std::string isa_table(const Summary& s) {
  static constexpr const char* kLevels[] = {"avx2", "avx512"};
  static constexpr const char* kOurs[] = {"engine", "compiled"};
  static constexpr const char* kAll[] = {"engine", "compiled", "libtorch"};
  const auto has = [&](const std::string& b) {
    return std::find(s.backends.begin(), s.backends.end(), b) != s.backends.end();
  };
  if (!has("libtorch_avx2") && !has("libtorch_avx512")) return "";
  const auto ratio = [](const SummaryRow& row, const std::string& over, const std::string& of) {
    const Cell *a = ran(row, over), *b = ran(row, of);
    return a && b ? human_ratio(a->median_seconds / b->median_seconds) : std::string("-");
  };
  std::string out =
      "\nlibtorch's time over ours at each level (above 1: ours faster), then each backend's time "
      "at avx2 over its time at avx512\n" +
      fmt::format("{:<27}", "instance");
  for (const char* ours : kOurs)
    for (const char* level : kLevels)
      out += fmt::format(" {:>15}", fmt::format("{}@{}", ours, level));
  out += " |";
  for (const char* b : kAll) out += fmt::format(" {:>8}", b);
  out += "\n";
  for (const SummaryRow& row : s.rows) {
    out += fmt::format("{:<27}", row.instance);
    for (const char* ours : kOurs)
      for (const char* level : kLevels)
        out += fmt::format(" {:>15}", ratio(row, fmt::format("libtorch_{}", level),
                                            fmt::format("{}_{}", ours, level)));
    out += " |";
    for (const char* b : kAll)
      out +=
          fmt::format(" {:>8}", ratio(row, fmt::format("{}_avx2", b), fmt::format("{}_avx512", b)));
    out += "\n";
  }
  return out;
}

}  // namespace bp
