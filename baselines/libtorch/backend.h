// baselines/libtorch/backend.h: libtorch 1.13 eager as a ScalarBackend and a TensorBackend
// (workloads/backend.h).
//
// Tensors: ATen's functional ops, which torch::nn modules call underneath (linear is one addmm,
// layer_norm and cross_entropy are the fused kernels), attention written as nanoGPT writes it
// (split, view, transpose, matmul, causal masked_fill, softmax, matmul), and torch::optim's SGD
// and AdamW with optimizer.zero_grad() each step, as in the C++ frontend's examples.
//
// Mixed precision (--precision=bf16): torch.autocast("cpu", dtype=torch.bfloat16) as PyTorch's
// docs place it, around each step's forward and loss and not its backward: entered at zero_grad,
// left before the backward, its cast cache cleared on leaving (what the Python context manager
// does on exit). autocast's own lists decide each op's type; parameters and the optimizer stay
// float32.
//
// Scalars, the way its C++ docs recommend: each value is a 0-dim double tensor, parameters
// have requires_grad, `backward()` on the root, gradients read with `.grad().item<double>()`, and
// reset between steps by setting each parameter's gradient to undefined (set_to_none, the cheaper
// of the two ways PyTorch documents for zero_grad). Thread counts are fixed by the harness
// (apps/bench_libtorch.cc) before any work.
#pragma once

// The parts of the C++ frontend used here, not <torch/torch.h> (every module, data loader and
// serializer): each unit that includes this parses a third less.
#include <ATen/autocast_mode.h>
#include <torch/autograd.h>
#include <torch/nn/functional/loss.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>
#include <torch/types.h>
#include <torch/utils.h>
#include <torch/version.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string_view>
#include <type_traits>
#include <vector>

#include "workloads/backend.h"

namespace bp {

// R: the tensors' type, float (every model row) or double (GradBench's evals in bp_gradbench's
// default precision); scalar graphs are in double either way.
template <class R>
struct LibtorchBackendOf {
  static constexpr std::string_view name =
      std::is_same_v<R, float> ? "libtorch" : "libtorch_double";
  using Real = R;
  static constexpr torch::ScalarType kReal = c10::CppTypeToScalarType<R>::value;
  static constexpr Implements implements = Implements::both;
  using Scalar = torch::Tensor;

  std::vector<torch::Tensor> params;

  Scalar param(double v) {
    params.push_back(torch::tensor(v, torch::dtype(torch::kFloat64).requires_grad(true)));
    return params.back();
  }
  Scalar pow(const Scalar& x, double k) { return torch::pow(x, k); }
  Scalar relu(const Scalar& x) { return torch::relu(x); }
  Scalar tanh(const Scalar& x) { return torch::tanh(x); }
  Scalar exp(const Scalar& x) { return torch::exp(x); }
  Scalar log(const Scalar& x) { return torch::log(x); }
  // Data parallel (baselines/libtorch/ranks.h): before_backward tells DDP's reducer a backward
  // comes; loss_over_ranks, when set (its check), makes a loss the mean of every rank's.
  std::function<void()> before_backward;
  std::function<double(double)> loss_over_ranks;
  void backward(const Scalar& root) {
    leave_autocast();
    if (before_backward) before_backward();
    root.backward();
  }
  double value(const Scalar& x) const { return x.item<double>(); }
  // A parameter the root does not depend on has an undefined grad in libtorch; its derivative is 0.
  double grad(const Scalar& x) const {
    const torch::Tensor& g = x.grad();
    return g.defined() ? g.item<double>() : 0.0;
  }
  void reset() {
    for (auto& p : params) p.mutable_grad().reset();
  }

  // ---- tensors, in R ----
  using Tensor = torch::Tensor;
  using Indices = torch::Tensor;  // int64, as embedding and cross_entropy take them
  std::unique_ptr<torch::optim::Optimizer> optimizer;
  std::map<int32_t, torch::Tensor> causal_masks;  // per context length: true above the diagonal

  // A (1, n) parameter becomes a 1-D tensor of n, the shape torch gives biases and norm scales.
  static torch::Tensor from(int32_t rows, int32_t cols, std::span<const R> v) {
    auto shape = rows == 1 ? std::vector<int64_t>{cols} : std::vector<int64_t>{rows, cols};
    return torch::from_blob(const_cast<R*>(v.data()), shape, kReal).clone();
  }
  Tensor param(int32_t rows, int32_t cols, std::span<const R> v) {
    params.push_back(from(rows, cols, v).requires_grad_(true));
    return params.back();
  }
  Tensor constant(int32_t rows, int32_t cols, std::span<const R> v) {
    return torch::from_blob(const_cast<R*>(v.data()), {rows, cols}, kReal).clone();
  }
  Indices indices(std::span<const int32_t> ids) {
    return torch::from_blob(const_cast<int32_t*>(ids.data()), {int64_t(ids.size())}, torch::kInt32)
        .to(torch::kInt64);
  }
  Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b) {
    return torch::linear(x, w, b);
  }
  Tensor linear(const Tensor& x, const Tensor& w) { return torch::linear(x, w); }
  Tensor linear_relu(const Tensor& x, const Tensor& w, const Tensor& b) {
    return torch::relu(torch::linear(x, w, b));
  }
  Tensor embedding(const Tensor& table, const Indices& idx) { return torch::embedding(table, idx); }
  Tensor view(const Tensor& x, int32_t rows, int32_t cols) { return x.view({rows, cols}); }
  Tensor add(const Tensor& x, const Tensor& y) { return x + y; }
  Tensor mul(const Tensor& x, const Tensor& y) { return x * y; }
  Tensor sigmoid(const Tensor& x) { return torch::sigmoid(x); }
  // exp and log: the scalar graphs' above (a Scalar is a Tensor here).
  Tensor sum(const Tensor& x) { return x.sum().view({1, 1}); }
  Tensor sum_rows(const Tensor& x) { return x.dim() == 1 ? x.sum().view({1, 1}) : x.sum(1, true); }
  // Every row's; a (1, n) parameter is 1-D here (from()), and its one row is the whole tensor.
  Tensor logsumexp(const Tensor& x) {
    return x.dim() == 1 ? torch::logsumexp(x, 0, true).view({1, 1}) : torch::logsumexp(x, 1, true);
  }
  Tensor layernorm(const Tensor& x, const Tensor& g, const Tensor& b) {
    return torch::layer_norm(x, {x.size(-1)}, g, b, 1e-5);
  }
  Tensor attention(const Tensor& qkv, int32_t B, int32_t T, int32_t H) {
    const int64_t C = qkv.size(1) / 3, hs = C / H;
    auto parts = qkv.view({B, T, 3 * C}).split(C, 2);
    auto q = parts[0].view({B, T, H, hs}).transpose(1, 2);  // (B, H, T, hs)
    auto k = parts[1].view({B, T, H, hs}).transpose(1, 2);
    auto v = parts[2].view({B, T, H, hs}).transpose(1, 2);
    auto att = torch::matmul(q, k.transpose(-2, -1)) * (1.0 / std::sqrt(double(hs)));  // (B,H,T,T)
    auto& mask = causal_masks[T];
    if (!mask.defined()) mask = torch::ones({T, T}, torch::kBool).triu(1);
    att = torch::softmax(att.masked_fill(mask, -INFINITY), -1);
    return torch::matmul(att, v).transpose(1, 2).contiguous().view({B * T, C});
  }
  Tensor cross_entropy(const Tensor& logits, const Indices& targets) {
    return torch::nn::functional::cross_entropy(logits, targets);
  }
  void use_adamw(const AdamW& c) {
    optimizer = std::make_unique<torch::optim::AdamW>(params, torch::optim::AdamWOptions(c.lr)
                                                                  .betas({c.beta1, c.beta2})
                                                                  .eps(c.eps)
                                                                  .weight_decay(c.weight_decay));
  }
  void use_sgd(double lr) {
    optimizer = std::make_unique<torch::optim::SGD>(params, torch::optim::SGDOptions(lr));
  }
  void zero_grad() {
    optimizer->zero_grad();
    enter_autocast();
  }
  bool autocast_bf16 = false;  // --precision=bf16
  // Under it, "bfloat16" where its products also sum in bfloat16 (apps/bench_libtorch.cc,
  // use_bf16); null otherwise.
  const char* bf16_sums = nullptr;
  bool in_autocast = false;
  void enter_autocast() {
    if (!autocast_bf16 || in_autocast) return;
    at::autocast::set_cpu_enabled(true);
    at::autocast::set_autocast_cpu_dtype(at::kBFloat16);
    at::autocast::increment_nesting();
    in_autocast = true;
  }
  void leave_autocast() {
    if (!in_autocast) return;
    in_autocast = false;
    if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
    at::autocast::set_cpu_enabled(false);
  }
  void optimizer_step() { optimizer->step(); }
  void end_step() {}
  double loss_value(const Tensor& loss) const {
    const double mine = loss.item<double>();
    return loss_over_ranks ? loss_over_ranks(mine) : mine;
  }
  // ---- recurrent models (workloads/recurrent.h): the way back through time ----
  // store_all: autograd over the unrolled sequence. segments: what a libtorch user writes to save
  // memory, there being no torch::utils::checkpoint in C++: the forward under NoGradGuard keeps
  // the state at the start of each of about sqrt(n) segments; then, last segment first, the
  // segment runs again with autograd from its state (detached, requiring grad), and
  // torch::autograd::backward({its loss, its last state}, {1, the gradient the later segments
  // sent back}) adds its parameters' gradients and gives its first state's.
  static constexpr std::string_view through_time_strategies[] = {"store_all", "segments"};
  bool segments = false;
  void use_through_time(const ThroughTime& t) { segments = t.strategy == "segments"; }

  template <class Model>
  requires RecurrentModel<Model, LibtorchBackendOf>
  double through_time(Model& m) {
    if (!segments) {
      torch::Tensor loss = m.loss(*this, 0);
      leave_autocast();
      loss.backward();
      return loss.item<double>();
    }
    const int64_t n = m.length, length = std::max<int64_t>(1, std::llround(std::sqrt(double(n))));
    std::vector<torch::Tensor> starts;  // the state at the start of each segment
    {
      torch::NoGradGuard no_grad;
      torch::Tensor h = m.initial_state();
      for (int64_t t = 0; t < n; t++) {
        if (t % length == 0) starts.push_back(h);
        h = m.cell(*this, h, t);
      }
    }
    torch::Tensor dlast;  // d loss / d (the last state of the segment being reversed)
    double loss = 0;
    for (int64_t s = int64_t(starts.size()) - 1; s >= 0; s--) {
      torch::Tensor first = starts[size_t(s)].detach().requires_grad_(true), h = first, total;
      for (int64_t t = s * length; t < std::min(n, (s + 1) * length); t++) {
        h = m.cell(*this, h, t);
        torch::Tensor l = m.step_loss(*this, h, t);
        total = total.defined() ? total + l : l;
      }
      leave_autocast();  // each segment's forward under autocast, its backward not
      if (dlast.defined())
        torch::autograd::backward({total, h}, {torch::ones_like(total), dlast});
      else
        total.backward();
      enter_autocast();
      dlast = first.grad();
      loss += total.item<double>();
    }
    leave_autocast();
    return loss;
  }

  void read_grad(const Tensor& p, std::span<R> out) const {
    auto g = p.grad().contiguous();
    std::copy(g.data_ptr<R>(), g.data_ptr<R>() + out.size(), out.begin());
  }
};
using LibtorchBackend = LibtorchBackendOf<float>;
using LibtorchDoubleBackend = LibtorchBackendOf<double>;

}  // namespace bp
