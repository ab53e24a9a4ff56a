// studies/kernels/table.h: the study kernels's table in summary.txt (harness/runner/summary_text.h
// prints every study's after the main tables; "" when the run holds none of its data).
#pragma once

#include <fmt/format.h>

#include <string>

#include "harness/runner/summary_text.h"

namespace bp {

// The study kernels: every dialect per op shape, auto's choice, and the FMA peak.
inline std::string kernels_table(const Summary& s) {
  const JsonView kernels = s.kernels;
  if (!kernels.is_object()) return "";
  std::string out = "\n" + wrapped(fmt::format("matmul kernels and the attention's, forward and "
                                               "backward of one op (median per dialect; * auto's "
                                               "choice, made in the step's own setup); FMA peak "
                                               "{:.1f} GFLOP/s:",
                                               kernels["peak_gflops"].num_or(NAN)),
                                   2);
  for (JsonView row : kernels["shapes"].elements()) {
    std::string times;
    for (const auto& [d, v] : row["median_seconds"].members())
      times += fmt::format(" {}{} {};", d, d == row["auto"].str_or("") ? "*" : "",
                           unbroken(human_time(v.num_or(NAN))));
    out += wrapped(
        fmt::format("  {}:{} auto {:.2f}x the fastest, {:.1f} GFLOP/s, {:.0f}% of the FMA loop "
                    "timed in turn (per thread)",
                    row["shape"].str_or("?"), times, row["auto_over_best"].num_or(NAN),
                    row["auto_gflops"].num_or(NAN), 100 * row["auto_fraction_of_fma"].num_or(NAN)),
        4);
  }
  return out;
}

}  // namespace bp
