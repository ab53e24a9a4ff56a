// engine/compiled/compiled_scalar.h: the compiled mode for scalar graphs (one number per value).
//
// The first step's graph is recorded (ops and operands, no arithmetic); at its backward() it
// becomes one program over a values array and a gradients array, indexed by node: the forward in
// creation order, the gradients zeroed and seeded, the chain rule in reverse creation order,
// leaving out the gradients no parameter needs (a literal's: `x * 2.0` updates x's gradient
// only). Its first run is threaded code: each instruction holds the address of its handler,
// which runs its op's scalar_forward or scalar_backward on its operands' slots and jumps straight
// to the next instruction's handler. From its second run on, where the machine has AVX and FMA
// and the step is at most kJitMaxInstructions long, it runs as x86-64 code generated for it
// (engine/compiled/scalar_jit.h: straight-line, values kept in registers). Both run the rules of
// engine/core/scalar.h, the eager tape's own, operation for operation: gradients are bitwise the
// eager tape's (tested, each executor), and zeroed as the tape zeroes them.
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
// Tests: engine/compiled/compiled_test.cc.
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

#include "engine/compiled/scalar_jit.h"
#include "engine/core/scalar.h"

namespace bp {

class CompiledScalar {
 public:
  // A handle: which recorder, which node, made in which step (as engine/core/scalar.h's Scalar).
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
    nodes_.push_back({ScalarOp::leaf, uint32_t(constants_.size()), 0});
    constants_.push_back(v);
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
    run();
  }
  // The step without the workload's code (see the top of this file); grads as finish_step's.
  bool can_replay() const { return replay_ready_; }
  double replay(std::span<double> grads) {
    if (grads.size() != grad_reads_.size())
      misuse("replay", "the captured step read a different number of gradients");
    run();
    for (size_t i = 0; i < grads.size(); i++) grads[i] = grads_[grad_reads_[i]];
    return values_[value_read_];
  }
  // Before the first backward, the value is computed here as the eager tape would have it.
  double value(Value x) {
    check(x, ScalarOp::count, "value");
    if (!compiled()) return value_before_compiling(x.id);
    if (x.id >= needs_grad_.size()) [[unlikely]]
      cut_off("value", x.id);
    if (capturing_reads()) value_read_ = x.id;
    return values_[x.id];
  }
  double grad(Value x) {
    check(x, ScalarOp::count, "grad");
    if (compiled() && x.id >= needs_grad_.size()) [[unlikely]]
      cut_off("grad", x.id);
    if (compiled() && !needs_grad_[x.id]) [[unlikely]]
      no_gradient(x.id);
    if (capturing_reads()) grad_reads_.push_back(x.id);
    return compiled() ? grads_[x.id] : 0.0;  // before the first backward, no gradient yet
  }
  void reset() {
    if (!compiled())  // nothing to keep but the parameters, the first constants
      nodes_.resize(num_params_), constants_.resize(num_params_), eager_values_.clear();
    if (capturing_reads()) replay_ready_ = value_read_ != kNone;
    cursor_ = uint32_t(num_params_);
    steps_++;
    backward_done_ = false;
  }

  bool compiled() const { return !values_.empty(); }
  size_t arena_bytes() const {
    return nodes_.capacity() * sizeof(Node) +
           (constants_.capacity() + values_.capacity() + grads_.capacity()) * 8 +
           code_.capacity() * sizeof(Instr) + jit_.code_bytes();
  }
  std::vector<std::pair<const char*, double>> counters() const {
    return {{"instructions", double(instructions_)},
            {"generated_code_bytes", double(jit_.code_bytes())},
            {"jit_seconds", jit_seconds_},
            {"compile_seconds", compile_seconds_}};
  }

 private:
  // 12 bytes a node and 16 an instruction (about two a node): with a value and a gradient some
  // 60 bytes a node, against the eager tape's 32 (dev/notes.md, "The compiled scalar program in
  // less memory").
  struct Node {
    ScalarOp op;
    uint32_t lhs, rhs;  // a leaf's lhs: its value's index in constants_ until compiled
  };
  struct Instr {
    int32_t handler;  // a label inside execute(), as its distance from `stop`
    uint32_t out, a, b;
  };
  static_assert(sizeof(Node) == 12 && sizeof(Instr) == 16);
  // The handlers, in one function so that each ends in its own indirect jump to the next
  // instruction's (threaded code: each jump site learns its own successors, where a switch or a
  // loop of calls shares one). Called with null code, returns its table: forward handlers in
  // ScalarOp order, then backward ones updating both operands' gradients, then the left's only,
  // then the right's only, then `start_backward` and `stop`.
  static constexpr int kOps = int(ScalarOp::count);
  enum : int {
    kBackwardHandlers = kOps,
    kLhsHandlers = 2 * kOps,
    kRhsHandlers = 3 * kOps,
    kStartBackward = 4 * kOps,
    kStop,
    kHandlers
  };
  static const int32_t* execute(const Instr* ip, double* v, double* g) {
#define BP_AT(label) int32_t(static_cast<char*>(&&label) - static_cast<char*>(&&stop))
#define BP_ROW(prefix)                                                                \
  0, BP_AT(prefix##add), BP_AT(prefix##sub), BP_AT(prefix##mul), BP_AT(prefix##div),  \
      BP_AT(prefix##neg), BP_AT(prefix##pow), BP_AT(prefix##exp), BP_AT(prefix##log), \
      BP_AT(prefix##tanh), BP_AT(prefix##relu)
    static const int32_t table[kHandlers] = {BP_ROW(forward_),      BP_ROW(backward_),
                                             BP_ROW(backward_lhs_), BP_ROW(backward_rhs_),
                                             BP_AT(start_backward), BP_AT(stop)};
#undef BP_ROW
#undef BP_AT
    if (!ip) return table;
    goto*(static_cast<char*>(&&stop) + ip->handler);
#define BP_BACKWARD(label, op, which)                                                      \
  label:                                                                                   \
  scalar_backward<ScalarOp::op, double, which>(g[ip->out], v[ip->out], v[ip->a], v[ip->b], \
                                               g[ip->a], g[ip->b]);                        \
  ip++;                                                                                    \
  goto*(static_cast<char*>(&&stop) + ip->handler);
#define BP_HANDLERS(op)                                                         \
  forward_##op : v[ip->out] = scalar_forward<ScalarOp::op>(v[ip->a], v[ip->b]); \
  ip++;                                                                         \
  goto*(static_cast<char*>(&&stop) + ip->handler);                              \
  BP_BACKWARD(backward_##op, op, ScalarGrads::both)                             \
  BP_BACKWARD(backward_lhs_##op, op, ScalarGrads::lhs)                          \
  BP_BACKWARD(backward_rhs_##op, op, ScalarGrads::rhs)
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
#undef BP_BACKWARD
  start_backward:  // every gradient zeroed, as the tape zeroes its nodes; then d(root)/d(root)
    std::memset(g, 0, size_t(ip->a) * sizeof(double));
    g[ip->out] += 1.0;
    ip++;
    goto*(static_cast<char*>(&&stop) + ip->handler);
  stop:
    return nullptr;
  }
  static Instr instr(int handler, uint32_t out, uint32_t a, uint32_t b) {
    return {execute(nullptr, nullptr, nullptr)[handler], out, a, b};
  }
  // The step on this machine. Tiered, as JIT compilers are: the captured step runs threaded code,
  // so that the time to a first step carries no code generation; the second run generates the
  // code (jit_seconds), which runs from then on where it could be built.
  void run() {
    if (jit_.built()) {
      jit_.run(values_.data(), grads_.data());
      return;
    }
    if (runs_++ == 1 && kScalarJitBuilt && instructions_ <= kJitMaxInstructions) {
      const auto started = std::chrono::steady_clock::now();
      std::vector<ScalarJitInstr> program;
      program.reserve(instructions_);
      for_each_instruction([&](const ScalarJitInstr& in) { program.push_back(in); });
      if (jit_.build(program, uint32_t(nodes_.size()))) {
        jit_seconds_ =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
        std::vector<Instr>().swap(code_);
        jit_.run(values_.data(), grads_.data());
        return;
      }
    }
    execute(code_.data(), values_.data(), grads_.data());
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
      if (op == ScalarOp::leaf) lhs = uint32_t(constants_.size()), constants_.push_back(c);
      nodes_.push_back({op, lhs, rhs});
      return {this, uint32_t(nodes_.size() - 1), steps_};
    }
    const uint32_t id = cursor_;
    if (id >= nodes_.size() || nodes_[id].op != op ||
        (op == ScalarOp::leaf ? values_[id] != c : nodes_[id].lhs != lhs || nodes_[id].rhs != rhs))
        [[unlikely]]
      diverged(id, op, lhs, rhs, c, name);
    cursor_++;
    return {this, id, steps_};
  }
  [[noreturn]] [[gnu::cold]] void cut_off(const char* what, uint32_t id) const {
    std::fprintf(stderr,
                 "bp::CompiledScalar::%s: node %u was made after node %u, which the captured "
                 "step's backward() was taken from: the compiled step does not compute it\n",
                 what, id, root_);
    std::abort();
  }
  // The captured step's values as the eager tape computes them, up to `id` (amortized: each
  // node once per capture).
  double value_before_compiling(uint32_t id) {
    for (size_t i = eager_values_.size(); i <= id; i++) {
      const Node& x = nodes_[i];
      eager_values_.push_back(
          x.op == ScalarOp::leaf
              ? constants_[x.lhs]  // pow's exponent is a leaf
              : scalar_forward_of(x.op, eager_values_[x.lhs], eager_values_[x.rhs]));
    }
    return eager_values_[id];
  }
  [[noreturn]] [[gnu::cold]] void no_gradient(uint32_t id) const {
    std::fprintf(stderr,
                 "bp::CompiledScalar::grad: node %u depends on no parameter (a literal, or an op "
                 "on literals only): the compiled step computes no gradient for it\n",
                 id);
    std::abort();
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
                   name, id, c, values_[id]);
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
    // Nodes after the root change no gradient; every parameter keeps its slot (the root may be
    // one of them).
    nodes_.resize(std::max<size_t>(root + 1, num_params_));
    std::vector<double>().swap(eager_values_);
    const uint32_t n = uint32_t(nodes_.size());
    // After the nodes, the generated code's constants (engine/compiled/scalar_jit.h).
    values_.assign(n + kJitConstants, 0.0);
    values_[n] = 1.0, values_[n + 1] = -0.0;
    grads_.assign(n, 0.0);
    // A node needs a gradient when a parameter reaches it: a literal's, and that of an op on
    // literals only, would be computed and never read (a constant has none, as in PyTorch).
    needs_grad_.assign(n, false);
    for (uint32_t i = 0; i < n; i++) {
      const Node& x = nodes_[i];
      needs_grad_[i] =
          i < num_params_ ||
          (x.op != ScalarOp::leaf && (needs_grad_[x.lhs] || (binary(x.op) && needs_grad_[x.rhs])));
    }
    // A leaf's value moves into its slot, which the program never writes: the guard reads it
    // there from now on.
    for (uint32_t i = 0; i < n; i++)
      if (nodes_[i].op == ScalarOp::leaf) values_[i] = constants_[nodes_[i].lhs];
    std::vector<double>().swap(constants_);
    // Threaded code, run first and wherever generated code does not (engine/compiled/scalar_jit.h);
    // sized once (grown by doubling it was copied into fresh pages, at microseconds a page fault
    // here).
    instructions_ = 0;
    for_each_instruction([&](const ScalarJitInstr&) { instructions_++; });
    code_.reserve(instructions_ + 1);
    for_each_instruction([&](const ScalarJitInstr& in) {
      const int row = in.kind == ScalarJitInstr::forward          ? 0
                      : in.kind == ScalarJitInstr::start_backward ? kStartBackward
                      : in.grads == ScalarGrads::both             ? kBackwardHandlers
                      : in.grads == ScalarGrads::lhs              ? kLhsHandlers
                                                                  : kRhsHandlers;
      code_.push_back(in.kind == ScalarJitInstr::start_backward
                          ? instr(kStartBackward, in.out, in.a, 0)
                          : instr(row + int(in.op), in.out, in.a, in.b));
    });
    code_.push_back(instr(kStop, 0, 0, 0));
    cursor_ = n;
    captured_step_ = steps_;
    compile_seconds_ =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - capture_started_).count();
  }
  // The step, instruction by instruction: the forward in creation order, start_backward, the
  // chain rule in reverse creation order, each backward updating only the gradients that a
  // parameter needs (needs_grad_).
  template <class F>
  void for_each_instruction(F&& emit) const {
    const uint32_t n = uint32_t(nodes_.size());
    for (uint32_t i = 0; i < n; i++) {
      const Node& x = nodes_[i];
      if (x.op != ScalarOp::leaf)
        emit(ScalarJitInstr{ScalarJitInstr::forward, x.op, ScalarGrads::both, i, x.lhs, x.rhs,
                            values_[x.rhs]});
    }
    emit(ScalarJitInstr{ScalarJitInstr::start_backward, ScalarOp::count, ScalarGrads::both, root_,
                        n, 0, 0});
    for (uint32_t i = n; i-- > num_params_;) {
      const Node& x = nodes_[i];
      if (x.op == ScalarOp::leaf || !needs_grad_[i]) continue;
      const bool to_x = needs_grad_[x.lhs], to_y = binary(x.op) && needs_grad_[x.rhs];
      emit(ScalarJitInstr{ScalarJitInstr::backward, x.op,
                          to_x && to_y ? ScalarGrads::both
                          : to_x       ? ScalarGrads::lhs
                                       : ScalarGrads::rhs,
                          i, x.lhs, x.rhs, values_[x.rhs]});
    }
  }
  static bool binary(ScalarOp op) {
    return op == ScalarOp::add || op == ScalarOp::sub || op == ScalarOp::mul || op == ScalarOp::div;
  }
  // The captured step's reads after its backward, which replay() repeats.
  bool capturing_reads() const { return compiled() && steps_ == captured_step_; }

  static constexpr uint32_t kNone = ~0u;
  std::vector<Node> nodes_;             // parameters first, then the captured step
  std::vector<double> constants_;       // the leaves' values while capturing
  std::vector<double> values_, grads_;  // (nodes up to the root), by node index
  std::vector<Instr> code_;             // threaded: forward, start_backward, backward, stop
  ScalarJit jit_;                       // the generated code, from the second run on
  std::vector<bool> needs_grad_;        // by node: a parameter reaches it
  std::vector<double> eager_values_;    // value() before the first backward, by node
  size_t instructions_ = 0;
  uint32_t runs_ = 0;
  double jit_seconds_ = 0;
  std::vector<uint32_t> grad_reads_;  // the captured step's reads after its backward
  uint32_t value_read_ = kNone;
  bool replay_ready_ = false;
  size_t num_params_ = 0;
  uint32_t root_ = 0, cursor_ = 0, steps_ = 0, captured_step_ = 0;
  bool backward_done_ = false;
  std::chrono::steady_clock::time_point capture_started_;
  double compile_seconds_ = 0;
};

}  // namespace bp
