// engine/compiled/planner_test.cc: the memory planner's placements (engine/compiled/planner.h) on
// made-up lifetimes: random ones, a training step's nested ones, one step's buffers where only the
// peak-first order reaches the bound, and an unrolled chain of a million buffers, which the
// quadratic placements could not plan in any reasonable time.
//
// Every plan is checked by plan_placement_error, a sweep over time that keeps the live buffers
// ordered by offset: a buffer that starts overlapping a live neighbour's bytes is a failure (no
// pair of buffers is compared, so the million-buffer plan is checked too). It is checked in turn
// against every pair on small random placements. The recomputation search's range-add tree
// (engine/compiled/live_bytes.h) against a plain array.
//   build/engine_tests --gtest_filter='Planner*'     (or ctest -R Planner)
#include "engine/compiled/planner.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "engine/compiled/live_bytes.h"
#include "workloads/data.h"

namespace {

// "" if no two buffers live at one instruction share a byte and every buffer ends within the
// arena; otherwise the first clash found (the check a plan read from a cache goes through).
std::string clash(std::vector<bp::PlannedBuffer> b, const std::vector<size_t>& offsets,
                  size_t arena) {
  for (size_t i = 0; i < b.size(); i++) b[i].offset = offsets[i];
  return bp::plan_placement_error(b, arena);
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

// The sweep against every pair, on small random placements that clash about half the time; and
// the bounds a plan read from outside must keep (offset + bytes past 2^64, an arena past its end).
TEST(Planner, ThePlacementCheckAgreesWithEveryPair) {
  bp::SplitMix64 rng{0x5eed};
  int clashing = 0, clean = 0;
  for (int trial = 0; trial < 2000; trial++) {
    std::vector<bp::PlannedBuffer> b(size_t(1 + rng.below(12)));
    size_t arena = 0;
    for (auto& x : b) {
      x.first = int32_t(rng.below(10));
      x.last = x.first + int32_t(rng.below(5));
      x.bytes = 64 * size_t(rng.below(4));
      x.offset = 64 * size_t(rng.below(3 * b.size()));
      arena = std::max(arena, x.offset + x.bytes);
    }
    bool pair_clash = false;
    for (size_t i = 0; i < b.size(); i++)
      for (size_t j = i + 1; j < b.size(); j++)
        pair_clash |= b[i].bytes && b[j].bytes && b[i].first <= b[j].last &&
                      b[j].first <= b[i].last && b[i].offset < b[j].offset + b[j].bytes &&
                      b[j].offset < b[i].offset + b[i].bytes;
    const std::string why = bp::plan_placement_error(b, arena);
    ASSERT_EQ(!why.empty(), pair_clash) << "trial " << trial << ": " << why;
    (pair_clash ? clashing : clean)++;
  }
  EXPECT_GT(clashing, 200);
  EXPECT_GT(clean, 200);
  const std::vector<bp::PlannedBuffer> one = {{128, 0, 0, ~size_t(63)}};
  EXPECT_NE(bp::plan_placement_error(one, 1024).find("outside the arena"), std::string::npos);
  const std::vector<bp::PlannedBuffer> fits = {{128, 0, 0, 0}};
  EXPECT_EQ(bp::plan_placement_error(fits, 128), "");
  EXPECT_NE(bp::plan_placement_error(fits, size_t(1) << 62).find("end at 128"), std::string::npos);
  const std::vector<bp::PlannedBuffer> odd = {{128, 0, 0, 32}};
  EXPECT_NE(bp::plan_placement_error(odd, 160).find("not a multiple"), std::string::npos);
  std::printf("  2000 random placements: %d clash, %d do not; the sweep agrees on each\n", clashing,
              clean);
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

// The live-bytes model's tree: random range additions, its maximum, where it is and each
// point, against a plain array.
TEST(PlannerLiveBytes, RangeAddTreeAgreesWithAnArray) {
  for (int32_t n : {1, 2, 7, 64, 1000}) {
    bp::program_ir::MaxTree tree(n);
    std::vector<int64_t> plain(size_t(n), 0);
    uint64_t seed = 12345 + uint64_t(n);
    auto next = [&] { return seed = seed * 6364136223846793005ull + 1442695040888963407ull; };
    for (int op = 0; op < 2000; op++) {
      int32_t lo = int32_t(next() >> 33) % n, hi = int32_t(next() >> 33) % n;
      if (lo > hi) std::swap(lo, hi);
      const int64_t v = int64_t(next() >> 40) % 1000 - 400;
      tree.add(lo, hi, v);
      for (int32_t t = lo; t <= hi; t++) plain[size_t(t)] += v;
      const auto top = std::max_element(plain.begin(), plain.end());
      ASSERT_EQ(tree.max(), *top) << "n " << n << " op " << op;
      ASSERT_EQ(tree.argmax(), int32_t(top - plain.begin())) << "n " << n << " op " << op;
      const int32_t t = int32_t(next() >> 33) % n;
      ASSERT_EQ(tree.at(t), plain[size_t(t)]) << "n " << n << " point " << t;
    }
  }
}

}  // namespace
