// engine/compiled/planner_test.cc: the memory planner's placements (engine/compiled/planner.h) on
// made-up lifetimes: random ones, a training step's nested ones, one step's buffers where only the
// peak-first order reaches the bound, and an unrolled chain of a million buffers, which the
// quadratic placements could not plan in any reasonable time.
//
// Every plan is checked by a sweep over time that keeps the live buffers ordered by offset: a
// buffer that starts overlapping a live neighbour's bytes is a failure (no pair of buffers is
// compared, so the million-buffer plan is checked too).
//   build/engine_tests --gtest_filter='Planner*'     (or ctest -R Planner)
#include "engine/compiled/planner.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "workloads/data.h"

namespace {

// "" if no two buffers live at one instruction share a byte and every buffer ends within the
// arena; otherwise the first clash found.
std::string clash(const std::vector<bp::PlannedBuffer>& b, const std::vector<size_t>& offsets,
                  size_t arena) {
  std::vector<uint32_t> by_first(b.size()), by_last(b.size());
  for (uint32_t i = 0; i < b.size(); i++) {
    by_first[i] = by_last[i] = i;
    if (offsets[i] + b[i].bytes > arena) return "buffer " + std::to_string(i) + " past the arena";
  }
  std::stable_sort(by_first.begin(), by_first.end(),
                   [&](uint32_t x, uint32_t y) { return b[x].first < b[y].first; });
  std::stable_sort(by_last.begin(), by_last.end(),
                   [&](uint32_t x, uint32_t y) { return b[x].last < b[y].last; });
  std::map<size_t, uint32_t> live;  // offset -> buffer (zero-byte buffers take no bytes)
  size_t f = 0, l = 0;
  while (f < by_first.size()) {
    const int32_t t = b[by_first[f]].first;
    for (; l < by_last.size() && b[by_last[l]].last < t; l++)
      if (b[by_last[l]].bytes) live.erase(offsets[by_last[l]]);
    for (; f < by_first.size() && b[by_first[f]].first == t; f++) {
      const uint32_t i = by_first[f];
      if (!b[i].bytes) continue;
      auto above = live.lower_bound(offsets[i]);
      if (above != live.end() && above->first < offsets[i] + b[i].bytes)
        return "buffers " + std::to_string(i) + " and " + std::to_string(above->second);
      if (above != live.begin()) {
        auto below = std::prev(above);
        if (below->first + b[below->second].bytes > offsets[i])
          return "buffers " + std::to_string(i) + " and " + std::to_string(below->second);
      }
      live[offsets[i]] = i;
    }
  }
  return "";
}

std::vector<bp::PlannedBuffer> aligned(std::vector<bp::PlannedBuffer> b) {
  for (auto& x : b) x.bytes = bp::plan_aligned(x.bytes);
  return b;
}

// Each placement the planner tries, apart: the bound and its instruction, and per placement the
// offsets and the arena.
struct Placements {
  int32_t peak = 0;
  size_t bound = 0, by_size_arena = 0, in_time_arena = 0, peak_first_arena = 0;
  std::vector<size_t> by_size, in_time, peak_first;
};
Placements place_every_way(const std::vector<bp::PlannedBuffer>& b, int32_t T) {
  Placements p;
  p.bound = bp::plan_memory_bound(b, T, nullptr, &p.peak);
  p.by_size_arena = bp::plan_greedy(b, bp::plan_order_by_size(b), p.by_size);
  p.in_time_arena = bp::plan_best_fit_in_time(b, T, p.in_time);
  p.peak_first_arena = bp::plan_greedy(b, bp::plan_order_peak_first(b, p.peak), p.peak_first);
  return p;
}

TEST(Planner, EveryPlacementIsValidOnRandomLifetimesAndThePlanTakesTheSmallest) {
  bp::SplitMix64 rng{0x91a7};
  double worst_greedy = 1, worst_best_fit = 1, worst_peak_first = 1, worst_plan = 1;
  for (int trial = 0; trial < 300; trial++) {
    const int32_t T = 1 + int32_t(rng.below(200));
    const size_t n = size_t(1 + rng.below(300));
    std::vector<bp::PlannedBuffer> b(n);
    for (auto& x : b) {
      x.first = int32_t(rng.below(T));
      x.last = x.first + int32_t(rng.below(T - x.first));
      x.bytes = size_t(rng.below(4) == 0 ? 1 + rng.below(1 << 20) : 1 + rng.below(4096));
    }
    b = aligned(b);
    const Placements p = place_every_way(b, T);
    ASSERT_EQ(clash(b, p.by_size, p.by_size_arena), "") << "greedy by size, trial " << trial;
    ASSERT_EQ(clash(b, p.in_time, p.in_time_arena), "") << "best fit in time, trial " << trial;
    ASSERT_EQ(clash(b, p.peak_first, p.peak_first_arena), "") << "peak first, trial " << trial;
    ASSERT_GE(p.by_size_arena, p.bound);
    ASSERT_GE(p.in_time_arena, p.bound);
    ASSERT_GE(p.peak_first_arena, p.bound);
    worst_greedy = std::max(worst_greedy, double(p.by_size_arena) / double(p.bound));
    worst_best_fit = std::max(worst_best_fit, double(p.in_time_arena) / double(p.bound));
    worst_peak_first = std::max(worst_peak_first, double(p.peak_first_arena) / double(p.bound));
    std::vector<bp::PlannedBuffer> planned = b;
    const bp::MemoryPlan plan = bp::plan_memory(planned, T);
    ASSERT_EQ(plan.arena_bytes, std::min({p.by_size_arena, p.in_time_arena, p.peak_first_arena}));
    worst_plan = std::max(worst_plan, double(plan.arena_bytes) / double(p.bound));
    ASSERT_EQ(plan.lower_bound_bytes, p.bound);
    std::vector<size_t> offsets;
    for (const auto& x : planned) offsets.push_back(x.offset);
    ASSERT_EQ(clash(planned, offsets, plan.arena_bytes), "") << "plan_memory, trial " << trial;
  }
  std::printf(
      "  300 random problems: worst arena / bound %.2f greedy by size, %.2f best fit, %.2f peak "
      "first, %.2f the plan\n",
      worst_greedy, worst_best_fit, worst_peak_first, worst_plan);
}

// mlp_width 16's step as an AVX2 build plans it (instructions 0-7; 4096-byte activations and
// gradients, 2560-byte logits, the products' scratch): the bound is set at the last instruction
// by two long-lived buffers, a bias gradient and a 6144-byte scratch. By size the scratch is
// placed first, at 0, and pushes the long-lived ones above it; in time order the buffers of the
// middle leave no 6144-byte hole at the end. Both reach 1.18x the bound; the peak first, the bound.
TEST(Planner, ThePeakFirstReachesTheBoundWhereSizeAndTimeOrderDoNot) {
  const std::vector<bp::PlannedBuffer> b = {{4096, 0, 7}, {4096, 6, 7}, {1536, 0, 0}, {2560, 1, 6},
                                            {2560, 5, 6}, {1536, 1, 1}, {64, 2, 7},   {64, 3, 5},
                                            {2560, 2, 5}, {960, 6, 6},  {6144, 7, 7}};
  const int32_t T = 8;
  const Placements p = place_every_way(b, T);
  std::printf("  bound %zu: by size %zu, in time %zu, peak first %zu bytes\n", p.bound,
              p.by_size_arena, p.in_time_arena, p.peak_first_arena);
  EXPECT_EQ(p.peak, 7);
  EXPECT_GT(p.by_size_arena, p.bound);
  EXPECT_GT(p.in_time_arena, p.bound);
  EXPECT_EQ(clash(b, p.peak_first, p.peak_first_arena), "");
  EXPECT_EQ(p.peak_first_arena, p.bound);
  std::vector<bp::PlannedBuffer> planned = b;
  EXPECT_EQ(bp::plan_memory(planned, T).arena_bytes, p.bound);
}

// A step's shape: the forward makes activations that live until their backward, in reverse
// order, and short temporaries between; placed in time order they stack, at the bound.
TEST(Planner, NestedLifetimesStackAtTheBound) {
  const int32_t L = 50, T = 4 * L;
  std::vector<bp::PlannedBuffer> b;
  for (int32_t i = 0; i < L; i++) {
    b.push_back({size_t(4096 * (1 + i % 7)), 2 * i, T - 1 - 2 * i});  // activation i
    b.push_back({size_t(64 * (1 + i % 3)), 2 * i, 2 * i});            // a temporary
  }
  std::vector<size_t> offsets;
  const size_t arena = bp::plan_best_fit_in_time(b, T, offsets);
  EXPECT_EQ(clash(b, offsets, arena), "");
  EXPECT_EQ(arena, bp::plan_memory_bound(b, T));
}

// Store-all over a million steps, as an unrolled recurrent step leaves it: per step a state
// kept until that step's backward, two temporaries, and a gradient made in the backward. Planned
// by best fit in time (the greedy placements are not run on this many), at the bound, and checked.
TEST(Planner, AMillionBuffersArePlannedAtTheBound) {
  const int32_t steps = 250000, T = 4 * steps;
  std::vector<bp::PlannedBuffer> b;
  b.reserve(4 * size_t(steps));
  for (int32_t s = 0; s < steps; s++) {
    const int32_t fwd = 2 * s, bwd = T - 2 - 2 * s;
    b.push_back({2048, fwd, bwd + 1});  // the state, read by its backward
    b.push_back({8192, fwd, fwd});      // a temporary of the forward
    b.push_back({640, fwd + 1, fwd + 1});
    b.push_back({2048, bwd, bwd + 1});  // its gradient
  }
  ASSERT_GT(b.size(), bp::kGreedyBySizeLimit);
  std::vector<bp::PlannedBuffer> planned = b;
  const bp::MemoryPlan plan = bp::plan_memory(planned, T);
  std::vector<size_t> offsets;
  for (const auto& x : planned) offsets.push_back(x.offset);
  EXPECT_EQ(clash(planned, offsets, plan.arena_bytes), "");
  std::printf("  %zu buffers: arena %.1f MB, lower bound %.1f MB\n", b.size(),
              plan.arena_bytes / 1e6, plan.lower_bound_bytes / 1e6);
  EXPECT_LE(double(plan.arena_bytes), 1.10 * double(plan.lower_bound_bytes));
}

}  // namespace
