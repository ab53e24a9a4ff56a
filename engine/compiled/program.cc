// engine/compiled/program.cc: the compiled mode's Program<float> (engine/compiled/program.h),
// instantiated once here for every program and test that compiles tensor steps, with the members
// no other file needs to see.
#include "engine/compiled/program.h"

#include <algorithm>

namespace bp {

// Each persistent node's gradient writers in the lowered code: the first (written fresh where the
// step starts at zero, else zeroed by start_gradients) and the last (where backward(final) says
// it final).
template <class T>
void Program<T>::find_param_writes(const TensorGraph<T>& g, const std::vector<Pending>& code) {
  param_first_writes_.clear(), param_fills_.clear(), params_fresh_ = false;
  // A parameter j's gradient is the outside index first_node_ + j (emit).
  const int32_t P = int32_t(first_node_);
  enum Start : uint8_t { unwritten, written_fresh, zeroed };
  std::vector<Start> start(first_node_, unwritten);
  for (size_t t = 0; t < code.size(); t++)
    for (int k = 0; k < 3; k++) {
      const int32_t grad = code[t].din[k].buffer < 0 ? code[t].din[k].outside : -1;
      if (grad < P || start[size_t(grad - P)] != unwritten) continue;
      const bool fresh = program_ir::fresh_operand(code[t], [&](const Ref& r) {
                           return r.buffer < 0 && r.outside == grad;
                         }) == k;
      if (fresh) param_first_writes_.push_back({t, uint8_t(1 << k)});
      start[size_t(grad - P)] = fresh ? written_fresh : zeroed;
    }
  for (uint32_t j = 0; j < first_node_; j++)
    if (const auto& p = g.node_at(j); p.grad && start[j] != written_fresh)
      param_fills_.push_back({p.grad, size_t(p.rows) * p.cols});
  std::vector<size_t> last(first_node_, SIZE_MAX);
  for (size_t t = 0; t < code.size(); t++)
    for (int k = 0; k < 3; k++)
      if (const int32_t grad = code[t].din[k].buffer < 0 ? code[t].din[k].outside : -1; grad >= P)
        last[size_t(grad - P)] = t;
  param_last_writes_.clear();
  for (uint32_t j = 0; j < first_node_; j++) param_last_writes_.push_back({last[j], j});
  std::sort(param_last_writes_.begin(), param_last_writes_.end(), [](const auto& a, const auto& b) {
    return (a.first == SIZE_MAX ? 0 : a.first + 1) < (b.first == SIZE_MAX ? 0 : b.first + 1);
  });
}

// The given decisions' kernel for the next op (a plan cache's): by dialect name among the op's
// kernels of this build, able to run its shape, and the one `dialects` would have chosen with its
// timings (a plan naming another kernel is refused, not run).
template <class T>
KernelChoice<T> Program<T>::given_choice(TensorOp op, const OpArgs<T>& shape,
                                         const DialectSelector<T>& dialects) const {
  const size_t i = kernels_.size() - 1;
  if (i >= given_->kernels.size())
    throw PlanMismatch{"more ops than the plan's " + std::to_string(given_->kernels.size())};
  const PlanDecisions::Choice& c = given_->kernels[i];
  auto named = [&](const std::string& dialect) -> const Kernel<T>* {
    if (bf16_op(op, shape)) return dialect == "bf16" ? bf16_kernel_of<T>(op) : nullptr;
    for (const Kernel<T>& k : kernels_of<T>(op))
      if (dialect == k.dialect && k.in_build) return &k;
    return nullptr;
  };
  KernelChoice<T> choice{named(c.dialect), {}};
  if (!choice.kernel || !choice.kernel->available(shape))
    throw PlanMismatch{"op " + std::to_string(i) + ": no kernel " + c.dialect + " for " +
                       shape_text(op, shape)};
  for (const auto& [dialect, s] : c.seconds) {
    const Kernel<T>* k = named(dialect);
    if (!k) throw PlanMismatch{"op " + std::to_string(i) + ": no kernel " + dialect};
    choice.seconds.push_back({k->dialect, s});
  }
  if (const std::string why = dialects.why_not_chosen(op, shape, choice); !why.empty())
    throw PlanMismatch{"op " + std::to_string(i) + " (" + shape_text(op, shape) + "): " + why};
  return choice;
}

template class Program<float>;
template class Program<double>;  // bp_gradbench's tensor forms in float64

}  // namespace bp
