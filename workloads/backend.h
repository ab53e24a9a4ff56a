// workloads/backend.h: the one seam between workloads and backends.
//
// A workload is a class template over a backend B. It includes this header and nothing from
// engine/ or torch; a backend (engine/backend.h, baselines/libtorch_backend.h) is a small adapter
// that satisfies the concept. The harness instantiates every workload in workloads/registry.h on
// every backend; a workload whose `requires` a backend does not meet is reported as skipped.
//
// Two concepts: ScalarBackend (every value one number) and TensorBackend (row-major float32
// matrices). A backend may satisfy both.
#pragma once

#include <concepts>
#include <cstdint>
#include <span>
#include <string_view>

namespace bp {

// A scalar autodiff backend: every value is one number.
//  - param(v) makes a trainable leaf that lives as long as the backend;
//  - Scalar supports + - * / with Scalars and doubles on either side, and unary minus;
//    workloads write `c = c + x`, never `c += x`, so that no backend is asked for in-place ops;
//  - backward(root) accumulates d(root)/d(param) into every param's gradient;
//  - reset() ends a step: drops the graph and clears parameter gradients.
template <class B>
concept ScalarBackend = requires(B& b, typename B::Scalar x, double c) {
  { B::name } -> std::convertible_to<std::string_view>;
  { b.param(c) } -> std::same_as<typename B::Scalar>;
  { x + x } -> std::convertible_to<typename B::Scalar>;
  { x - x } -> std::convertible_to<typename B::Scalar>;
  { x * x } -> std::convertible_to<typename B::Scalar>;
  { x / x } -> std::convertible_to<typename B::Scalar>;
  { x + c } -> std::convertible_to<typename B::Scalar>;
  { c + x } -> std::convertible_to<typename B::Scalar>;
  { x - c } -> std::convertible_to<typename B::Scalar>;
  { c - x } -> std::convertible_to<typename B::Scalar>;
  { x * c } -> std::convertible_to<typename B::Scalar>;
  { c * x } -> std::convertible_to<typename B::Scalar>;
  { x / c } -> std::convertible_to<typename B::Scalar>;
  { c / x } -> std::convertible_to<typename B::Scalar>;
  { -x } -> std::convertible_to<typename B::Scalar>;
  { b.pow(x, c) } -> std::same_as<typename B::Scalar>;
  { b.relu(x) } -> std::same_as<typename B::Scalar>;
  { b.tanh(x) } -> std::same_as<typename B::Scalar>;
  { b.exp(x) } -> std::same_as<typename B::Scalar>;
  { b.log(x) } -> std::same_as<typename B::Scalar>;
  { b.backward(x) };
  { b.value(x) } -> std::convertible_to<double>;
  { b.grad(x) } -> std::convertible_to<double>;
  { b.reset() };
};

// The end of every scalar step, written once: backward from `root`, each parameter's gradient
// into `grads` (in the order given), reset the backend, and return the root's value.
template <ScalarBackend B, class... Params>
double finish_step(B& be, const typename B::Scalar& root, std::span<double> grads,
                   const Params&... params) {
  be.backward(root);
  int i = 0;
  ((grads[i++] = be.grad(params)), ...);
  const double out = be.value(root);
  be.reset();
  return out;
}

// AdamW's hyperparameters, with torch.optim.AdamW's defaults.
struct AdamW {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.01;
};

// A tensor autodiff backend with an optimizer. Tensors are (rows, cols) float32, row-major;
// a (1, n) parameter is a row that broadcasts (a bias, a layernorm scale).
//  - param / constant / indices copy plain numbers in (at setup, never in the timed step);
//  - linear(x, W, b) is x W^T + b with W (out, in), as torch.nn.Linear; linear(x, W) has no bias;
//    linear_relu(x, W, b) is relu(linear(x, W, b)), which a backend may fuse;
//  - attention(qkv, B, T, H): causal multi-head self-attention of qkv (B*T, 3C) into (B*T, C);
//  - a training step is: zero_grad, the forward ops, backward(loss), optimizer_step, end_step.
template <class B>
concept TensorBackend = requires(B& b, typename B::Tensor x, typename B::Indices idx,
                                 std::span<const float> values, std::span<const int32_t> ids,
                                 std::span<float> out, int32_t n, AdamW adamw, double lr) {
  { B::name } -> std::convertible_to<std::string_view>;
  { b.param(n, n, values) } -> std::same_as<typename B::Tensor>;
  { b.constant(n, n, values) } -> std::same_as<typename B::Tensor>;
  { b.indices(ids) } -> std::same_as<typename B::Indices>;
  { b.linear(x, x, x) } -> std::same_as<typename B::Tensor>;
  { b.linear(x, x) } -> std::same_as<typename B::Tensor>;
  { b.linear_relu(x, x, x) } -> std::same_as<typename B::Tensor>;
  { b.embedding(x, idx) } -> std::same_as<typename B::Tensor>;
  { b.view(x, n, n) } -> std::same_as<typename B::Tensor>;
  { b.add(x, x) } -> std::same_as<typename B::Tensor>;
  { b.tanh(x) } -> std::same_as<typename B::Tensor>;
  { b.relu(x) } -> std::same_as<typename B::Tensor>;
  { b.layernorm(x, x, x) } -> std::same_as<typename B::Tensor>;
  { b.attention(x, n, n, n) } -> std::same_as<typename B::Tensor>;
  { b.cross_entropy(x, idx) } -> std::same_as<typename B::Tensor>;
  { b.use_adamw(adamw) };
  { b.use_sgd(lr) };
  { b.zero_grad() };
  { b.backward(x) };
  { b.optimizer_step() };
  { b.end_step() };
  { b.loss_value(x) } -> std::convertible_to<double>;
  { b.read_grad(x, out) };
};

// A model workload trains (workloads/models.h); the others are scalar graphs (workloads/scalar.h).
template <class W>
concept ModelWorkload = requires { W::needs_corpus; };

// What a workload says about one of its instances: which size, and which answers are known.
struct WorkloadSize {
  std::string_view key;  // e.g. "nodes"; empty for a workload without a size
  int64_t value = 0;
};

// Answers known independently of any backend (from a paper or the micrograd README), with the
// tolerance they were published at.
struct KnownAnswer {
  double value;
  double grads[4];
  int num_grads;
  double tolerance;  // absolute
};

}  // namespace bp
