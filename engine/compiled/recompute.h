// engine/compiled/recompute.h: which activations a compiled program drops after the forward and
// recomputes before the backward, to fit a memory budget or for almost nothing.
//
// Rematerialisation (RAF, arXiv 2303.04759, after Chen et al. 2016's checkpointing): drop an
// activation after the forward and recompute it before the backward that needs it. A
// recomputation that needs another dropped value has it recomputed first (`lower`, the
// program's, places them), so chains of cheap ops can go together. Two uses:
//  - a memory budget (`budget` bytes): choose until the plan fits, at whatever cost. The
//    candidates go by bytes freed per unit of recomputation cost, each kept if it lowers the
//    peak, or the bytes at the instruction that holds it (two instructions can tie at the peak);
//    passes repeat while one keeps something. Each trial is a drop in a model of the live bytes
//    (engine/compiled/live_bytes.h), a few range additions, so the search is linear in the
//    program's size, not candidates^2 lowerings;
//  - without one, what costs almost nothing (ArenaBudget::free_recomputation): elementwise ops
//    and layernorm only, a pass over memory each (a FLOP model prices attention's exp and
//    softmax at a tenth of their time: recomputing two of mini_gpt_wide's made its step 7-9%
//    slower), each lowering the peak by at least kFreeRecomputeMinBytes, all of them together
//    costing at most kFreeRecomputeCost of the step; the choices are kept up to the one that
//    reached the lowest peak. So few qualify that each is weighed by a real lowering: RAF's
//    greedy, the candidate that lowers the peak the most per unit of cost (or, when none does,
//    the bytes live on average).
// Cost: the forward's FLOPs (Emitted::cost) plus kRecomputeCallCost for the kernel call itself.
// `lower(e, chosen)` is the program lowered with `chosen` recomputed (Program::lower), whose peak
// the search weighs. Tests: engine/compiled/compiled_test.cc (budgets met, bitwise the eager step,
// the model's start exact).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "engine/compiled/live_bytes.h"
#include "engine/compiled/lowered.h"

namespace bp {

inline constexpr double kRecomputeCallCost = 1e4;   // a small kernel's fixed cost, in FLOPs
inline constexpr double kFreeRecomputeCost = 0.01;  // of the step's modelled cost
inline constexpr size_t kFreeRecomputeMinBytes = 256 << 10;
// The search is candidates x program long: past this many, nothing is recomputed for free.
inline constexpr size_t kFreeRecomputeMaxCandidates = 512;
inline constexpr int kBudgetPasses = 64;  // over the candidates, each keeping at least one

// Under a budget: `l0` is e lowered with nothing recomputed. Returns the nodes to recompute.
template <class T>
std::vector<uint32_t> choose_under_budget(const program_ir::Emitted<T>& e,
                                          const std::vector<program_ir::Buffer>& buffers,
                                          uint32_t first_node, const program_ir::Lowered<T>& l0,
                                          size_t budget, size_t lowered_peak) {
  program_ir::LiveBytes<T> model(e, l0, first_node);
  if (model.peak() != lowered_peak) {  // a bug in the model, never a user's input
    std::fprintf(stderr,
                 "bp::Program: the live-bytes model starts at %zu bytes where the lowered "
                 "program peaks at %zu\n",
                 model.peak(), lowered_peak);
    std::abort();
  }
  std::vector<double> score(e.cost.size(), 0);
  for (uint32_t c : e.candidates) {
    const program_ir::Pending<T>& f = e.code[e.forward_of[c - first_node]];
    size_t frees = buffers[f.out.buffer].elems;
    if (f.aux.buffer >= 0) frees += buffers[f.aux.buffer].elems;
    score[c - first_node] = double(frees) / (e.cost[c - first_node] + kRecomputeCallCost);
  }
  std::vector<uint32_t> order = e.candidates, chosen;
  std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    return score[a - first_node] > score[b - first_node];
  });
  for (int pass = 0; pass < kBudgetPasses && model.peak() > budget; pass++) {
    const size_t kept = chosen.size();
    for (uint32_t c : order) {
      if (model.peak() <= budget) break;
      if (model.dropped(c)) continue;
      const size_t peak = model.peak();
      const int32_t at = model.peak_at();
      model.drop(c);
      if (model.peak() < peak || (model.peak() == peak && model.bytes_at(at) < peak)) {
        model.keep();
        chosen.push_back(c);
      } else {
        model.undo();
      }
    }
    if (chosen.size() == kept) break;
  }
  return chosen;
}

template <class T, class Lower>
std::vector<uint32_t> choose_recomputation(const program_ir::Emitted<T>& e,
                                           const std::vector<program_ir::Buffer>& buffers,
                                           uint32_t first_node, Lower&& lower, size_t budget,
                                           size_t* unbudgeted, size_t* reached) {
  using program_ir::lower_bound_of;
  std::vector<uint32_t> chosen;
  double mean = 0;
  const program_ir::Lowered<T> l0 = lower(e, chosen);
  size_t peak = lower_bound_of(l0, &mean);
  *unbudgeted = *reached = peak;
  if (budget) {
    if (peak <= budget) return chosen;
    chosen = choose_under_budget(e, buffers, first_node, l0, budget, peak);
    *reached = lower_bound_of(lower(e, chosen));
    return chosen;
  }
  // For almost nothing.
  if (e.candidates.size() > kFreeRecomputeMaxCandidates) return chosen;
  double allowance = 0;
  for (double c : e.cost) allowance += 3 * c;  // forward and backward, roughly
  allowance = kFreeRecomputeCost * (allowance + kRecomputeCallCost * double(e.code.size()));
  std::vector<bool> dropped(e.cost.size(), false);
  size_t lowest = peak, lowest_at = 0;
  for (;;) {
    double best_peak_score = 0, best_mean_score = 0;
    int64_t best_peak = -1, best_mean = -1;
    size_t peak_of_best = peak;
    double mean_of_best = mean, mean_of_best_mean = mean;
    size_t peak_of_best_mean = peak;
    for (uint32_t c : e.candidates) {
      const double cost = e.cost[c - first_node] + kRecomputeCallCost;
      if (dropped[c - first_node] || cost > allowance) continue;
      // A pass over memory, and one that frees at least kFreeRecomputeMinBytes itself (its output
      // and aux), or trying it is wasted: an unrolled RNN has hundreds of 2 KiB candidates.
      const program_ir::Pending<T>& f = e.code[e.forward_of[c - first_node]];
      if (!op_rules<T>()[int(f.op)].elementwise && f.op != TensorOp::layernorm) continue;
      size_t frees = buffers[f.out.buffer].elems;
      if (f.aux.buffer >= 0) frees += buffers[f.aux.buffer].elems;
      if (frees * sizeof(T) < kFreeRecomputeMinBytes) continue;
      std::vector<uint32_t> trial = chosen;
      trial.push_back(c);
      double m = 0;
      const size_t p = lower_bound_of(lower(e, trial), &m);
      if (p < peak && peak - p >= kFreeRecomputeMinBytes &&
          double(peak - p) / cost > best_peak_score)
        best_peak_score = double(peak - p) / cost, best_peak = c, peak_of_best = p,
        mean_of_best = m;
      if (p <= peak && m < mean && (mean - m) / cost > best_mean_score &&
          mean - m >= double(kFreeRecomputeMinBytes))
        best_mean_score = (mean - m) / cost, best_mean = c, peak_of_best_mean = p,
        mean_of_best_mean = m;
    }
    const int64_t best = best_peak >= 0 ? best_peak : best_mean;
    if (best < 0) break;
    chosen.push_back(uint32_t(best));
    dropped[best - first_node] = true;
    allowance -= e.cost[best - first_node] + kRecomputeCallCost;
    peak = best_peak >= 0 ? peak_of_best : peak_of_best_mean;
    mean = best_peak >= 0 ? mean_of_best : mean_of_best_mean;
    if (peak < lowest) lowest = peak, lowest_at = chosen.size();
  }
  chosen.resize(lowest_at);
  *reached = lowest;
  return chosen;
}

}  // namespace bp
