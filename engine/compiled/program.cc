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

template class Program<float>;
template class Program<double>;  // bp_gradbench's tensor forms in float64

}  // namespace bp
