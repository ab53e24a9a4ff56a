// engine/backend.h: our engine as a ScalarBackend and a TensorBackend (workloads/backend.h).
//
// A thin adapter: the scalar tape (double) and the tensor graph (float32) do the work. One
// backend object per benchmark, so each benchmark gets fresh arenas.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <deque>
#include <span>
#include <string_view>
#include <vector>

#include "engine/scalar.h"
#include "engine/tensor.h"
#include "workloads/backend.h"

namespace bp {

// What both of our engine's tensor backends (this one and engine/compiled.h's) keep for a
// workload beside the graph: its token and target indices, and which optimizer it chose.
struct EngineTensorInputs {
  std::deque<std::vector<int32_t>> index_store;  // a deque: spans into it stay valid as it grows
  bool adamw = false;
  AdamWConfig adamw_config;
  double sgd_lr = 0;

  IndexSpan indices(std::span<const int32_t> ids) {
    index_store.emplace_back(ids.begin(), ids.end());
    return IndexSpan{index_store.back().data(), int32_t(ids.size())};
  }
  void use_adamw(const AdamW& c) {
    adamw = true;
    adamw_config = {c.lr, c.beta1, c.beta2, c.eps, c.weight_decay};
  }
  void use_sgd(double lr) { adamw = false, sgd_lr = lr; }
};

struct EngineBackend : EngineTensorInputs {
  static constexpr std::string_view name = "engine";
  static constexpr Implements implements = Implements::both;

  // ---- scalar graphs, double precision ----
  using Scalar = bp::Scalar<double>;
  ScalarTape<double> tape;

  Scalar param(double v) { return tape.param(v); }
  Scalar pow(Scalar x, double k) { return x.pow(k); }
  Scalar relu(Scalar x) { return x.relu(); }
  Scalar tanh(Scalar x) { return x.tanh(); }
  Scalar exp(Scalar x) { return x.exp(); }
  Scalar log(Scalar x) { return x.log(); }
  void backward(Scalar root) { tape.backward(root); }
  double value(Scalar x) const { return x.value(); }
  double grad(Scalar x) const { return x.grad(); }
  void reset() { tape.reset(); }

  // ---- tensors, float32 ----
  using Tensor = bp::Tensor;
  using Indices = IndexSpan;
  TensorGraph<float> graph;

  Tensor param(int32_t rows, int32_t cols, std::span<const float> v) {
    return graph.param(rows, cols, v);
  }
  Tensor constant(int32_t rows, int32_t cols, std::span<const float> v) {
    return graph.constant(rows, cols, v);
  }
  Tensor linear(Tensor x, Tensor w, Tensor b) { return graph.linear(x, w, b); }
  Tensor linear(Tensor x, Tensor w) { return graph.matmul(x, w, true); }
  Tensor linear_relu(Tensor x, Tensor w, Tensor b) { return graph.linear(x, w, b, true); }
  Tensor embedding(Tensor table, Indices idx) { return graph.embedding(table, idx); }
  Tensor view(Tensor x, int32_t rows, int32_t cols) { return graph.view(x, rows, cols); }
  Tensor add(Tensor x, Tensor y) { return graph.add(x, y); }
  Tensor tanh(Tensor x) { return graph.tanh(x); }
  Tensor relu(Tensor x) { return graph.relu(x); }
  Tensor layernorm(Tensor x, Tensor g, Tensor b) { return graph.layernorm(x, g, b); }
  Tensor attention(Tensor qkv, int32_t B, int32_t T, int32_t H) {
    return graph.attention(qkv, B, T, H);
  }
  Tensor cross_entropy(Tensor logits, Indices targets) {
    return graph.cross_entropy(logits, targets);
  }
  void zero_grad() { graph.zero_grad(); }
  void backward(Tensor loss) { graph.backward(loss); }
  void optimizer_step() { adamw ? graph.adamw_step(adamw_config) : graph.sgd_step(sgd_lr); }
  void end_step() { graph.end_step(); }
  double loss_value(Tensor loss) const { return graph.data(loss)[0]; }
  void read_grad(Tensor p, std::span<float> out) const { graph.read_grad(p, out); }

  // Reported as a counter: the peak bytes of every arena this backend used.
  size_t arena_bytes() const { return tape.arena_bytes() + graph.arena_bytes(); }
};

}  // namespace bp
