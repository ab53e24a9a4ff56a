// engine/compiled/planner.h: static memory planning: buffers with known sizes and lifetimes share
// one arena.
//
// The input is a list of buffers, each with its size and the first and last instruction of a
// program that touches it (its lifetime, inclusive). Two buffers whose lifetimes overlap must not
// overlap in the arena; any others may. The planner returns an offset for every buffer, the arena
// size that holds them, and the lower bound no placement can beat: the most bytes live at any one
// instruction. (Placement is NP-hard in general: it is two-dimensional strip packing with fixed
// x-positions. The arena can exceed the bound when the buffers live at the peak leave holes.)
//
// Three placements; the smallest arena wins (ties: greedy by size, then best fit in time):
//  - Greedy by size: largest buffer first, each at the lowest offset where it fits among the
//    buffers already placed whose lifetimes overlap its own (TensorFlow Lite's arena planner,
//    Pisarchyk and Lee 2020, arXiv 2001.03288). Large buffers fix the layout; small ones fill the
//    holes between them. Each placement scans the placed buffers in offset order: quadratic, so it
//    runs up to kGreedyBySizeLimit buffers (a model's step has hundreds; an RNN unrolled over 10^4
//    steps has 10^5, whose scan took minutes).
//  - Greedy, the peak first: the same placement, taking first the buffers live at the instruction
//    that sets the lower bound, longest-lived lowest, then the rest by size. Those pack from
//    offset 0 without a hole, so that instruction needs no more than the bound, and the ones that
//    live longest, which the other instructions must work around, lie under those that end soon.
//    By size alone a large buffer of one instruction, placed first, pushes the long-lived ones
//    above it and leaves its bytes a hole wherever it is dead (mlp_width 16 on AVX2, whose
//    backward's product scratch is such a buffer, is at its bound only with the peak first).
//  - Best fit in time order: a simulated allocator, O(n log n). At each instruction the buffers
//    whose lifetime ended are freed (neighbouring holes merge) and those that start are placed,
//    largest first, in the smallest hole that holds them, else at the top. A training step frees
//    in roughly the reverse of the order it allocates (the backward undoes the forward), the case
//    a first-fit stack handles with few holes.
// Deterministic: ties go by first use, then by index.
//
// Not here: which buffers exist, their lifetimes, aliasing (engine/compiled/program.h decides
// those). Tests: engine/compiled/compiled_test.cc (no two live buffers overlap; lower bound <=
// arena; arena within 10% of the bound on every workload), engine/compiled/planner_test.cc (both
// placements on made-up lifetimes, a million-buffer chain at its bound).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
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
inline constexpr size_t kGreedyBySizeLimit = 20000;

inline size_t plan_aligned(size_t bytes) {
  return (bytes + kPlanAlign - 1) / kPlanAlign * kPlanAlign;
}

// Why a placement made elsewhere (a plan cache's file) cannot be used, or "" if it can: every
// buffer aligned and inside the arena (checked without wrapping around 2^64), no two buffers live
// at one instruction sharing a byte, and the arena no larger than its highest buffer's end (a
// plan's arena is that end, so a larger one is not this planner's). A sweep over time keeps the
// live buffers ordered by offset, so no pair is compared: O(n log n) for a million buffers.
inline std::string plan_placement_error(const std::vector<PlannedBuffer>& b, size_t arena_bytes) {
  size_t top = 0;
  for (size_t i = 0; i < b.size(); i++) {
    if (b[i].offset % kPlanAlign)
      return "buffer " + std::to_string(i) + " at offset " + std::to_string(b[i].offset) +
             ", not a multiple of " + std::to_string(kPlanAlign);
    if (b[i].offset > arena_bytes || b[i].bytes > arena_bytes - b[i].offset)
      return "buffer " + std::to_string(i) + " (" + std::to_string(b[i].bytes) + " bytes at " +
             std::to_string(b[i].offset) + ") lies outside the arena of " +
             std::to_string(arena_bytes) + " bytes";
    top = std::max(top, b[i].offset + b[i].bytes);
  }
  std::vector<uint32_t> by_first(b.size()), by_last(b.size());
  for (uint32_t i = 0; i < b.size(); i++) by_first[i] = by_last[i] = i;
  std::stable_sort(by_first.begin(), by_first.end(),
                   [&](uint32_t x, uint32_t y) { return b[x].first < b[y].first; });
  std::stable_sort(by_last.begin(), by_last.end(),
                   [&](uint32_t x, uint32_t y) { return b[x].last < b[y].last; });
  std::map<size_t, uint32_t> live;  // offset -> buffer (zero-byte buffers take no bytes)
  auto clash = [](uint32_t x, uint32_t y) {
    return "buffers " + std::to_string(x) + " and " + std::to_string(y) +
           " are live together and share bytes";
  };
  for (size_t f = 0, l = 0; f < by_first.size();) {
    const int32_t t = b[by_first[f]].first;
    for (; l < by_last.size() && b[by_last[l]].last < t; l++)
      if (b[by_last[l]].bytes) live.erase(b[by_last[l]].offset);
    for (; f < by_first.size() && b[by_first[f]].first == t; f++) {
      const uint32_t i = by_first[f];
      if (!b[i].bytes) continue;
      auto above = live.lower_bound(b[i].offset);
      if (above != live.end() && above->first < b[i].offset + b[i].bytes)
        return clash(i, above->second);
      if (above != live.begin()) {
        auto below = std::prev(above);
        if (below->first + b[below->second].bytes > b[i].offset) return clash(i, below->second);
      }
      live[b[i].offset] = i;
    }
  }
  if (arena_bytes > top)
    return "an arena of " + std::to_string(arena_bytes) + " bytes where its buffers end at " +
           std::to_string(top);
  return "";
}

// The bound alone: a sweep over instructions with +bytes at first use and -bytes after the last.
// `mean_live`, if given, gets the bytes live at an instruction on average; `peak`, the first
// instruction where the bound is live.
inline size_t plan_memory_bound(const std::vector<PlannedBuffer>& buffers, int32_t num_instructions,
                                double* mean_live = nullptr, int32_t* peak = nullptr) {
  std::vector<int64_t> delta(size_t(num_instructions) + 1, 0);
  for (const PlannedBuffer& b : buffers) {
    delta[b.first] += int64_t(plan_aligned(b.bytes));
    delta[b.last + 1] -= int64_t(plan_aligned(b.bytes));
  }
  int64_t live = 0;
  size_t bound = 0;
  int32_t at = 0;
  double total = 0;
  for (int32_t t = 0; t < num_instructions; t++) {
    if (size_t(live += delta[t]) > bound) bound = size_t(live), at = t;
    total += double(live);
  }
  if (mean_live) *mean_live = num_instructions ? total / num_instructions : 0;
  if (peak) *peak = at;
  return bound;
}

// Largest first, by first use, by index: the order both placements take their buffers in.
inline std::vector<uint32_t> plan_order_by_size(const std::vector<PlannedBuffer>& buffers) {
  std::vector<uint32_t> order(buffers.size());
  for (uint32_t i = 0; i < order.size(); i++) order[i] = i;
  std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    if (buffers[a].bytes != buffers[b].bytes) return buffers[a].bytes > buffers[b].bytes;
    if (buffers[a].first != buffers[b].first) return buffers[a].first < buffers[b].first;
    return a < b;
  });
  return order;
}

// The buffers live at `peak` first, longest-lived first; then the others, largest first (ties:
// by size, by first use, by index).
inline std::vector<uint32_t> plan_order_peak_first(const std::vector<PlannedBuffer>& buffers,
                                                   int32_t peak) {
  std::vector<uint32_t> order = plan_order_by_size(buffers);
  const auto at_peak = [&](uint32_t i) {
    return buffers[i].first <= peak && peak <= buffers[i].last;
  };
  const auto others = std::stable_partition(order.begin(), order.end(), at_peak);
  std::stable_sort(order.begin(), others, [&](uint32_t a, uint32_t b) {
    return buffers[a].last - buffers[a].first > buffers[b].last - buffers[b].first;
  });
  return order;
}

// Greedy placement in the given order (see the top). offsets[i]: buffer i's; returns the arena's
// size.
inline size_t plan_greedy(const std::vector<PlannedBuffer>& buffers,
                          const std::vector<uint32_t>& order, std::vector<size_t>& offsets) {
  offsets.assign(buffers.size(), 0);
  size_t arena = 0;
  std::vector<uint32_t> placed;  // kept sorted by offset, so each scan meets the holes in order
  for (uint32_t i : order) {
    const PlannedBuffer& b = buffers[i];
    size_t offset = 0;
    for (uint32_t j : placed) {
      const PlannedBuffer& o = buffers[j];
      if (o.first > b.last || b.first > o.last) continue;  // never live together
      if (offsets[j] >= offset + b.bytes) break;           // the gap below it holds b
      offset = std::max(offset, offsets[j] + o.bytes);
    }
    offsets[i] = offset;
    arena = std::max(arena, offset + b.bytes);
    const auto at = std::upper_bound(placed.begin(), placed.end(), offset,
                                     [&](size_t x, uint32_t j) { return x < offsets[j]; });
    placed.insert(at, i);
  }
  return arena;
}

// Best fit in time order (see the top). offsets[i]: buffer i's; returns the arena's size.
inline size_t plan_best_fit_in_time(const std::vector<PlannedBuffer>& buffers,
                                    int32_t num_instructions, std::vector<size_t>& offsets) {
  offsets.assign(buffers.size(), 0);
  // Buffers by first use (largest first within an instruction), and by last use.
  std::vector<uint32_t> by_first = plan_order_by_size(buffers);
  std::stable_sort(by_first.begin(), by_first.end(),
                   [&](uint32_t a, uint32_t b) { return buffers[a].first < buffers[b].first; });
  std::vector<uint32_t> by_last(buffers.size());
  for (uint32_t i = 0; i < by_last.size(); i++) by_last[i] = i;
  std::stable_sort(by_last.begin(), by_last.end(),
                   [&](uint32_t a, uint32_t b) { return buffers[a].last < buffers[b].last; });
  std::map<size_t, size_t> holes;             // offset -> bytes, below the top
  std::set<std::pair<size_t, size_t>> sizes;  // (bytes, offset) of the same holes
  size_t top = 0, arena = 0;
  auto release = [&](size_t offset, size_t bytes) {
    auto next = holes.lower_bound(offset);
    if (next != holes.end() && offset + bytes == next->first) {  // merge with the hole above
      bytes += next->second;
      sizes.erase({next->second, next->first});
      next = holes.erase(next);
    }
    if (next != holes.begin()) {  // and with the one below
      auto prev = std::prev(next);
      if (prev->first + prev->second == offset) {
        offset = prev->first, bytes += prev->second;
        sizes.erase({prev->second, prev->first});
        holes.erase(prev);
      }
    }
    if (offset + bytes == top) {  // the top comes down instead
      top = offset;
      return;
    }
    holes[offset] = bytes;
    sizes.insert({bytes, offset});
  };
  size_t next_first = 0, next_last = 0;
  for (int32_t t = 0; t < num_instructions && next_first < by_first.size(); t++) {
    for (; next_last < by_last.size() && buffers[by_last[next_last]].last < t; next_last++)
      release(offsets[by_last[next_last]], buffers[by_last[next_last]].bytes);
    for (; next_first < by_first.size() && buffers[by_first[next_first]].first == t; next_first++) {
      const uint32_t i = by_first[next_first];
      const size_t bytes = buffers[i].bytes;
      const auto fit = sizes.lower_bound({bytes, 0});
      if (fit != sizes.end()) {
        const auto [hole_bytes, offset] = *fit;
        sizes.erase(fit);
        holes.erase(offset);
        offsets[i] = offset;
        if (hole_bytes > bytes) {
          holes[offset + bytes] = hole_bytes - bytes;
          sizes.insert({hole_bytes - bytes, offset + bytes});
        }
      } else {
        offsets[i] = top;
        top += bytes;
      }
      arena = std::max(arena, top);
    }
  }
  return arena;
}

inline MemoryPlan plan_memory(std::vector<PlannedBuffer>& buffers, int32_t num_instructions) {
  MemoryPlan plan;
  for (PlannedBuffer& b : buffers) {
    b.bytes = plan_aligned(b.bytes);
    plan.unplanned_bytes += b.bytes;
  }
  int32_t peak = 0;
  plan.lower_bound_bytes = plan_memory_bound(buffers, num_instructions, nullptr, &peak);
  std::vector<size_t> offsets, other;
  plan.arena_bytes = plan_best_fit_in_time(buffers, num_instructions, offsets);
  if (buffers.size() <= kGreedyBySizeLimit) {
    const size_t by_size = plan_greedy(buffers, plan_order_by_size(buffers), other);
    if (by_size <= plan.arena_bytes) plan.arena_bytes = by_size, offsets.swap(other);
    const size_t peak_first = plan_greedy(buffers, plan_order_peak_first(buffers, peak), other);
    if (peak_first < plan.arena_bytes) plan.arena_bytes = peak_first, offsets.swap(other);
  }
  for (size_t i = 0; i < buffers.size(); i++) buffers[i].offset = offsets[i];
  return plan;
}

}  // namespace bp
