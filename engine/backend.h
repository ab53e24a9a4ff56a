// engine/backend.h: our engine as a ScalarBackend and a TensorBackend (workloads/backend.h).
//
// A thin adapter: the scalar tape (double) and the tensor graph (float32) do the work. One
// backend object per benchmark, so each benchmark gets fresh arenas.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <deque>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/checkpoint/checkpoint.h"
#include "engine/core/scalar.h"
#include "engine/core/tensor.h"
#include "workloads/backend.h"

namespace bp {

// What both of our engine's tensor backends (this one and engine/compiled/backend.h's) keep for a
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

// The tensor ops of a TensorBackend on our graph in T, each the graph's own: shared by
// EngineBackend (float) and EngineDoubleBackend (double).
template <class T>
struct EngineTensorOps : EngineTensorInputs {
  using Real = T;
  using Tensor = bp::Tensor;
  using Indices = IndexSpan;
  TensorGraph<T> graph;

  Tensor linear(Tensor x, Tensor w, Tensor b) { return graph.linear(x, w, b); }
  Tensor linear(Tensor x, Tensor w) { return graph.matmul(x, w, true); }
  Tensor linear_relu(Tensor x, Tensor w, Tensor b) { return graph.linear(x, w, b, true); }
  Tensor embedding(Tensor table, Indices idx) { return graph.embedding(table, idx); }
  Tensor view(Tensor x, int32_t rows, int32_t cols) { return graph.view(x, rows, cols); }
  Tensor add(Tensor x, Tensor y) { return graph.add(x, y); }
  Tensor mul(Tensor x, Tensor y) { return graph.mul(x, y); }
  Tensor sub(Tensor x, Tensor y) { return graph.sub(x, y); }
  Tensor div(Tensor x, Tensor y) { return graph.div(x, y); }
  Tensor tanh(Tensor x) { return graph.tanh(x); }
  Tensor relu(Tensor x) { return graph.relu(x); }
  Tensor sigmoid(Tensor x) { return graph.sigmoid(x); }
  Tensor exp(Tensor x) { return graph.exp(x); }
  Tensor log(Tensor x) { return graph.log(x); }
  Tensor sum(Tensor x) { return graph.sum(x); }
  Tensor sum_rows(Tensor x) { return graph.sum_rows(x); }
  Tensor logsumexp(Tensor x) { return graph.logsumexp(x); }
  Tensor layernorm(Tensor x, Tensor g, Tensor b) { return graph.layernorm(x, g, b); }
  Tensor attention(Tensor qkv, int32_t B, int32_t T_, int32_t H) {
    return graph.attention(qkv, B, T_, H);
  }
  Tensor cross_entropy(Tensor logits, Indices targets) {
    return graph.cross_entropy(logits, targets);
  }
  Tensor log_softmax(Tensor x) { return graph.log_softmax(x); }
  Tensor transpose(Tensor x) { return graph.transpose(x); }
  Tensor nll(Tensor logp, Indices targets) { return graph.nll(logp, targets); }
  Tensor param(int32_t rows, int32_t cols, std::span<const T> v) {
    return graph.param(rows, cols, v);
  }
  Tensor constant(int32_t rows, int32_t cols, std::span<const T> v) {
    return graph.constant(rows, cols, v);
  }
  // Data parallel (apps/bench_ranks.cc): after_backward waits for the ranks' sum of the
  // gradients; loss_over_ranks, when set (its check), makes a loss the mean of every rank's.
  // sharded_step, when set (--zero=1), takes the optimizer's step in place of the graph's.
  std::function<void()> after_backward;
  std::function<double(double)> loss_over_ranks;
  std::function<void(const AdamWConfig* adamw, double lr)> sharded_step;
  void backward(Tensor loss) {
    graph.backward(loss);
    if (after_backward) after_backward();
  }
  void read_grad(Tensor p, std::span<T> out) const { graph.read_grad(p, out); }
  void zero_grad() { graph.zero_grad(); }
  void end_step() { graph.end_step(); }
  double loss_value(Tensor loss) const {
    const double mine = graph.data(loss)[0];
    return loss_over_ranks ? loss_over_ranks(mine) : mine;
  }
};

// Our engine's tensor graph in double: GradBench's evals in the precision its own tools compute
// in (bp_gradbench's tensor forms, apps/gradbench_backends.h). Models only; float32 is what the
// bench's model rows run (EngineBackend).
struct EngineDoubleBackend : EngineTensorOps<double> {
  static constexpr std::string_view name = "engine_double";
  static constexpr Implements implements = Implements::models;
  void optimizer_step() { adamw ? graph.adamw_step(adamw_config) : graph.sgd_step(sgd_lr); }
  size_t arena_bytes() const { return graph.arena_bytes(); }
};

struct EngineBackend : EngineTensorOps<float> {
  static constexpr std::string_view name = "engine";
  static constexpr Implements implements = Implements::both;

  // ---- scalar graphs, double precision ----
  using Scalar = bp::Scalar<double>;
  ScalarTape<double> tape;

  // Inlined into the workload's step as the tape's operators are (dev/notes.md, "Inlined ops").
  Scalar param(double v) { return tape.param(v); }
  [[gnu::always_inline]] Scalar pow(Scalar x, double k) { return x.pow(k); }
  [[gnu::always_inline]] Scalar relu(Scalar x) { return x.relu(); }
  [[gnu::always_inline]] Scalar tanh(Scalar x) { return x.tanh(); }
  [[gnu::always_inline]] Scalar exp(Scalar x) { return x.exp(); }
  [[gnu::always_inline]] Scalar log(Scalar x) { return x.log(); }
  void backward(Scalar root) { tape.backward(root); }
  double value(Scalar x) const { return x.value(); }
  double grad(Scalar x) const { return x.grad(); }
  void reset() { tape.reset(); }

  // ---- tensors, float32: the ops are EngineTensorOps<float>'s ----
  using EngineTensorOps<float>::tanh, EngineTensorOps<float>::relu, EngineTensorOps<float>::exp,
      EngineTensorOps<float>::log, EngineTensorOps<float>::param, EngineTensorOps<float>::backward;
  // stream_instead: the `bound` variant (bench_engine --optimizer=stream) moves an AdamW step's
  // bytes without its arithmetic, the memory-bandwidth bound of workloads/optimizer.h's update.
  bool stream_instead = false;
  void optimizer_step() {
    if (stream_instead) return graph.stream_adamw_bytes();
    if (sharded_step) return sharded_step(adamw ? &adamw_config : nullptr, sgd_lr);
    adamw ? graph.adamw_step(adamw_config) : graph.sgd_step(sgd_lr);
  }
  int64_t skipped_steps() const { return graph.skipped_steps(); }  // a NaN or Inf gradient

  // ---- recurrent models: the way back through time (engine/checkpoint/checkpoint.h) ----
  // store_all reverses the unrolled sequence with the graph's backward; revolve and multistage
  // run the model's cell one step at a time on the graph (EngineChain), from states they keep.
  std::optional<BpttRunner> bptt;  // null: store_all
  static constexpr std::string_view through_time_strategies[] = {"store_all", "revolve",
                                                                 "multistage"};
  void use_through_time(const ThroughTime& t) {
    bptt.reset();
    if (t.strategy == "revolve" || t.strategy == "multistage")
      bptt.emplace(BpttConfig{t.strategy == "revolve" ? Bptt::revolve : Bptt::multistage,
                              t.snapshots, t.interval, t.directory});
  }

  template <class Model>
  requires RecurrentModel<Model, EngineBackend>
  double through_time(Model& model) {
    if (!bptt || bptt->config().strategy == Bptt::store_all) {
      Tensor loss = model.loss(*this, 0);
      backward(loss);
      return loss_value(loss);
    }
    EngineChain<Model> chain{*this, model};
    return bptt->run(chain, model.length);
  }

  // Reported as a counter: the peak bytes of every arena this backend used.
  size_t arena_bytes() const { return tape.arena_bytes() + graph.arena_bytes(); }

  // The last sequence's counters of a checkpointing strategy (none for the others).
  std::vector<std::pair<std::string, double>> extra_counters() const {
    if (!bptt || bptt->config().strategy == Bptt::store_all) return {};
    const BpttStats& s = bptt->stats();
    std::vector<std::pair<std::string, double>> out = {
        {"snapshots", double(bptt->config().snapshots)},
        {"most_snapshots_alive", double(s.most_snapshots)},
        {"advanced_steps", double(s.advanced)},
        {"advanced_per_step", double(s.advanced) / double(s.steps)},
        {"advance_seconds", s.advance_seconds},
        // the recomputation as measured: seconds spent advancing over one plain forward sweep's
        // (against advanced_per_step, the count; Revolve's prediction is t(n, c) / n)
        {"measured_advance_ratio", s.advance_seconds / s.sweep_seconds},
        {"reverse_seconds", s.reverse_seconds},
    };
    if (bptt->config().strategy == Bptt::revolve)
      out.push_back(
          {"predicted_advanced_per_step",
           double(revolve::forward_steps(s.steps, bptt->config().snapshots)) / double(s.steps)});
    if (bptt->config().strategy == Bptt::multistage) {
      out.push_back({"interval", double(s.interval)});
      out.push_back({"interval_given", bptt->config().interval > 0 ? 1.0 : 0.0});
      out.push_back({"records", double(s.records)});
      out.push_back({"bytes_written", double(s.bytes_written)});
      out.push_back({"bytes_read", double(s.bytes_read)});
      out.push_back({"write_wait_seconds", s.write_wait_seconds});
      out.push_back({"read_wait_seconds", s.read_wait_seconds});
      out.push_back({"write_seconds_measured", s.write_seconds});
      out.push_back({"step_seconds_measured", s.step_seconds});
      out.push_back({"o_direct", std::string(bptt->io_mode()) == "O_DIRECT" ? 1.0 : 0.0});
    }
    return out;
  }

 private:
  // A recurrent model's step on the graph, one step at a time (engine/checkpoint/checkpoint.h's
  // chain). advance: the cell from a constant input, its output copied out, the step's nodes
  // dropped. reverse: the cell from a state leaf, the step's loss, their gradients seeded (1 and
  // the carried dstate), backward over the step's nodes, the state leaf's gradient copied out.
  template <class Model>
  struct EngineChain {
    EngineBackend& be;
    Model& model;
    TensorGraph<float>& g = be.graph;
    size_t state_size() const { return size_t(Model::batch) * Model::hidden; }
    void initial_state(float* h) const {
      const float* h0 = g.data(model.initial_state());
      std::copy(h0, h0 + state_size(), h);
    }
    void advance(int64_t t, const float* h, float* next) {
      const auto mark = g.mark();
      const Tensor x = g.input(Model::batch, Model::hidden, {h, state_size()});
      const float* y = g.data(model.cell(be, x, t));
      std::copy(y, y + state_size(), next);
      g.rewind(mark);
    }
    double reverse(int64_t t, const float* h, float* dstate) {
      const auto mark = g.mark();
      const Tensor x = g.state(Model::batch, Model::hidden, {h, state_size()});
      const Tensor y = model.cell(be, x, t);
      const Tensor loss = model.step_loss(be, y, t);
      static constexpr float one = 1;
      g.seed_grad(loss, {&one, 1});
      g.seed_grad(y, {dstate, state_size()});
      g.backward_since(mark);
      const float* dx = g.grad(x);
      std::copy(dx, dx + state_size(), dstate);
      const double value = g.data(loss)[0];
      g.rewind(mark);
      return value;
    }
  };
};

}  // namespace bp
