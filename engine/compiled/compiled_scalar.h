// engine/compiled/compiled_scalar.h: the compiled mode for scalar graphs (one number per value).
//
// The first step's graph is recorded (ops and operands, no arithmetic); at its backward() it
// becomes one program over a values array and a gradients array, indexed by node: the forward in
// creation order, the gradients zeroed and seeded, the chain rule in reverse creation order,
// leaving out the gradients no parameter needs (a literal has none: `x * 2.0` updates x's
// gradient only). The recorded ops are the program: its threaded code walks them up for the
// forward and down for the backward, each instruction naming its handler, which runs its op's
// scalar_forward or scalar_backward on its operands' slots and jumps straight to the next
// instruction's handler. From its second run on, where the machine has AVX and FMA, the step is
// at most kJitMaxInstructions long and its code keeps the program within the eager tape's memory,
// it runs as x86-64 code generated for it (engine/compiled/scalar_jit.h: straight-line, values
// kept in registers). Both run the rules of engine/core/scalar.h, the eager tape's own, operation
// for operation: gradients are bitwise the eager tape's (tested, each executor), and zeroed as
// the tape zeroes them.
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
// Not here: memory planning (a value and a gradient per node and an instruction per op, in
// arrays that grow as the tape does; nothing to plan).
// Tests: engine/compiled/compiled_test.cc.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "engine/compiled/scalar_jit.h"
#include "engine/core/scalar.h"
#include "engine/runtime/arena.h"

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

  CompiledScalar() { code_.push_back({0, kStop, 0, 0, 0}); }
  CompiledScalar(const CompiledScalar&) = delete;  // handles point here: it must not move
  CompiledScalar& operator=(const CompiledScalar&) = delete;

  Value param(double v) {
    if (compiled() || values_.size() != num_params_)
      misuse("param", "called after ops of a step; create all parameters before any op");
    values_.push_back(v);
    num_params_++;
    return {this, uint32_t(values_.size() - 1), steps_};
  }
  // A literal of the step (`x * 2.0`): recorded once; a replayed step must give the same value.
  [[gnu::always_inline]] Value constant(double c) {
    if (!compiled()) {
      literals_.push_back(c);
      return {this, kLiteral | uint32_t(literals_.size() - 1), steps_};
    }
    const uint32_t k = literal_cursor_++;
    if (k >= num_literals_ || values_[num_nodes_ + k] != c) [[unlikely]]
      another_literal(k, c);
    return {this, kLiteral | k, steps_};
  }
  [[gnu::always_inline]] Value binary(ScalarOp op, Value a, Value b) {
    check(a, op), check(b, op);
    return record(op, a.id, b.id, scalar_op_names[int(op)]);
  }
  [[gnu::always_inline]] Value unary(ScalarOp op, Value a) {
    check(a, op);
    return record(op, a.id, 0, scalar_op_names[int(op)]);
  }
  [[gnu::always_inline]] Value pow(Value a, double k) {
    check(a, ScalarOp::pow);
    const Value e = constant(k);
    return record(ScalarOp::pow, a.id, e.id, "pow");
  }

  void backward(Value root) {
    check(root, ScalarOp::count, "backward");
    if (root.id & kLiteral)
      misuse("backward", "from a literal, which no parameter reaches: every gradient is zero");
    if (backward_done_)
      misuse("backward",
             "called twice on one graph (every gradient would be added twice); call "
             "reset() between steps");
    if (!compiled()) {
      compile(root.id);
    } else if (root.id != root_ || cursor_ != num_nodes_) {
      std::fprintf(stderr,
                   "bp::CompiledScalar::backward: from node %u after %u nodes; the captured "
                   "step took it from node %u of %u\n",
                   root.id, cursor_, root_, num_nodes_);
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
    if (x.id >= num_nodes_ && !(x.id & kLiteral)) [[unlikely]]
      cut_off("value", x.id);
    const uint32_t slot = slot_of(x.id);
    if (capturing_reads()) value_read_ = slot;
    return values_[slot];
  }
  double grad(Value x) {
    check(x, ScalarOp::count, "grad");
    if (x.id & kLiteral) [[unlikely]]
      no_gradient(x.id);
    if (compiled() && x.id >= num_nodes_) [[unlikely]]
      cut_off("grad", x.id);
    if (compiled() && !needs_grad_[x.id]) [[unlikely]]
      no_gradient(x.id);
    if (capturing_reads()) grad_reads_.push_back(x.id);
    return compiled() ? grads_[x.id] : 0.0;  // before the first backward, no gradient yet
  }
  void reset() {
    if (!compiled())  // nothing to keep but the parameters
      values_.resize(num_params_), literals_.resize(0), code_.resize(1),
          computed_ = uint32_t(num_params_);
    if (capturing_reads()) replay_ready_ = value_read_ != kNone;
    cursor_ = uint32_t(num_params_), literal_cursor_ = 0;
    steps_++;
    backward_done_ = false;
  }

  bool compiled() const { return num_nodes_ != 0; }
  // What the compiled step holds, element by element (arena_bytes counts capacities), and what
  // the eager tape holds for the same graph (its nodes up to the root, parameters and literals).
  size_t held_bytes() const {
    return (values_.size() + grads_.size()) * 8 + code_.size() * sizeof(Instr) +
           needs_grad_.size() / 8 + jit_.code_bytes();
  }
  size_t eager_tape_bytes() const {
    return size_t(num_nodes_ + num_literals_) * sizeof(ScalarNode<double>);
  }
  static constexpr size_t kJitSlack = size_t(64) << 10;  // see run()
  size_t arena_bytes() const {
    return (values_.capacity() + literals_.capacity() + grads_.capacity()) * 8 +
           code_.capacity() * sizeof(Instr) + needs_grad_.capacity() / 8 + jit_.code_bytes();
  }
  std::vector<std::pair<const char*, double>> counters() const {
    return {{"instructions", double(instructions_)},
            {"generated_code_bytes", double(jit_.code_bytes())},
            {"jit_seconds", jit_seconds_},
            {"compile_seconds", compile_seconds_}};
  }
  // Generated code only while the whole program stays within the eager tape's memory (the
  // default), or wherever it can be built (bench_compiled --generated-code=any).
  void set_code_within_tape(bool within) { code_within_tape_ = within; }
  // Which executor runs the step, and why not generated code where it does not.
  std::string executor() const {
    char text[160];
    if (jit_.built())
      std::snprintf(text, sizeof text, "generated code (%zu KB)", jit_.code_bytes() >> 10);
    else if (jit_refused_ == JitRefused::memory)
      std::snprintf(text, sizeof text,
                    "threaded: generated code would outgrow the eager tape's %zu KB",
                    eager_tape_bytes() >> 10);
    else if (jit_refused_ == JitRefused::length)
      std::snprintf(text, sizeof text, "threaded: over %zu instructions", kJitMaxInstructions);
    else
      std::snprintf(text, sizeof text, "threaded");
    return text;
  }

 private:
  // The program is the captured ops themselves, one 12-byte instruction each: the forward walks
  // them up, each through its `forward` handler, writing node i's slot for instruction i, and
  // the backward walks them down through its `backward` one. Node ids are the parameters, then
  // the ops in order; a literal is a value only, with an id of its own (kLiteral | its index),
  // and its slot follows the nodes' once compiled. Some 20 bytes a node of the eager tape's graph
  // (a node 16, an op 12 more, a literal 8), against its 32 (dev/notes.md, "The compiled scalar
  // program in less memory"). code_[0] is a sentinel: its backward handler stops, and its `a`
  // is the first op's node; after compiling, the last instruction starts the backward.
  struct Instr {
    uint8_t forward, backward;  // handlers, as execute()'s table numbers them (forward: the op)
    uint16_t unused;
    uint32_t a, b;  // operands' slots (while capturing: their ids)
  };
  static_assert(sizeof(Instr) == 12);
  static constexpr uint32_t kLiteral = 1u << 31;
  // The handlers, in one function so that each ends in its own indirect jump to the next
  // instruction's (threaded code: each jump site learns its own successors, where a switch or a
  // loop of calls shares one). Numbered as its table lists them: forward handlers in ScalarOp
  // order, then backward ones updating both operands' gradients, then the left's only, then the
  // right's only, then `start_backward`, `stop` and `skip` (an op no parameter reaches).
  static constexpr int kOps = int(ScalarOp::count);
  enum : uint8_t {
    kBackwardHandlers = kOps,
    kLhsHandlers = 2 * kOps,
    kRhsHandlers = 3 * kOps,
    kStartBackward = 4 * kOps,
    kStop,
    kSkip,
    kHandlers
  };
  static void execute(const Instr* ip, double* v, double* g) {
#define BP_ROW(prefix)                                                               \
  &&stop, &&prefix##add, &&prefix##sub, &&prefix##mul, &&prefix##div, &&prefix##neg, \
      &&prefix##pow, &&prefix##exp, &&prefix##log, &&prefix##tanh, &&prefix##relu
    static void* const table[kHandlers] = {BP_ROW(forward_),
                                           BP_ROW(backward_),
                                           BP_ROW(backward_lhs_),
                                           BP_ROW(backward_rhs_),
                                           &&start_backward,
                                           &&stop,
                                           &&skip};
#undef BP_ROW
    size_t out = size_t(ip->a) - 1;  // the node the instruction at hand writes (wraps at 0)
#define BP_NEXT(step, handler) \
  ip step, out step;           \
  goto* table[ip->handler];
    BP_NEXT(++, forward)
#define BP_BACKWARD(label, op, which)                                                        \
  label:                                                                                     \
  scalar_backward<ScalarOp::op, double, which>(g[out], v[out], v[ip->a], v[ip->b], g[ip->a], \
                                               g[ip->b]);                                    \
  BP_NEXT(--, backward)
#define BP_HANDLERS(op)                                                     \
  forward_##op : v[out] = scalar_forward<ScalarOp::op>(v[ip->a], v[ip->b]); \
  BP_NEXT(++, forward)                                                      \
  BP_BACKWARD(backward_##op, op, ScalarGrads::both)                         \
  BP_BACKWARD(backward_lhs_##op, op, ScalarGrads::lhs)                      \
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
    std::memset(g, 0, size_t(ip->b) * sizeof(double));
    g[ip->a] += 1.0;
    BP_NEXT(--, backward)
  skip:
    BP_NEXT(--, backward)
#undef BP_NEXT
  stop:
    return;
  }
  static ScalarOp op_of(const Instr& in) { return ScalarOp(in.forward); }
  // Ops are nodes num_params_ on, code_[1] on.
  const Instr& instr_of(uint32_t node) const { return code_[node - num_params_ + 1]; }
  uint32_t node_of(size_t instr) const { return uint32_t(num_params_ + instr - 1); }
  // A value's slot once compiled: a node's is its id, a literal's follows the nodes'.
  uint32_t slot_of(uint32_t id) const { return id & kLiteral ? num_nodes_ + (id & ~kLiteral) : id; }

  // The step on this machine. Tiered, as JIT compilers are: the captured step runs threaded code,
  // so that the time to a first step carries no code generation; the second run generates the
  // code (jit_seconds), which runs from then on where it could be built within the memory the
  // eager tape would hold for the same graph (and kJitSlack more: a small step's code is a few
  // pages, under what a process's resident size resolves).
  void run() {
    if (jit_.built()) {
      jit_.run(values_.data(), grads_.data());
      return;
    }
    if (runs_++ == 1 && scalar_jit_runs()) {
      const size_t held = held_bytes(),
                   allowed = code_within_tape_ ? eager_tape_bytes() + kJitSlack : SIZE_MAX;
      const auto started = std::chrono::steady_clock::now();
      if (instructions_ > kJitMaxInstructions) {
        jit_refused_ = JitRefused::length;
      } else if (allowed <= held ||
                 !jit_.build(
                     instructions_, [&](auto&& emit) { for_each_instruction(emit); },
                     num_nodes_ + num_literals_, num_nodes_, allowed - held)) {
        jit_refused_ = JitRefused::memory;
      } else {
        jit_seconds_ =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
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
  // Capture: append an instruction (its node's value slot too). Replay: the guard (the captured
  // op at this position, on the same operands).
  [[gnu::always_inline]] Value record(ScalarOp op, uint32_t lhs, uint32_t rhs, const char* name) {
    if (!compiled()) {
      const uint32_t id = uint32_t(values_.size());
      if (id == num_params_) capture_started_ = std::chrono::steady_clock::now();
      values_.push_back(0.0);
      code_.push_back({uint8_t(op), 0, 0, lhs, rhs});
      return {this, id, steps_};
    }
    const uint32_t id = cursor_;
    if (id >= num_nodes_ || instr_of(id).forward != uint8_t(op) || instr_of(id).a != slot_of(lhs) ||
        instr_of(id).b != slot_of(rhs)) [[unlikely]]
      diverged(id, op, lhs, rhs, name);
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
  // The captured step's values as the eager tape computes them, up to `id`, in their slots
  // (amortized: each node once per capture; the program overwrites them with the same bits).
  double value_before_compiling(uint32_t id) {
    const auto value = [&](uint32_t x) {
      return x & kLiteral ? literals_[x & ~kLiteral] : values_[x];
    };
    if (id & kLiteral) return value(id);
    for (computed_ = std::max(computed_, uint32_t(num_params_)); computed_ <= id; computed_++) {
      const Instr& in = instr_of(computed_);
      values_[computed_] = scalar_forward_of(ScalarOp(in.forward), value(in.a), value(in.b));
    }
    return values_[id];
  }
  [[noreturn]] [[gnu::cold]] void no_gradient(uint32_t id) const {
    if (id & kLiteral)
      std::fprintf(stderr,
                   "bp::CompiledScalar::grad: literal %u is a constant: it has no gradient\n",
                   id & ~kLiteral);
    else
      std::fprintf(stderr,
                   "bp::CompiledScalar::grad: node %u depends on no parameter (an op on literals "
                   "only): the compiled step computes no gradient for it\n",
                   id);
    std::abort();
  }
  [[noreturn]] [[gnu::cold]] void another_literal(uint32_t k, double c) const {
    if (k >= num_literals_)
      std::fprintf(stderr,
                   "bp::CompiledScalar::constant: literal %u, but the captured step has %u: a "
                   "compiled step must repeat the captured one\n",
                   k, num_literals_);
    else
      std::fprintf(stderr,
                   "bp::CompiledScalar::constant: literal %u is %.17g; the captured step had "
                   "%.17g there: a compiled step must repeat the captured one\n",
                   k, c, values_[num_nodes_ + k]);
    std::abort();
  }
  [[noreturn]] [[gnu::cold]] void diverged(uint32_t id, ScalarOp op, uint32_t lhs, uint32_t rhs,
                                           const char* name) const {
    if (id >= num_nodes_) {
      std::fprintf(stderr,
                   "bp::CompiledScalar::%s: node %u, but the captured step has %u nodes: "
                   "a compiled step must repeat the captured one\n",
                   name, id, num_nodes_);
    } else {
      // Operands as the workload names them: a literal as `literal k`.
      const auto name_of = [&](uint32_t x, char* text) {
        if (x & kLiteral)
          std::snprintf(text, 24, "literal %u", x & ~kLiteral);
        else if (x >= num_nodes_)
          std::snprintf(text, 24, "literal %u", x - num_nodes_);
        else
          std::snprintf(text, 24, "%u", x);
        return text;
      };
      const Instr& in = instr_of(id);
      char t[4][24];
      std::fprintf(stderr,
                   "bp::CompiledScalar::%s: node %u is %s(%s, %s); the captured step has "
                   "%s(%s, %s) there: a compiled step must repeat the captured one\n",
                   name, id, scalar_op_names[int(op)], name_of(lhs, t[0]), name_of(rhs, t[1]),
                   scalar_op_names[int(op_of(in))], name_of(in.a, t[2]), name_of(in.b, t[3]));
    }
    std::abort();
  }

  // One pass up the captured ops: their operands' slots, which nodes a parameter reaches, and
  // each op's two handlers.
  void compile(uint32_t root) {
    root_ = root;
    // Nodes after the root change no gradient; every parameter keeps its slot (the root may be
    // one of them).
    const uint32_t n = uint32_t(std::max<size_t>(root + 1, num_params_));
    const uint32_t num_literals = uint32_t(literals_.size());
    num_nodes_ = n, num_literals_ = num_literals;
    code_.resize(n - num_params_ + 1);
    // After the nodes, the literals, then the generated code's constants
    // (engine/compiled/scalar_jit.h).
    values_.resize(n);
    for (uint32_t k = 0; k < num_literals; k++) values_.push_back(literals_[k]);
    literals_.release();
    values_.push_back(1.0), values_.push_back(-0.0), values_.push_back(0.0);
    static_assert(kJitConstants == 3);
    grads_.resize(n, 0.0);
    // A node needs a gradient when a parameter reaches it: that of an op on literals only would
    // be computed and never read (a constant has none, as in PyTorch).
    needs_grad_.assign(n + num_literals, false);
    std::fill_n(needs_grad_.begin(), num_params_, true);
    instructions_ = 1;  // start_backward
    code_[0].a = uint32_t(num_params_);
    for (uint32_t i = 1; i < code_.size(); i++) {
      Instr& in = code_[i];
      const int op = in.forward;
      in.a = slot_of(in.a), in.b = slot_of(in.b);
      const bool to_x = needs_grad_[in.a], to_y = binary(ScalarOp(op)) && needs_grad_[in.b];
      needs_grad_[node_of(i)] = to_x || to_y;
      in.backward = uint8_t(!(to_x || to_y) ? kSkip
                            : to_x && to_y  ? kBackwardHandlers + op
                            : to_x          ? kLhsHandlers + op
                                            : kRhsHandlers + op);
      instructions_ += 1 + (to_x || to_y);
    }
    code_.push_back({kStartBackward, 0, 0, root, n});
    cursor_ = n, literal_cursor_ = num_literals;  // the captured step's nodes are all made
    captured_step_ = steps_;
    compile_seconds_ =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - capture_started_).count();
  }
  // The step, instruction by instruction, for the code generator: the forward in creation order,
  // start_backward, the chain rule in reverse creation order, each backward updating only the
  // gradients that a parameter needs (needs_grad_).
  template <class F>
  void for_each_instruction(F&& emit) const {
    const uint32_t ops = uint32_t(code_.size() - 2);
    for (uint32_t i = 1; i <= ops; i++) {
      const Instr& x = code_[i];
      emit(ScalarJitInstr{ScalarJitInstr::forward, op_of(x), ScalarGrads::both, node_of(i), x.a,
                          x.b, values_[x.b]});
    }
    emit(ScalarJitInstr{ScalarJitInstr::start_backward, ScalarOp::count, ScalarGrads::both, root_,
                        num_nodes_, 0, 0});
    for (uint32_t i = ops; i >= 1; i--) {
      const Instr& x = code_[i];
      const uint32_t out = node_of(i);
      if (!needs_grad_[out]) continue;
      const ScalarOp op = op_of(x);
      const bool to_x = needs_grad_[x.a], to_y = binary(op) && needs_grad_[x.b];
      emit(ScalarJitInstr{ScalarJitInstr::backward, op,
                          to_x && to_y ? ScalarGrads::both
                          : to_x       ? ScalarGrads::lhs
                                       : ScalarGrads::rhs,
                          out, x.a, x.b, values_[x.b]});
    }
  }
  static bool binary(ScalarOp op) {
    return op == ScalarOp::add || op == ScalarOp::sub || op == ScalarOp::mul || op == ScalarOp::div;
  }
  // The captured step's reads after its backward, which replay() repeats.
  bool capturing_reads() const { return compiled() && steps_ == captured_step_; }

  static constexpr uint32_t kNone = ~0u;
  // By slot: the parameters' and ops' values (while capturing, a parameter's only), then, once
  // compiled, the literals' and the generated code's constants.
  GrowingArray<double> values_;
  GrowingArray<double> literals_;  // while capturing
  GrowingArray<Instr> code_;       // sentinel, an instruction per op, then start_backward
  GrowingArray<double> grads_;     // by node, up to the root
  ScalarJit jit_;                  // the generated code, from the second run on
  enum class JitRefused { no, length, memory } jit_refused_ = JitRefused::no;
  bool code_within_tape_ = true;
  std::vector<bool> needs_grad_;  // by slot: a parameter reaches it
  uint32_t computed_ = 0;         // value() before the first backward: nodes computed so far
  size_t instructions_ = 0;
  uint32_t runs_ = 0;
  double jit_seconds_ = 0;
  std::vector<uint32_t> grad_reads_;  // the captured step's reads after its backward
  uint32_t value_read_ = kNone;
  bool replay_ready_ = false;
  size_t num_params_ = 0;
  uint32_t num_nodes_ = 0, num_literals_ = 0;  // set by compile()
  uint32_t root_ = 0, cursor_ = 0, literal_cursor_ = 0, steps_ = 0, captured_step_ = 0;
  bool backward_done_ = false;
  std::chrono::steady_clock::time_point capture_started_;
  double compile_seconds_ = 0;
};

}  // namespace bp
