// engine/compiled_scalar.h: the compiled mode for scalar graphs (one number per value).
//
// The first step's graph is recorded (ops and operands, no arithmetic); at its backward() it
// becomes two flat instruction lists over a values array and a gradients array, indexed by node:
// the forward in creation order, the chain rule in reverse creation order, each instruction a
// call of its op's scalar_forward or scalar_backward (engine/scalar.h, the eager tape's own rules)
// with its operands' slots resolved. Every later step replays it: each op of the workload's code
// only checks that it is the captured op on the captured operands (constants: the same value) and
// moves on; backward() runs the program. Gradients are bitwise the eager tape's (tested): same
// arithmetic, same order, gradients zeroed as the tape zeroes them.
//
// Not here: memory planning (a value and a gradient per node, 16 bytes, as the eager tape holds;
// scalar graphs are small), a graph that changes between steps (refused).
// Tests: engine/compiled_test.cc.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>
#include <vector>

#include "engine/scalar.h"

namespace bp {

class CompiledScalar {
 public:
  // A handle: which recorder, which node, made in which step (as engine/scalar.h's Scalar).
  struct Value {
    CompiledScalar* owner = nullptr;
    uint32_t id = 0;
    uint32_t step = 0;

    CompiledScalar* to(const char* op) const {
      if (!owner) misuse(op, "an operand is an empty Scalar handle (default-constructed)");
      return owner;
    }
    friend Value operator+(Value a, Value b) { return a.to("add")->binary(ScalarOp::add, a, b); }
    friend Value operator-(Value a, Value b) { return a.to("sub")->binary(ScalarOp::sub, a, b); }
    friend Value operator*(Value a, Value b) { return a.to("mul")->binary(ScalarOp::mul, a, b); }
    friend Value operator/(Value a, Value b) { return a.to("div")->binary(ScalarOp::div, a, b); }
    friend Value operator-(Value a) { return a.to("neg")->unary(ScalarOp::neg, a); }
    friend Value operator+(Value a, double c) { return a + a.to("add")->constant(c); }
    friend Value operator+(double c, Value b) { return b.to("add")->constant(c) + b; }
    friend Value operator-(Value a, double c) { return a - a.to("sub")->constant(c); }
    friend Value operator-(double c, Value b) { return b.to("sub")->constant(c) - b; }
    friend Value operator*(Value a, double c) { return a * a.to("mul")->constant(c); }
    friend Value operator*(double c, Value b) { return b.to("mul")->constant(c) * b; }
    friend Value operator/(Value a, double c) { return a / a.to("div")->constant(c); }
    friend Value operator/(double c, Value b) { return b.to("div")->constant(c) / b; }
  };

  CompiledScalar() = default;
  CompiledScalar(const CompiledScalar&) = delete;  // handles point here: it must not move
  CompiledScalar& operator=(const CompiledScalar&) = delete;

  Value param(double v) {
    if (nodes_.size() != num_params_)
      misuse("param", "called after ops of a step; create all parameters before any op");
    nodes_.push_back({ScalarOp::leaf, 0, 0, v});
    num_params_++;
    return {this, uint32_t(nodes_.size() - 1), steps_};
  }
  // A literal of the step (`x * 2.0`): recorded once; a replayed step must give the same value.
  [[gnu::always_inline]] Value constant(double c) {
    return record(ScalarOp::leaf, 0, 0, c, "constant");
  }
  [[gnu::always_inline]] Value binary(ScalarOp op, Value a, Value b) {
    check(a, op), check(b, op);
    return record(op, a.id, b.id, 0, scalar_op_names[int(op)]);
  }
  [[gnu::always_inline]] Value unary(ScalarOp op, Value a) {
    check(a, op);
    return record(op, a.id, 0, 0, scalar_op_names[int(op)]);
  }
  [[gnu::always_inline]] Value pow(Value a, double k) {
    check(a, ScalarOp::pow);
    const Value e = constant(k);
    return record(ScalarOp::pow, a.id, e.id, 0, "pow");
  }

  void backward(Value root) {
    check(root, ScalarOp::count, "backward");
    if (backward_done_)
      misuse("backward",
             "called twice on one graph (every gradient would be added twice); call "
             "reset() between steps");
    if (!compiled()) {
      compile(root.id);
    } else if (root.id != root_ || cursor_ != nodes_.size()) {
      std::fprintf(stderr,
                   "bp::CompiledScalar::backward: from node %u after %u nodes; the captured "
                   "step took it from node %u of %zu\n",
                   root.id, cursor_, root_, nodes_.size());
      std::abort();
    }
    backward_done_ = true;
    double *v = values_.data(), *g = grads_.data();
    for (const Instr& i : forward_) i.run(v, g, i.out, i.a, i.b);
    std::memset(g, 0, grads_.size() * sizeof(double));
    g[root_] += 1.0;
    for (const Instr& i : backward_) i.run(v, g, i.out, i.a, i.b);
  }
  double value(Value x) const {
    check(x, ScalarOp::count, "value");
    return values_.empty() ? nodes_[x.id].constant : values_[x.id];
  }
  double grad(Value x) const {
    check(x, ScalarOp::count, "grad");
    return grads_.empty() ? 0.0 : grads_[x.id];
  }
  void reset() {
    if (!compiled()) nodes_.resize(num_params_);  // a step with no backward: nothing to keep
    cursor_ = uint32_t(num_params_);
    steps_++;
    backward_done_ = false;
  }

  bool compiled() const { return !values_.empty(); }
  size_t arena_bytes() const {
    return nodes_.capacity() * sizeof(Node) + (values_.capacity() + grads_.capacity()) * 8 +
           (forward_.capacity() + backward_.capacity()) * sizeof(Instr);
  }
  std::vector<std::pair<const char*, double>> counters() const {
    return {{"instructions", double(forward_.size() + backward_.size())},
            {"compile_seconds", compile_seconds_}};
  }

 private:
  struct Node {
    ScalarOp op;
    uint32_t lhs, rhs;
    double constant;  // a leaf's value (parameters, literals)
  };
  struct Instr {
    void (*run)(double* v, double* g, uint32_t out, uint32_t a, uint32_t b);
    uint32_t out, a, b;
  };
  template <ScalarOp op>
  static void forward_instr(double* v, double*, uint32_t out, uint32_t a, uint32_t b) {
    v[out] = scalar_forward<op>(v[a], v[b]);
  }
  template <ScalarOp op>
  static void backward_instr(double* v, double* g, uint32_t out, uint32_t a, uint32_t b) {
    scalar_backward<op>(g[out], v[out], v[a], v[b], g[a], g[b]);
  }
  template <ScalarOp... ops>
  static Instr instr_of(ScalarOp op, bool backward, uint32_t out, uint32_t a, uint32_t b) {
    Instr i{nullptr, out, a, b};
    ((op == ops ? (i.run = backward ? backward_instr<ops> : forward_instr<ops>, 0) : 0), ...);
    return i;
  }

  [[noreturn]] static void misuse(const char* op, const char* what) {
    std::fprintf(stderr, "bp::CompiledScalar::%s: %s\n", op, what);
    std::abort();
  }
  [[gnu::always_inline]] void check(Value v, ScalarOp op, const char* name = nullptr) const {
    if (v.owner != this || (v.id >= num_params_ && v.step != steps_)) [[unlikely]]
      misuse(name ? name : scalar_op_names[int(op)],
             !v.owner          ? "an operand is an empty Scalar handle (default-constructed)"
             : v.owner != this ? "an operand belongs to another backend"
                               : "an operand was made before the last reset(); only parameters "
                                 "outlive a step");
  }
  // Capture: append. Replay: the guard (the captured node at this position, same operands).
  [[gnu::always_inline]] Value record(ScalarOp op, uint32_t lhs, uint32_t rhs, double c,
                                      const char* name) {
    if (!compiled()) {
      if (nodes_.size() == num_params_) capture_started_ = std::chrono::steady_clock::now();
      nodes_.push_back({op, lhs, rhs, c});
      return {this, uint32_t(nodes_.size() - 1), steps_};
    }
    const uint32_t id = cursor_;
    if (id >= nodes_.size() || nodes_[id].op != op || nodes_[id].lhs != lhs ||
        nodes_[id].rhs != rhs || (op == ScalarOp::leaf && nodes_[id].constant != c)) [[unlikely]]
      diverged(id, op, lhs, rhs, c, name);
    cursor_++;
    return {this, id, steps_};
  }
  [[noreturn]] [[gnu::cold]] void diverged(uint32_t id, ScalarOp op, uint32_t lhs, uint32_t rhs,
                                           double c, const char* name) const {
    if (id >= nodes_.size())
      std::fprintf(stderr,
                   "bp::CompiledScalar::%s: node %u, but the captured step has %zu nodes: "
                   "a compiled step must repeat the captured one\n",
                   name, id, nodes_.size());
    else if (op == ScalarOp::leaf && nodes_[id].op == ScalarOp::leaf)
      std::fprintf(stderr,
                   "bp::CompiledScalar::%s: node %u is the constant %.17g; the captured step "
                   "had %.17g there: a compiled step must repeat the captured one\n",
                   name, id, c, nodes_[id].constant);
    else
      std::fprintf(stderr,
                   "bp::CompiledScalar::%s: node %u is %s(%u, %u); the captured step has "
                   "%s(%u, %u) there: a compiled step must repeat the captured one\n",
                   name, id, scalar_op_names[int(op)], lhs, rhs,
                   scalar_op_names[int(nodes_[id].op)], nodes_[id].lhs, nodes_[id].rhs);
    std::abort();
  }

  void compile(uint32_t root) {
    root_ = root;
    nodes_.resize(root + 1);                 // nodes after the root change no gradient
    values_.assign(nodes_.size() + 1, 0.0);  // +1: unary ops' unused operand slot 0 exists
    grads_.assign(nodes_.size() + 1, 0.0);
    for (uint32_t i = 0; i <= root; i++) {
      const Node& n = nodes_[i];
      if (n.op == ScalarOp::leaf) {
        values_[i] = n.constant;
        continue;
      }
      forward_.push_back(
          instr_of<ScalarOp::add, ScalarOp::sub, ScalarOp::mul, ScalarOp::div, ScalarOp::neg,
                   ScalarOp::pow, ScalarOp::exp, ScalarOp::log, ScalarOp::tanh, ScalarOp::relu>(
              n.op, false, i, n.lhs, n.rhs));
    }
    for (uint32_t i = root + 1; i-- > num_params_;) {
      const Node& n = nodes_[i];
      if (n.op == ScalarOp::leaf) continue;
      backward_.push_back(
          instr_of<ScalarOp::add, ScalarOp::sub, ScalarOp::mul, ScalarOp::div, ScalarOp::neg,
                   ScalarOp::pow, ScalarOp::exp, ScalarOp::log, ScalarOp::tanh, ScalarOp::relu>(
              n.op, true, i, n.lhs, n.rhs));
    }
    cursor_ = root + 1;
    compile_seconds_ =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - capture_started_).count();
  }

  std::vector<Node> nodes_;  // parameters first, then the captured step
  std::vector<double> values_, grads_;
  std::vector<Instr> forward_, backward_;
  size_t num_params_ = 0;
  uint32_t root_ = 0, cursor_ = 0, steps_ = 0;
  bool backward_done_ = false;
  std::chrono::steady_clock::time_point capture_started_;
  double compile_seconds_ = 0;
};

}  // namespace bp
