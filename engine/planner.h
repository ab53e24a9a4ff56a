// engine/planner.h: static memory planning: buffers with known sizes and lifetimes share one arena.
//
// The input is a list of buffers, each with its size and the first and last instruction of a
// program that touches it (its lifetime, inclusive). Two buffers whose lifetimes overlap must not
// overlap in the arena; any others may. The planner returns an offset for every buffer, the arena
// size that holds them, and the lower bound no placement can beat: the most bytes live at any one
// instruction. (Placement is NP-hard in general: it is two-dimensional strip packing with fixed
// x-positions. The arena can exceed the bound when the buffers live at the peak leave holes.)
//
// Placement: largest buffer first, each at the lowest offset where it fits among the buffers
// already placed whose lifetimes overlap its own (the "greedy by size" of TensorFlow Lite's
// arena planner, Pisarchyk and Lee 2020, arXiv 2001.03288). Large buffers fix the layout; small
// ones fill the holes between them. Deterministic: ties go by first use, then by index.
//
// Not here: which buffers exist, their lifetimes, aliasing (engine/program.h decides those).
// Tests: engine/compiled_test.cc (no two live buffers overlap; lower bound <= arena; arena within
// 10% of the bound on every workload).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace bp {

struct PlannedBuffer {
  size_t bytes;
  int32_t first, last;  // instruction indices, inclusive
  size_t offset = 0;    // the result
};

struct MemoryPlan {
  size_t arena_bytes = 0;        // what the placement needs
  size_t lower_bound_bytes = 0;  // the most bytes live at any instruction
  size_t unplanned_bytes = 0;    // every buffer at its own address (what an eager tape holds)
  size_t recomputed_nodes = 0;   // activations dropped after the forward and recomputed
};

inline constexpr size_t kPlanAlign = 64;  // every buffer on its own cache lines

inline size_t plan_aligned(size_t bytes) {
  return (bytes + kPlanAlign - 1) / kPlanAlign * kPlanAlign;
}

// The bound alone: a sweep over instructions with +bytes at first use and -bytes after the last.
// `mean_live`, if given, gets the bytes live at an instruction on average.
inline size_t plan_memory_bound(const std::vector<PlannedBuffer>& buffers, int32_t num_instructions,
                                double* mean_live = nullptr) {
  std::vector<int64_t> delta(size_t(num_instructions) + 1, 0);
  for (const PlannedBuffer& b : buffers) {
    delta[b.first] += int64_t(plan_aligned(b.bytes));
    delta[b.last + 1] -= int64_t(plan_aligned(b.bytes));
  }
  int64_t live = 0;
  size_t bound = 0;
  double total = 0;
  for (int32_t t = 0; t < num_instructions; t++) {
    bound = std::max(bound, size_t(live += delta[t]));
    total += double(live);
  }
  if (mean_live) *mean_live = num_instructions ? total / num_instructions : 0;
  return bound;
}

inline MemoryPlan plan_memory(std::vector<PlannedBuffer>& buffers, int32_t num_instructions) {
  MemoryPlan plan;
  for (PlannedBuffer& b : buffers) {
    b.bytes = plan_aligned(b.bytes);
    plan.unplanned_bytes += b.bytes;
  }
  plan.lower_bound_bytes = plan_memory_bound(buffers, num_instructions);

  std::vector<uint32_t> order(buffers.size());
  for (uint32_t i = 0; i < order.size(); i++) order[i] = i;
  std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    if (buffers[a].bytes != buffers[b].bytes) return buffers[a].bytes > buffers[b].bytes;
    if (buffers[a].first != buffers[b].first) return buffers[a].first < buffers[b].first;
    return a < b;
  });
  std::vector<uint32_t> placed;  // by offset
  std::vector<std::pair<size_t, size_t>> taken;
  for (uint32_t i : order) {
    PlannedBuffer& b = buffers[i];
    taken.clear();  // [offset, end) of placed buffers alive at the same time, by offset
    for (uint32_t j : placed) {
      const PlannedBuffer& o = buffers[j];
      if (o.first <= b.last && b.first <= o.last) taken.push_back({o.offset, o.offset + o.bytes});
    }
    std::sort(taken.begin(), taken.end());
    size_t offset = 0;
    for (const auto& [start, end] : taken) {
      if (start >= offset + b.bytes) break;  // the gap below `start` holds it
      offset = std::max(offset, end);
    }
    b.offset = offset;
    plan.arena_bytes = std::max(plan.arena_bytes, offset + b.bytes);
    placed.push_back(i);
  }
  return plan;
}

}  // namespace bp
