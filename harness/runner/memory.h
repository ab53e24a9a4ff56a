// harness/runner/memory.h: how much memory an instance will need, estimated before it runs.
//
// A size beyond a workload's largest default (mini_gpt_wide batch=4096: many gigabytes, several
// times more under TorchScript) can need more than the machine has. bench_run
// then measures each selected backend at the largest default L, L/2 and L/4 (one process each,
// its peak RSS from wait4) and extrapolates. Memory here is a fixed floor (the program, libtorch,
// Python) plus a term growing as size^p, p from 1 (a batch, a node count: activations) to 2 (a
// width: weights). Doubling the size multiplies the growth by 2^p, so the two differences of the
// three samples give p, with the floor cancelled; p is clamped to [1, 2], so noise in a small
// difference cannot make a line curve (a parabola through the three samples turned a few
// megabytes of noise into hundreds of gigabytes).
//   Tests: harness/runner/selection_test.cc; harness/tests/ (a refused size, and --force).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "workloads/workload.h"

namespace bp {

struct MemorySample {
  int64_t size;
  double bytes;
};

// The sizes to measure for an estimate at `size`, or none if `size` is no larger than the
// largest default (what the defaults need is what `make bench` needs).
inline std::vector<int64_t> probe_sizes(const WorkloadInfo& w, int64_t size) {
  if (!w.sizes.sized() || w.sizes.defaults().empty()) return {};
  const int64_t largest = *std::max_element(w.sizes.defaults().begin(), w.sizes.defaults().end());
  if (size <= largest) return {};
  std::vector<int64_t> out;
  for (int64_t s : {largest / 4, largest / 2, largest})
    if (s >= w.sizes.min && (out.empty() || s > out.back())) out.push_back(s);
  return out;
}

// Bytes at `size` from samples at L/4, L/2 and L (or L/2 and L when L/4 is below the workload's
// minimum: then growth is taken as linear), in that order.
inline double extrapolate_bytes(const std::vector<MemorySample>& p, int64_t size) {
  if (p.empty()) return 0;
  const MemorySample& last = p.back();
  if (p.size() == 1) return last.bytes;
  const double grew = last.bytes - p[p.size() - 2].bytes;  // from L/2 to L
  if (!(grew > 0)) return last.bytes;                      // no growth to measure
  double power = 1;
  if (p.size() >= 3) {
    const double before = p[p.size() - 2].bytes - p[p.size() - 3].bytes;  // from L/4 to L/2
    if (before > 0) power = std::clamp(std::log2(grew / before), 1.0, 2.0);
  }
  const double l = double(last.size), x = double(size), half = double(p[p.size() - 2].size);
  const double per_unit = grew / (std::pow(l, power) - std::pow(half, power));
  return last.bytes + per_unit * (std::pow(x, power) - std::pow(l, power));
}

}  // namespace bp
