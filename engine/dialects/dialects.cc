// engine/dialects/dialects.cc: every op's kernels, made once for float and double
// (engine/dialects/dialects.h says what a dialect is): the engine's own, the reference's, and for
// the products those of the libraries found at build time; and the selector that chooses among
// them.
#include "engine/dialects/dialects.h"

namespace bp {

namespace dialect_tables {
template <class T>
bool always(const OpArgs<T>&) {
  return true;
}
template <class T>
Kernel<T> engine_kernel(TensorOp op) {
  const OpRule<T>& r = op_rules<T>()[int(op)];
  return {"engine",
          100,
          true,
          false,
          always<T>,
          r.forward,
          r.backward,
          r.forward_scratch,
          r.backward_scratch,
          r.backward_fresh};
}
// The reference's forward with the engine's backward (tanh, relu, exp and log differentiate in
// one product from what both forwards save).
template <class T>
Kernel<T> reference_forward(TensorOp op, void (*forward)(const OpArgs<T>&)) {
  Kernel<T> k = engine_kernel<T>(op);
  k.dialect = "reference", k.priority = 0, k.forward = forward;
  return k;
}
template <class T>
Kernel<T> reference_kernel(TensorOp op, void (*forward)(const OpArgs<T>&),
                           void (*backward)(const OpArgs<T>&)) {
  Kernel<T> k = reference_forward<T>(op, forward);
  k.backward = backward, k.backward_fresh = 0;
  return k;
}
template <class T>
void reference_log_forward(const OpArgs<T>& a) {  // in the reference's wider type, then rounded
  for (size_t i = 0; i < ops::numel(a); i++) a.out[i] = T(std::log(reference::Acc<T>(a.in[0][i])));
}
template <class T, class G, bool Linear>
Kernel<T> gemm_kernel(const char* name, int priority) {
  return {name,
          priority,
          G::in_build,
          G::library,
          ops::products_available<T, G, Linear>,
          Linear ? ops::linear_forward<T, G> : ops::matmul_forward<T, G>,
          Linear ? ops::linear_backward<T, G> : ops::matmul_backward<T, G>,
          ops::product_forward_scratch<T, G, Linear>,
          ops::product_backward_scratch<T, G, Linear>,
          op_rules<T>()[int(Linear ? TensorOp::linear : TensorOp::matmul)].backward_fresh};
}
template <class T, bool Linear>
std::vector<Kernel<T>> gemm_kernels(TensorOp op) {
  return {engine_kernel<T>(op),
          gemm_kernel<T, GeneratedGemm, Linear>("generated", 110),  // the engine's bits
          gemm_kernel<T, BlisGemm, Linear>("blis", 80),
          gemm_kernel<T, OpenBlasGemm, Linear>("openblas", 70),
          gemm_kernel<T, DnnlGemm, Linear>("onednn", 60),
          gemm_kernel<T, XsmmGemm, Linear>("libxsmm", 50),
          gemm_kernel<T, reference::Gemm, Linear>("reference", 0)};
}

template <class T>
std::vector<Kernel<T>> make(TensorOp op) {
  namespace ref = reference;
  switch (op) {
    case TensorOp::matmul: return gemm_kernels<T, false>(op);
    case TensorOp::linear: return gemm_kernels<T, true>(op);
    case TensorOp::add:
      return {engine_kernel<T>(op), reference_kernel<T>(op, ref::add_forward, ref::add_backward)};
    case TensorOp::mul:
      return {engine_kernel<T>(op), reference_kernel<T>(op, ref::mul_forward, ref::mul_backward)};
    case TensorOp::tanh: return {engine_kernel<T>(op), reference_forward<T>(op, ref::tanh_forward)};
    case TensorOp::relu: return {engine_kernel<T>(op), reference_forward<T>(op, ref::relu_forward)};
    case TensorOp::exp: return {engine_kernel<T>(op), reference_forward<T>(op, ref::exp_forward)};
    case TensorOp::log:
      return {engine_kernel<T>(op), reference_forward<T>(op, reference_log_forward)};
    case TensorOp::gelu:
      return {engine_kernel<T>(op), reference_kernel<T>(op, ref::gelu_forward, ref::gelu_backward)};
    case TensorOp::softmax:
      return {engine_kernel<T>(op),
              reference_kernel<T>(op, ref::softmax_forward, ref::softmax_backward)};
    case TensorOp::cross_entropy:
      return {engine_kernel<T>(op),
              reference_kernel<T>(op, ref::cross_entropy_forward, ref::cross_entropy_backward)};
    case TensorOp::layernorm:
      return {engine_kernel<T>(op),
              reference_kernel<T>(op, ref::layernorm_forward, ref::layernorm_backward)};
    case TensorOp::attention:
      return {engine_kernel<T>(op),
              reference_kernel<T>(op, ref::attention_forward, ref::attention_backward)};
    default: return {engine_kernel<T>(op)};
  }
}
}  // namespace dialect_tables

template <class T>
std::span<const Kernel<T>> kernels_of(TensorOp op) {
  static const auto tables = [] {
    std::array<std::vector<Kernel<T>>, size_t(TensorOp::count)> t;
    for (size_t i = 0; i < t.size(); i++) t[i] = dialect_tables::make<T>(TensorOp(i));
    return t;
  }();
  return tables[size_t(op)];
}

template std::span<const Kernel<float>> kernels_of<float>(TensorOp);
template std::span<const Kernel<double>> kernels_of<double>(TensorOp);

template <>
const Kernel<float>* bf16_kernel_of<float>(TensorOp op) {
  static const auto kernels = [] {
    std::array<Kernel<float>, size_t(TensorOp::count)> k{};
    for (size_t i = 0; i < k.size(); i++) {
      const OpRule<float>& r = op_rules_bf16()[i];
      k[i] = {"bf16",
              -1,
              true,
              false,
              dialect_tables::always<float>,
              r.forward,
              r.backward,
              r.forward_scratch,
              r.backward_scratch,
              r.backward_fresh};
    }
    return k;
  }();
  return replaced_in_bf16(op) ? &kernels[size_t(op)] : nullptr;
}
template <>
const Kernel<double>* bf16_kernel_of<double>(TensorOp) {
  return nullptr;
}

// The selector (engine/dialects/dialects.h), once for both.
template class DialectSelector<float>;
template class DialectSelector<double>;

}  // namespace bp
