// workloads/backend.h: the one seam between workloads and backends.
//
// A workload (workloads/workload.h) is a class template over a backend B. It includes this header
// and nothing from engine/ or torch; a backend (engine/backend.h, baselines/libtorch/backend.h) is
// a small adapter that satisfies one or both concepts below and says which (`implements`). Each
// backend binary instantiates every workload of the kinds it implements
// (harness/driver/backend_main.h): a backend that drifts out of a concept it claims, or a workload
// that uses more than its concept, does not compile.
//
// Two concepts: ScalarBackend (every value one number) and TensorBackend (row-major matrices of
// the backend's `Real`: float32 for every model row, double for GradBench's evals).
#pragma once

#include <array>
#include <concepts>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace bp {

// Which concepts a backend implements, stated by every backend as
// `static constexpr Implements implements = ...;`. Workloads of a kind it does not implement are
// reported as skipped, with that reason.
enum class Implements { scalar_graphs, models, both };

constexpr bool implements_scalar_graphs(Implements i) { return i != Implements::models; }
constexpr bool implements_models(Implements i) { return i != Implements::scalar_graphs; }

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
  { x* x } -> std::convertible_to<typename B::Scalar>;
  { x / x } -> std::convertible_to<typename B::Scalar>;
  { x + c } -> std::convertible_to<typename B::Scalar>;
  { c + x } -> std::convertible_to<typename B::Scalar>;
  { x - c } -> std::convertible_to<typename B::Scalar>;
  { c - x } -> std::convertible_to<typename B::Scalar>;
  { x* c } -> std::convertible_to<typename B::Scalar>;
  { c* x } -> std::convertible_to<typename B::Scalar>;
  { x / c } -> std::convertible_to<typename B::Scalar>;
  { c / x } -> std::convertible_to<typename B::Scalar>;
  { -x } -> std::convertible_to<typename B::Scalar>;
  { b.pow(x, c) } -> std::same_as<typename B::Scalar>;
  { b.relu(x) } -> std::same_as<typename B::Scalar>;
  { b.tanh(x) } -> std::same_as<typename B::Scalar>;
  { b.exp(x) } -> std::same_as<typename B::Scalar>;
  { b.log(x) } -> std::same_as<typename B::Scalar>;
  {b.backward(x)};
  { b.value(x) } -> std::convertible_to<double>;
  { b.grad(x) } -> std::convertible_to<double>;
  {b.reset()};
};

// A scalar backend that compiles the step it captured may replay it without the workload's code
// (our compiled mode, engine/compiled/backend.h): once it can, the driver calls
// replay_scalar_step instead of the workload's step (harness/driver/timed_loops.h). A compile-time
// capability: a replay costs no call through a pointer, the step being a few nanoseconds.
template <class B>
concept ReplaysScalarSteps = ScalarBackend<B> && requires(B& b, std::span<double> grads) {
  { b.can_replay_scalar_step() } -> std::same_as<bool>;
  { b.replay_scalar_step(grads) } -> std::same_as<double>;
};

// A scalar graph whose gradient count follows its size (GradBench's evals: one gradient per
// input) states `num_grads = kGradsPerSize`, and its Run says how many: `run.num_grads()`.
inline constexpr int kGradsPerSize = -1;

// The extent of a step's gradients: static where num_grads is, so that finish_step counts them
// at compile time; dynamic for kGradsPerSize, where finish_step checks the count as it runs.
template <class W>
inline constexpr size_t kGradsExtent = W::num_grads == kGradsPerSize ? std::dynamic_extent
                                                                     : size_t(W::num_grads);
template <class W>
using GradSpan = std::span<double, kGradsExtent<W>>;

// Room for one step's gradients of `run`: an array, or a vector of run.num_grads().
template <class W, class Run>
auto grads_storage(const Run& run) {
  if constexpr (W::num_grads == kGradsPerSize)
    return std::vector<double>(size_t(run.num_grads()));
  else
    return std::array<double, size_t(W::num_grads)>{};
}

// The end of every scalar step, written once: backward from `root`, each parameter's gradient
// into `grads` (in the order given), reset the backend, and return the root's value. `grads` has
// the workload's num_grads as its static extent, so a count that does not match the parameters
// is a compile error here rather than a write past the array.
template <ScalarBackend B, size_t N, class... Params>
double finish_step(B& be, const typename B::Scalar& root, std::span<double, N> grads,
                   const Params&... params) {
  static_assert(sizeof...(Params) == N,
                "finish_step: pass exactly num_grads parameters (the workload's num_grads)");
  be.backward(root);
  size_t i = 0;
  ((grads[i++] = be.grad(params)), ...);
  const double out = be.value(root);
  be.reset();
  return out;
}

// The same for a step whose parameters are a list (GradBench's evals): one gradient per
// parameter, in the list's order. A count that does not match stops with both counts.
template <ScalarBackend B>
double finish_step(B& be, const typename B::Scalar& root, std::span<double> grads,
                   std::span<const typename B::Scalar> params) {
  if (grads.size() != params.size()) {
    std::fprintf(stderr, "finish_step: %zu gradients asked for %zu parameters\n", grads.size(),
                 params.size());
    std::abort();
  }
  be.backward(root);
  for (size_t i = 0; i < params.size(); i++) grads[i] = be.grad(params[i]);
  const double out = be.value(root);
  be.reset();
  return out;
}

// AdamW's hyperparameters, with torch.optim.AdamW's defaults.
struct AdamW {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.01;
};

// A tensor autodiff backend with an optimizer. Tensors are (rows, cols) of B::Real (float or
// double), row-major; a (1, n) parameter is a row that broadcasts (a bias, a layernorm scale).
//  - param / constant / indices copy plain numbers in (at setup, never in the timed step);
//  - linear(x, W, b) is x W^T + b with W (out, in), as torch.nn.Linear; linear(x, W) has no bias;
//    linear_relu(x, W, b) is relu(linear(x, W, b)), which a backend may fuse;
//  - attention(qkv, B, T, H): causal multi-head self-attention of qkv (B*T, 3C) into (B*T, C);
//  - add and mul are elementwise, y of x's shape or one row broadcast over every row; sum is of
//    every element (1, 1), sum_rows and logsumexp of every row (N, 1);
//  - a training step is: zero_grad, the forward ops, backward(loss), optimizer_step, end_step.
template <class B>
concept TensorBackend = requires(B& b, typename B::Tensor x, typename B::Indices idx,
                                 std::span<const typename B::Real> values,
                                 std::span<const int32_t> ids, std::span<typename B::Real> out,
                                 int32_t n, AdamW adamw, double lr) {
  requires std::same_as<typename B::Real, float> || std::same_as<typename B::Real, double>;
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
  { b.mul(x, x) } -> std::same_as<typename B::Tensor>;
  { b.tanh(x) } -> std::same_as<typename B::Tensor>;
  { b.relu(x) } -> std::same_as<typename B::Tensor>;
  { b.sigmoid(x) } -> std::same_as<typename B::Tensor>;
  { b.exp(x) } -> std::same_as<typename B::Tensor>;
  { b.log(x) } -> std::same_as<typename B::Tensor>;
  { b.sum(x) } -> std::same_as<typename B::Tensor>;
  { b.sum_rows(x) } -> std::same_as<typename B::Tensor>;
  { b.logsumexp(x) } -> std::same_as<typename B::Tensor>;
  { b.layernorm(x, x, x) } -> std::same_as<typename B::Tensor>;
  { b.attention(x, n, n, n) } -> std::same_as<typename B::Tensor>;
  { b.cross_entropy(x, idx) } -> std::same_as<typename B::Tensor>;
  {b.use_adamw(adamw)};
  {b.use_sgd(lr)};
  {b.zero_grad()};
  {b.backward(x)};
  {b.optimizer_step()};
  {b.end_step()};
  { b.loss_value(x) } -> std::convertible_to<double>;
  {b.read_grad(x, out)};
};

// Numbers a workload made (float32 weights, an eval's doubles) as tensor backend B takes them:
// the same vector when it is already B's Real (no copy: setup memory counts in the peak),
// otherwise rounded to nearest into a new one.
template <class B, class From>
auto as_reals(const std::vector<From>& v) {
  if constexpr (std::is_same_v<From, typename B::Real>)
    return std::span<const From>(v);
  else
    return std::vector<typename B::Real>(v.begin(), v.end());
}
template <class B, class From>
std::vector<typename B::Real> as_reals(std::span<const From> v) {
  return {v.begin(), v.end()};
}

// How a backend goes back through time on a recurrent model, as the backend binaries' flags give
// it (--strategy, --snapshots, --interval, --checkpoint_dir). A backend that has strategies names
// them in `through_time_strategies`, the first being autograd over the unrolled sequence.
struct ThroughTime {
  std::string strategy;   // "": the backend's first
  int32_t snapshots = 8;  // states kept in memory (our engine's revolve and multistage)
  int64_t interval = 0;   // multistage: a checkpoint every `interval` states; 0: measured
  std::string directory = "/var/tmp";  // multistage: where the checkpoint file goes
};

// A recurrent model (workloads/recurrent.h) as a backend that goes back through time its own way
// sees it: `length` steps from an initial (batch, hidden) state, each step a cell (state t to
// state t+1) and a term of the loss (the sum of the terms).
template <class M, class B>
concept RecurrentModel = TensorBackend<B> &&
    requires(M& m, B& be, typename B::Tensor h, int64_t t) {
  { m.length } -> std::convertible_to<int64_t>;
  { M::batch } -> std::convertible_to<int32_t>;
  { M::hidden } -> std::convertible_to<int32_t>;
  { m.initial_state() } -> std::same_as<typename B::Tensor>;
  { m.cell(be, h, t) } -> std::same_as<typename B::Tensor>;
  { m.step_loss(be, h, t) } -> std::same_as<typename B::Tensor>;
};

}  // namespace bp
