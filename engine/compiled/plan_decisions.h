// engine/compiled/plan_decisions.h: what compiling a program is asked and what it decides, apart
// from the program (engine/compiled/program.h) so that the plan cache (engine/compiled/
// plan_cache.h), which stores and returns the decisions, needs none of its machinery: the arena's
// budget, the error of a budget no plan meets, the decisions themselves and the mismatch of
// decisions given with another capture.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "engine/compiled/planner.h"

namespace bp {

// The planned arena's budget: bytes, or a fraction of the plan's own peak without one (0 and 0:
// no budget).
struct ArenaBudget {
  size_t bytes = 0;
  double fraction = 0;
  // Without a budget: recompute what costs almost nothing (choose_recomputation). A budget of
  // the plan's own peak (fraction 1) recomputes nothing.
  bool free_recomputation = true;
  // Chains of elementwise and row-wise ops run as tiled groups (engine/compiled/fusion.h), their
  // internal buffers planned one tile long.
  bool fuse = true;
};

// A budget no plan of this program meets: the smallest arena this planner placed by recomputation
// (a budget it meets), and the arena the program plans without a budget.
struct BudgetError {
  size_t budget, smallest, unbudgeted;
};

// The decisions that make a program from its capture: each op's kernel (with the timings that
// chose it), the activations recomputed, every planned buffer's offset. A plan cache stores them
// (engine/compiled/plan_cache.h); given back, they make the same program, bit for bit, without
// timing a kernel, searching recomputations or placing a buffer.
struct PlanDecisions {
  struct Choice {
    std::string dialect;
    std::vector<std::pair<std::string, double>> seconds;  // each dialect timed, if any was
  };
  std::vector<Choice> kernels;  // in Program::kernels() order
  std::vector<uint32_t> recomputed;
  std::vector<size_t> offsets;  // per planned buffer, in Program::buffers() order
  MemoryPlan plan;
  size_t budget_bytes = 0;
  size_t instructions = 0;         // of the program they made: checked when they make it again
  std::string libraries_left_out;  // by auto's weighing (the backend's report), ", " between
};
// Decisions that do not fit the capture they are given with (what a plan cache reports).
struct PlanMismatch {
  std::string why;
};

}  // namespace bp
