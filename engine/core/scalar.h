// engine/core/scalar.h: scalar reverse-mode autodiff, micrograd's API on a flat tape.
//
// Every node is one number. Nodes live in one contiguous tape (an arena of plain structs):
// building an expression appends nodes, `backward` walks the tape once in reverse creation order,
// `reset` truncates it back to the parameters. After the first step the tape's capacity covers the
// graph, so steady-state steps allocate nothing. Creation order is a topological order, so the
// walk needs no sort, no recursion and no visited set, and it is deterministic; a node used twice
// (a diamond) simply receives two `+=`.
//
// Not here: tensors (engine/core/tensor.h), higher-order derivatives, threads. One tape belongs to
// one thread. Misuse stops the program with one line naming the op and what is valid: an empty or
// foreign handle, a handle from before a reset, a second backward on one graph.
//
//   bp::ScalarTape<double> tape;
//   auto a = tape.param(-4.0), b = tape.param(2.0);   // parameters: created first, kept by reset()
//   auto g = (a * b + pow(b, 3.0)).relu() / 2.0;
//   tape.backward(g);                                  // tape.grad(a), tape.grad(b)
//   tape.reset();                                      // drop the graph, zero parameter grads
//
// Tests: engine/core/scalar_test.cc (finite differences, diamonds, a million-node chain, no
// allocation, misuse).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <new>
#include <type_traits>

#include "engine/kernels/kernels.h"
#include "engine/runtime/arena.h"

namespace bp {

// The closed set of primitive ops. Each has its forward in scalar_forward and its chain rule in
// scalar_backward below, one case each; everything else (+=, constants on either side) is sugar.
enum class ScalarOp : uint8_t { leaf, add, sub, mul, div, neg, pow, exp, log, tanh, relu, count };
inline constexpr const char* scalar_op_names[] = {"leaf", "add", "sub", "mul",  "div", "neg",
                                                  "pow",  "exp", "log", "tanh", "relu"};
static_assert(std::size(scalar_op_names) == size_t(ScalarOp::count), "name every ScalarOp");

template <class T>
struct ScalarNode {
  T value;
  T grad;
  uint32_t lhs, rhs;  // operand indices into the tape; unused ones are 0. pow's rhs is a constant
  ScalarOp op;        // leaf holding the exponent, which keeps the node at 32 bytes in double
};

static_assert(sizeof(ScalarNode<double>) == 32,
              "a node is the tape's unit of memory: keep it small");
static_assert(std::is_trivially_copyable_v<ScalarNode<double>>, "the tape grows with realloc");

// x^k. Integer exponents (the common case: squares, cubes, reciprocals) by repeated
// multiplication, several times cheaper than std::pow; anything else by std::pow.
template <class T>
inline T scalar_pow(T x, T k) {
  const int n = int(k);
  if (T(n) != k || n > 16 || n < -16) return std::pow(x, k);
  T result = T(1), base = n < 0 ? T(1) / x : x;
  for (int i = n < 0 ? -n : n; i > 0; i--) result *= base;
  return result;
}

// a * b + c is madd (engine/kernels/kernels.h): one fused operation with FMA hardware, stated in
// the rules' text so that the compiled mode's generated code (engine/compiled/scalar_jit.h) repeats
// their rounding instruction for instruction.

// Which operands' gradients a backward updates: both, or one when the other needs none (a
// literal, in the compiled mode).
enum class ScalarGrads : uint8_t { both, lhs, rhs };

// Every op's forward and chain rule, one template each, so that the eager tape (its switches below)
// and the compiled program (engine/compiled/compiled_scalar.h) run the same arithmetic. x and y are
// the operands' values (y: pow's exponent), out the op's value, g its gradient; backward adds into
// the operands' gradients dx and dy (only dx, or only dy, for ScalarGrads::lhs or rhs).
template <ScalarOp op, class T>
[[gnu::always_inline]] inline T scalar_forward(T x, T y) {
  if constexpr (op == ScalarOp::add) return x + y;
  if constexpr (op == ScalarOp::sub) return x - y;
  if constexpr (op == ScalarOp::mul) return x * y;
  if constexpr (op == ScalarOp::div) return x / y;
  if constexpr (op == ScalarOp::neg) return -x;
  if constexpr (op == ScalarOp::pow) return scalar_pow(x, y);
  if constexpr (op == ScalarOp::exp) return std::exp(x);
  if constexpr (op == ScalarOp::log) return std::log(x);
  if constexpr (op == ScalarOp::tanh) return std::tanh(x);
  // PyTorch's relu: NaN and -0 pass through, so a NaN still reaches the check.
  if constexpr (op == ScalarOp::relu) return x < T(0) ? T(0) : x;
}
// The same, with the op known only at run time (leaf: x).
template <class T>
T scalar_forward_of(ScalarOp op, T x, T y) {
  switch (op) {
    case ScalarOp::add: return scalar_forward<ScalarOp::add>(x, y);
    case ScalarOp::sub: return scalar_forward<ScalarOp::sub>(x, y);
    case ScalarOp::mul: return scalar_forward<ScalarOp::mul>(x, y);
    case ScalarOp::div: return scalar_forward<ScalarOp::div>(x, y);
    case ScalarOp::neg: return scalar_forward<ScalarOp::neg>(x, y);
    case ScalarOp::pow: return scalar_forward<ScalarOp::pow>(x, y);
    case ScalarOp::exp: return scalar_forward<ScalarOp::exp>(x, y);
    case ScalarOp::log: return scalar_forward<ScalarOp::log>(x, y);
    case ScalarOp::tanh: return scalar_forward<ScalarOp::tanh>(x, y);
    case ScalarOp::relu: return scalar_forward<ScalarOp::relu>(x, y);
    default: return x;
  }
}
template <ScalarOp op, class T, ScalarGrads which = ScalarGrads::both>
[[gnu::always_inline]] inline void scalar_backward(T g, T out, T x, T y, T& dx, T& dy) {
  constexpr bool to_x = which != ScalarGrads::rhs, to_y = which != ScalarGrads::lhs;
  if constexpr (op == ScalarOp::add) {
    if constexpr (to_x) dx += g;
    if constexpr (to_y) dy += g;
  }
  if constexpr (op == ScalarOp::sub) {
    if constexpr (to_x) dx += g;
    if constexpr (to_y) dy -= g;
  }
  if constexpr (op == ScalarOp::mul) {
    if constexpr (to_x) dx = madd(g, y, dx);
    if constexpr (to_y) dy = madd(g, x, dy);
  }
  if constexpr (op == ScalarOp::div) {  // out = x / y: d/dx = 1/y, d/dy = -x/y^2 = -out/y
    const T inv_y = T(1) / y;
    if constexpr (to_x) dx = madd(g, inv_y, dx);
    if constexpr (to_y) dy = madd(-(g * out), inv_y, dy);
  }
  if constexpr (op == ScalarOp::neg) dx -= g;
  // d(x^k)/dx = k x^(k-1); k is a constant: no gradient for it. k = 0: x^0 is constant, so 0 even
  // at x = 0, where k x^(k-1) would be 0 * inf (PyTorch gives 0 too).
  if constexpr (op == ScalarOp::pow)
    if (y != T(0)) dx = madd(g * y, scalar_pow(x, y - T(1)), dx);
  if constexpr (op == ScalarOp::exp) dx = madd(g, out, dx);
  if constexpr (op == ScalarOp::log) dx += g / x;
  if constexpr (op == ScalarOp::tanh) dx = madd(g, madd(-out, out, T(1)), dx);
  if constexpr (op == ScalarOp::relu) dx += out <= T(0) ? T(0) : g;  // NaN passes g, as torch
}

template <class T>
class ScalarTape;

[[noreturn]] inline void scalar_misuse(const char* op, const char* what) {
  std::fprintf(stderr, "bp::ScalarTape::%s: %s\n", op, what);
  std::abort();
}

// A handle to one node: which tape, which slot, made in which step. Cheap to copy (16 bytes);
// valid until the tape is reset (parameters stay valid for the tape's lifetime). A
// default-constructed handle is empty.
template <class T>
struct Scalar {
  ScalarTape<T>* tape = nullptr;
  uint32_t id = 0;
  uint32_t step = 0;  // the tape's reset count when the node was made

  // The tape an op on this handle goes to; an empty handle stops here, before any dereference.
  [[gnu::always_inline]] ScalarTape<T>* owner(const char* op) const {
    if (!tape) scalar_misuse(op, "an operand is an empty Scalar handle (default-constructed)");
    return tape;
  }
  T value() const { return owner("value")->node(*this, "value").value; }
  T grad() const { return owner("grad")->node(*this, "grad").grad; }

  [[gnu::always_inline]] Scalar relu() const { return owner("relu")->unary(ScalarOp::relu, *this); }
  [[gnu::always_inline]] Scalar tanh() const { return owner("tanh")->unary(ScalarOp::tanh, *this); }
  [[gnu::always_inline]] Scalar exp() const { return owner("exp")->unary(ScalarOp::exp, *this); }
  [[gnu::always_inline]] Scalar log() const { return owner("log")->unary(ScalarOp::log, *this); }
  [[gnu::always_inline]] Scalar pow(T exponent) const {
    return owner("pow")->power(*this, exponent);
  }

  // Friends rather than templates so that `x * 2`, `10.0 / f` convert the constant to T. Every
  // op is inlined into the workload's code, however large the binary that instantiates it: left
  // to the inliner, bench_engine called push and each operator (dev/notes.md, "Inlined ops").
  [[gnu::always_inline]] friend Scalar operator+(Scalar a, Scalar b) {
    return a.owner("add")->binary(ScalarOp::add, a, b);
  }
  [[gnu::always_inline]] friend Scalar operator-(Scalar a, Scalar b) {
    return a.owner("sub")->binary(ScalarOp::sub, a, b);
  }
  [[gnu::always_inline]] friend Scalar operator*(Scalar a, Scalar b) {
    return a.owner("mul")->binary(ScalarOp::mul, a, b);
  }
  [[gnu::always_inline]] friend Scalar operator/(Scalar a, Scalar b) {
    return a.owner("div")->binary(ScalarOp::div, a, b);
  }
  [[gnu::always_inline]] friend Scalar operator-(Scalar a) {
    return a.owner("neg")->unary(ScalarOp::neg, a);
  }
  [[gnu::always_inline]] friend Scalar operator+(Scalar a, T c) {
    return a + a.owner("add")->constant(c);
  }
  [[gnu::always_inline]] friend Scalar operator+(T c, Scalar b) {
    return b.owner("add")->constant(c) + b;
  }
  [[gnu::always_inline]] friend Scalar operator-(Scalar a, T c) {
    return a - a.owner("sub")->constant(c);
  }
  [[gnu::always_inline]] friend Scalar operator-(T c, Scalar b) {
    return b.owner("sub")->constant(c) - b;
  }
  [[gnu::always_inline]] friend Scalar operator*(Scalar a, T c) {
    return a * a.owner("mul")->constant(c);
  }
  [[gnu::always_inline]] friend Scalar operator*(T c, Scalar b) {
    return b.owner("mul")->constant(c) * b;
  }
  [[gnu::always_inline]] friend Scalar operator/(Scalar a, T c) {
    return a / a.owner("div")->constant(c);
  }
  [[gnu::always_inline]] friend Scalar operator/(T c, Scalar b) {
    return b.owner("div")->constant(c) / b;
  }
  // As in Python, `a += b` rebinds `a` to a new node; the old node stays in the graph.
  Scalar& operator+=(Scalar b) { return *this = *this + b; }
  Scalar& operator-=(Scalar b) { return *this = *this - b; }
  Scalar& operator*=(Scalar b) { return *this = *this * b; }
  Scalar& operator/=(Scalar b) { return *this = *this / b; }
  Scalar& operator+=(T c) { return *this = *this + c; }
  Scalar& operator-=(T c) { return *this = *this - c; }
  Scalar& operator*=(T c) { return *this = *this * c; }
  Scalar& operator/=(T c) { return *this = *this / c; }

  friend Scalar pow(Scalar a, T exponent) { return a.pow(exponent); }
  friend Scalar relu(Scalar a) { return a.relu(); }
  friend Scalar tanh(Scalar a) { return a.tanh(); }
  friend Scalar exp(Scalar a) { return a.exp(); }
  friend Scalar log(Scalar a) { return a.log(); }
};

template <class T>
class ScalarTape {
 public:
  using Node = ScalarNode<T>;
  using Value = Scalar<T>;

  // `reserve_nodes` only sizes the first allocation; the tape grows as needed.
  explicit ScalarTape(uint32_t reserve_nodes = 256) { grow(reserve_nodes); }
  ~ScalarTape() { std::free(nodes_); }
  ScalarTape(const ScalarTape&) = delete;  // handles point at the tape: it must not move
  ScalarTape& operator=(const ScalarTape&) = delete;

  // A trainable leaf that survives reset(). Parameters come before any graph is built so that
  // reset() can keep them by truncating the tape.
  Value param(T value) {
    if (size_ != num_params_) {
      std::fprintf(stderr,
                   "bp::ScalarTape::param: called with %zu graph nodes on the tape; create all "
                   "parameters before building a graph, or call reset() first\n",
                   size_t(size_ - num_params_));
      std::abort();
    }
    Value v = push(ScalarOp::leaf, value, 0, 0);
    num_params_++;
    return v;
  }
  // A leaf that is part of this step's graph (an input or a literal); dropped by reset().
  [[gnu::always_inline]] Value constant(T value) { return push(ScalarOp::leaf, value, 0, 0); }

  [[gnu::always_inline]] Value binary(ScalarOp op, Value a, Value b) {
    check_operand(a, op), check_operand(b, op);
    const T x = nodes_[a.id].value, y = nodes_[b.id].value;
    T out;
    switch (op) {
      case ScalarOp::add: out = scalar_forward<ScalarOp::add>(x, y); break;
      case ScalarOp::sub: out = scalar_forward<ScalarOp::sub>(x, y); break;
      case ScalarOp::mul: out = scalar_forward<ScalarOp::mul>(x, y); break;
      case ScalarOp::div: out = scalar_forward<ScalarOp::div>(x, y); break;
      default: bad_op(op, "binary");
    }
    return push(op, out, a.id, b.id);
  }
  [[gnu::always_inline]] Value unary(ScalarOp op, Value a) {
    check_operand(a, op);
    const T x = nodes_[a.id].value;
    T out;
    switch (op) {
      case ScalarOp::neg: out = scalar_forward<ScalarOp::neg>(x, x); break;
      case ScalarOp::exp: out = scalar_forward<ScalarOp::exp>(x, x); break;
      case ScalarOp::log: out = scalar_forward<ScalarOp::log>(x, x); break;
      case ScalarOp::tanh: out = scalar_forward<ScalarOp::tanh>(x, x); break;
      case ScalarOp::relu: out = scalar_forward<ScalarOp::relu>(x, x); break;
      default: bad_op(op, "unary");
    }
    return push(op, out, a.id, 0);
  }
  [[gnu::always_inline]] Value power(Value a, T exponent) {
    check_operand(a, ScalarOp::pow);
    const Value k = constant(exponent);
    return push(ScalarOp::pow, scalar_forward<ScalarOp::pow>(nodes_[a.id].value, exponent), a.id,
                k.id);
  }

  // d(root)/d(node) into every node's grad, accumulating (+=) like PyTorch. One reverse pass over
  // the tape prefix that can reach `root`; each case is its op's scalar_backward.
  // Once per graph, as in PyTorch: a second call would add every gradient again.
  void backward(Value root) {
    check_operand(root, ScalarOp::count, "backward");
    if (backward_done_)
      scalar_misuse("backward",
                    "called twice on one graph (every gradient would be added twice); "
                    "call reset() between steps");
    backward_done_ = true;
    Node* const n = nodes_;
    n[root.id].grad += T(1);
    // Threaded: each op's case ends in its own jump to the next node's (one indirect jump a node,
    // each site predicted apart, where a switch in a loop shares one and jumps back), as the
    // compiled mode's threaded program (dev/notes.md, "The eager floor").
    static void* const cases[] = {&&leaf, &&add, &&sub, &&mul,  &&div, &&neg,
                                  &&pow,  &&exp, &&log, &&tanh, &&relu};
    static_assert(std::size(cases) == size_t(ScalarOp::count));
    // The walk stops before the parameters, compared before each step back (no pointer ever
    // before the tape's start).
    const Node* const first = n + num_params_;
    const Node* x = n + root.id;
    if (x < first) return;
#define BP_NEXT           \
  if (x == first) return; \
  --x;                    \
  goto* cases[int(x->op)];
    goto* cases[int(x->op)];
#define BP_SCALAR_BACKWARD(name)                                                         \
  name:                                                                                  \
  scalar_backward<ScalarOp::name>(x->grad, x->value, n[x->lhs].value, n[x->rhs].value,   \
                                  n[x->lhs].grad, n[x->rhs].grad); /* unary: node 0's */ \
  BP_NEXT
    BP_SCALAR_BACKWARD(add)
    BP_SCALAR_BACKWARD(sub)
    BP_SCALAR_BACKWARD(mul)
    BP_SCALAR_BACKWARD(div)
    BP_SCALAR_BACKWARD(neg)
    BP_SCALAR_BACKWARD(pow)
    BP_SCALAR_BACKWARD(exp)
    BP_SCALAR_BACKWARD(log)
    BP_SCALAR_BACKWARD(tanh)
    BP_SCALAR_BACKWARD(relu)
  leaf:
    BP_NEXT
#undef BP_SCALAR_BACKWARD
#undef BP_NEXT
  }

  // Drop this step's graph and zero the parameters' gradients; capacity is kept for the next step.
  void reset() {
    last_size_ = size_;
    size_ = num_params_;
    resets_++;
    backward_done_ = false;
    zero_grad();
  }
  void zero_grad() {
    for (size_t i = 0; i < num_params_; i++) nodes_[i].grad = T(0);
  }

  const Node& node(uint32_t id) const { return nodes_[id]; }  // by slot, unchecked (tests)
  const Node& node(Value v, const char* op) const {
    check_operand(v, ScalarOp::count, op);
    return nodes_[v.id];
  }
  size_t size() const { return size_; }                    // nodes now, parameters included
  size_t size_before_reset() const { return last_size_; }  // the last step's nodes
  size_t num_params() const { return num_params_; }
  size_t arena_bytes() const { return size_t(capacity_) * sizeof(Node); }  // the tape's footprint
  uint32_t growths() const { return growths_; }  // how often the tape was (re)allocated

 private:
  [[gnu::always_inline]] Value push(ScalarOp op, T value, uint32_t lhs, uint32_t rhs) {
    if (size_ == capacity_) [[unlikely]]
      grow(capacity_ < 64 ? 64 : capacity_ * 2);
    nodes_[size_] = Node{value, T(0), lhs, rhs, op};
    return Value{this, size_++, uint32_t(resets_)};
  }
  // realloc rather than std::vector: for large blocks glibc grows with mremap, which moves page
  // mappings instead of copying, so the old and new tape never coexist in RSS (std::vector's
  // copy had made scalar_chain's peak half as large again).
  void grow(uint32_t capacity) {
    if (capacity > 0x7fffffffu / 2) {
      std::fprintf(stderr, "bp::ScalarTape: more than 2^30 nodes; split the graph\n");
      std::abort();
    }
    void* p = std::realloc(nodes_, size_t(capacity) * sizeof(Node));
    if (!p) throw AllocationFailed(size_t(capacity) * sizeof(Node), "the scalar tape");
    nodes_ = static_cast<Node*>(p);
    capacity_ = capacity;
    growths_++;
  }
  // Every operand of every op passes here: its tape must be this one, and unless it is a
  // parameter it must come from this step (a handle kept across reset() points at a reused slot).
  // One predictable branch on the fast path, inlined into every op like the op itself; the
  // message is built only on failure.
  [[gnu::always_inline]] void check_operand(Value v, ScalarOp op,
                                            const char* name = nullptr) const {
    if (v.tape != this || (v.id >= num_params_ && v.step != uint32_t(resets_))) [[unlikely]]
      bad_operand(v, name ? name : scalar_op_names[int(op)]);
  }
  [[noreturn]] [[gnu::cold]] void bad_operand(Value v, const char* name) const {
    if (!v.tape) scalar_misuse(name, "an operand is an empty Scalar handle (default-constructed)");
    if (v.tape != this)
      scalar_misuse(name,
                    "an operand belongs to another tape; build each graph from one tape's "
                    "values");
    scalar_misuse(name,
                  "an operand was made before the last reset(); only parameters outlive a "
                  "step");
  }
  [[noreturn]] static void bad_op(ScalarOp op, const char* where) {
    std::fprintf(stderr, "bp::ScalarTape: op %d is not a %s op\n", int(op), where);
    std::abort();
  }

  Node* nodes_ = nullptr;  // parameters first ([0, num_params_)), then the current graph
  uint32_t size_ = 0, capacity_ = 0;
  // 64-bit, unlike the 32-bit fields of a Node: stores into the tape cannot alias these, so the
  // inlined operand checks keep them in registers instead of reloading them after every push
  // (measured on tiny_graph: 52 ns a step with 32-bit fields, 38 ns with these; 44 ns before the
  // checks existed, when the ops were not all inlined).
  uint64_t num_params_ = 0;
  uint64_t resets_ = 0;   // stamps each handle with its step (its low 32 bits)
  uint32_t growths_ = 0;  // reallocations of the tape, for the tests' "steady state" claim
  uint32_t last_size_ = 0;
  bool backward_done_ = false;
};

}  // namespace bp
