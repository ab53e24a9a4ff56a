// engine/compiled_scalar.h: the compiled mode for scalar graphs (one number per value).
//
// The first step's graph is recorded (ops and operands, no arithmetic); at its backward() it
// becomes one threaded program over a values array and a gradients array, indexed by node: the
// forward in creation order, the gradients zeroed and seeded, the chain rule in reverse creation
// order. Each instruction holds the address of its handler, which runs its op's scalar_forward or
// scalar_backward (engine/scalar.h, the eager tape's own rules) on its operands' slots and jumps
// straight to the next instruction's handler: no call, no switch, no node to build. Gradients
// are bitwise the eager tape's (tested): same arithmetic, same order, zeroed as the tape zeroes.
//
// Two ways to run a later step:
//  - replay(): the step alone. A scalar graph has no input that changes between steps (its
//    parameters and literals are fixed at setup), so after the captured step the program is the
//    whole step: run it, then hand out the gradients and the value the captured step read after
//    its backward (finish_step's reads, workloads/backend.h), in the same order. This is what the
//    benchmark times and what the harness's check runs.
//  - the workload's code again: each op only checks that it is the captured op on the captured
//    operands (literals: the same value), and backward() runs the program. A step that differs
//    is refused with one line.
//
// Not here: memory planning (a value and a gradient per node, 16 bytes, as the eager tape holds;
// scalar graphs are small).
// Tests: engine/compiled_test.cc.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
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
    execute(code_.data(), values_.data(), grads_.data());
  }
  // The step without the workload's code (see the top of this file); grads as finish_step's.
  bool can_replay() const { return replay_ready_; }
  double replay(std::span<double> grads) {
    if (grads.size() != grad_reads_.size())
      misuse("replay", "the captured step read a different number of gradients");
    execute(code_.data(), values_.data(), grads_.data());
    for (size_t i = 0; i < grads.size(); i++) grads[i] = grads_[grad_reads_[i]];
    return values_[value_read_];
  }
  double value(Value x) {
    check(x, ScalarOp::count, "value");
    if (capturing_reads()) value_read_ = x.id;
    return values_.empty() ? nodes_[x.id].constant : values_[x.id];
  }
  double grad(Value x) {
    check(x, ScalarOp::count, "grad");
    if (capturing_reads()) grad_reads_.push_back(x.id);
    return grads_.empty() ? 0.0 : grads_[x.id];
  }
  void reset() {
    if (!compiled()) nodes_.resize(num_params_);  // a step with no backward: nothing to keep
    if (capturing_reads()) replay_ready_ = value_read_ != kNone;
    cursor_ = uint32_t(num_params_);
    steps_++;
    backward_done_ = false;
  }

  bool compiled() const { return !values_.empty(); }
  size_t arena_bytes() const {
    return nodes_.capacity() * sizeof(Node) + (values_.capacity() + grads_.capacity()) * 8 +
           code_.capacity() * sizeof(Instr);
  }
  std::vector<std::pair<const char*, double>> counters() const {
    return {{"instructions", double(code_.size())}, {"compile_seconds", compile_seconds_}};
  }

 private:
  struct Node {
    ScalarOp op;
    uint32_t lhs, rhs;
    double constant;  // a leaf's value (parameters, literals)
  };
  struct Instr {
    const void* handler;  // a label inside execute()
    uint32_t out, a, b;
  };
  // The handlers, in one function so that each ends in its own indirect jump to the next
  // instruction's (threaded code: each jump site learns its own successors, where a switch or a
  // loop of calls shares one). Called with null code, returns its table: forward handlers in
  // ScalarOp order, then backward ones, then `start_backward` and `stop`.
  enum : int {
    kBackwardHandlers = int(ScalarOp::count),
    kStartBackward = 2 * int(ScalarOp::count),
    kStop,
    kHandlers
  };
  static const void* const* execute(const Instr* ip, double* v, double* g) {
#define BP_FORWARD(op) &&forward_##op
#define BP_BACKWARD(op) &&backward_##op
    static const void* const table[kHandlers] = {
        nullptr,           BP_FORWARD(add),   BP_FORWARD(sub),  BP_FORWARD(mul),
        BP_FORWARD(div),   BP_FORWARD(neg),   BP_FORWARD(pow),  BP_FORWARD(exp),
        BP_FORWARD(log),   BP_FORWARD(tanh),  BP_FORWARD(relu), nullptr,
        BP_BACKWARD(add),  BP_BACKWARD(sub),  BP_BACKWARD(mul), BP_BACKWARD(div),
        BP_BACKWARD(neg),  BP_BACKWARD(pow),  BP_BACKWARD(exp), BP_BACKWARD(log),
        BP_BACKWARD(tanh), BP_BACKWARD(relu), &&start_backward, &&stop};
#undef BP_FORWARD
#undef BP_BACKWARD
    if (!ip) return table;
    goto * ip->handler;
#define BP_HANDLERS(op)                                                                     \
  forward_##op : v[ip->out] = scalar_forward<ScalarOp::op>(v[ip->a], v[ip->b]);             \
  ip++;                                                                                     \
  goto * ip->handler;                                                                       \
  backward_##op : scalar_backward<ScalarOp::op>(g[ip->out], v[ip->out], v[ip->a], v[ip->b], \
                                                g[ip->a], g[ip->b]);                        \
  ip++;                                                                                     \
  goto * ip->handler;
    BP_HANDLERS(add)
    BP_HANDLERS(sub)
    BP_HANDLERS(mul)
    BP_HANDLERS(div)
    BP_HANDLERS(neg)
    BP_HANDLERS(pow)
    BP_HANDLERS(exp)
    BP_HANDLERS(log)
    BP_HANDLERS(tanh)
    BP_HANDLERS(relu)
#undef BP_HANDLERS
  start_backward:  // every gradient zeroed, as the tape zeroes its nodes; then d(root)/d(root)
    std::memset(g, 0, size_t(ip->a) * sizeof(double));
    g[ip->out] += 1.0;
    ip++;
    goto * ip->handler;
  stop:
    return nullptr;
  }
  static Instr instr(int handler, uint32_t out, uint32_t a, uint32_t b) {
    return {execute(nullptr, nullptr, nullptr)[handler], out, a, b};
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
    nodes_.resize(root + 1);  // nodes after the root change no gradient
    values_.assign(nodes_.size(), 0.0);
    grads_.assign(nodes_.size(), 0.0);
    // Sized once: grown by doubling, the program was copied about twice over into fresh pages,
    // and a page fault costs microseconds on these VMs (time to first step, README).
    const size_t ops = size_t(std::count_if(nodes_.begin() + num_params_, nodes_.end(),
                                            [](const Node& n) { return n.op != ScalarOp::leaf; }));
    code_.reserve(2 * ops + 2);
    for (uint32_t i = 0; i <= root; i++) {
      const Node& n = nodes_[i];
      if (n.op == ScalarOp::leaf)
        values_[i] = n.constant;
      else
        code_.push_back(instr(int(n.op), i, n.lhs, n.rhs));
    }
    code_.push_back(instr(kStartBackward, root, uint32_t(grads_.size()), 0));
    for (uint32_t i = root + 1; i-- > num_params_;)
      if (nodes_[i].op != ScalarOp::leaf)
        code_.push_back(
            instr(kBackwardHandlers + int(nodes_[i].op), i, nodes_[i].lhs, nodes_[i].rhs));
    code_.push_back(instr(kStop, 0, 0, 0));
    cursor_ = root + 1;
    captured_step_ = steps_;
    compile_seconds_ =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - capture_started_).count();
  }
  // The captured step's reads after its backward, which replay() repeats.
  bool capturing_reads() const { return compiled() && steps_ == captured_step_; }

  static constexpr uint32_t kNone = ~0u;
  std::vector<Node> nodes_;             // parameters first, then the captured step
  std::vector<double> values_, grads_;  // (nodes up to the root), by node index
  std::vector<Instr> code_;             // forward, start_backward, backward, stop
  std::vector<uint32_t> grad_reads_;    // the captured step's reads after its backward
  uint32_t value_read_ = kNone;
  bool replay_ready_ = false;
  size_t num_params_ = 0;
  uint32_t root_ = 0, cursor_ = 0, steps_ = 0, captured_step_ = 0;
  bool backward_done_ = false;
  std::chrono::steady_clock::time_point capture_started_;
  double compile_seconds_ = 0;
};

}  // namespace bp
