// engine/compiled/program.h: a captured training step compiled into a flat program over one planned
// arena.
//
// Input: a record-only TensorGraph (engine/core/tensor.h) holding one step's ops up to its loss.
// The program is the whole step: every op's forward in creation order, then the backward generated
// from the same rules (engine/core/ops.h) in reverse order. The optimizer's update is the eager
// engine's, over the parameters' flat buffers (engine/core/optimizer.h). Each instruction is one
// kernel call over an OpArgs whose pointers were resolved at compile time: running it is a loop of
// indirect calls, with no graph, no allocation and no branch on op kinds.
//
// Memory (engine/compiled/planner.h): every activation, gradient, saved aux and scratch buffer is a
// buffer with a lifetime over the program; buffers that are never live together share bytes. An
// activation lives from its forward to its last reader (a consumer's forward, or a backward that
// reads it: the rules say which); its gradient from its first accumulation to its own backward.
// Elementwise ops write over an operand that nothing reads afterwards (residual adds, ReLU of a
// dead input), so their output takes no buffer of its own. A gradient's first writer writes it
// fresh where its kernel can (OpArgs::fresh: the sums start from zero instead of from a zeroed
// buffer, the same bits), and the others are zeroed right before their first accumulation, as the
// eager tape's zeroed allocations are; parameters' gradients too, when the step begins with
// zero_grad (start_gradients). So the arithmetic is the eager engine's, operation for operation:
// gradients come out bitwise equal (tested).
//
// Inputs that change between steps are slots: a constant operand (a batch made at setup) and the
// indices of embedding and cross_entropy are patched into the instructions that read them before
// each step (bind_constant, bind_index). Shapes never change: engine/compiled/backend.h refuses a
// step whose ops or shapes differ from the captured ones.
//
// Kernels: each node's forward and backward come from the dialect chosen for it
// (engine/dialects/dialects.h); the op's rule still says what the planner needs (aux, reads, in
// place). In files of their own: the program before placement (engine/compiled/lowered.h), the
// waves it runs in at two threads or more (engine/compiled/waves.h), its fused groups at one
// (engine/compiled/fusion.h), the choice of what to recompute (engine/compiled/recompute.h, with
// its model of the live bytes, engine/compiled/live_bytes.h), and what compiling decides and is
// asked (engine/compiled/plan_decisions.h: the budget, the decisions a plan cache keeps). Not
// here: capture and the replay guard (engine/compiled/backend.h). Tests:
// engine/compiled/compiled_test.cc, engine/compiled/fusion_test.cc.
#pragma once

#include <algorithm>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/compiled/fusion.h"
#include "engine/compiled/lowered.h"
#include "engine/compiled/plan_decisions.h"
#include "engine/compiled/planner.h"
#include "engine/compiled/recompute.h"
#include "engine/compiled/waves.h"
#include "engine/core/ops.h"
#include "engine/core/tensor.h"
#include "engine/dialects/dialects.h"

namespace bp {

// One kernel call with its arguments, every pointer resolved.
template <class T>
struct Instr {
  void (*run)(const OpArgs<T>&);
  OpArgs<T> args;
};

template <class T>
class Program {
 public:
  Program() = default;
  Program(const Program&) = delete;
  Program& operator=(const Program&) = delete;
  Program(Program&&) = default;
  Program& operator=(Program&&) = default;

  // Compiles nodes [num_params, root] of the record-only graph `g`; root is the loss (1, 1). With
  // a budget, activations are recomputed until the plan fits, or BudgetError says the smallest
  // it reached.
  // Kernels: chosen per node by `dialects` (engine/dialects/dialects.h); without one, by priority,
  // which is the eager engine's own kernels.
  // With `given` decisions (a plan cache's), nothing is chosen or searched: PlanMismatch if they
  // do not fit.
  Program(const TensorGraph<T>& g, uint32_t root, ArenaBudget budget = {},
          DialectSelector<T>* dialects = nullptr, const PlanDecisions* given = nullptr) {
    DialectSelector<T> by_priority;
    threads_ = thread_pool().size();
    given_ = given;
    compile(g, root, budget, dialects ? *dialects : by_priority);
    given_ = nullptr;
  }
  // What made this program, to make it again (PlanDecisions).
  PlanDecisions decisions() const {
    PlanDecisions d;
    for (const KernelUse& k : kernels_) {
      d.kernels.push_back({k.choice.kernel->dialect, {}});
      for (const auto& [dialect, s] : k.choice.seconds)
        d.kernels.back().seconds.push_back({dialect, s});
    }
    d.recomputed = recomputed_;
    for (const PlannedBuffer& b : planned_) d.offsets.push_back(b.offset);
    d.plan = plan_, d.budget_bytes = budget_bytes_, d.instructions = code_.size();
    return d;
  }

  void forward() const {
    check_threads();
    if (waves_.empty())
      fusion_.run(code_, 0, forward_end_);
    else
      waves_.run(code_, 0, waves_.forward_waves);
  }
  void backward() const {
    check_threads();
    if (waves_.empty())
      fusion_.run(code_, forward_end_, code_.size());
    else
      waves_.run(code_, waves_.forward_waves, waves_.waves.size());
  }
  // The same, calling final(j) as soon as persistent node j's gradient is final: after its last
  // writer (and the fused group holding it) has run, so that data parallel can sum it under the
  // rest of the backward (TensorGraph::on_gradient_final); nodes no instruction writes, first.
  // In waves (two threads or more) every call comes after the whole backward.
  template <class F>
  void backward(F&& final) const {
    if (!waves_.empty()) {
      backward();
      for (uint32_t j = 0; j < first_node_; j++) final(j);
      return;
    }
    check_threads();
    size_t at = forward_end_;
    for (const auto& [last, j] : param_last_writes_) {
      if (last != SIZE_MAX) {
        const size_t end = std::max(at, fusion_.end_after(last));
        fusion_.run(code_, at, end), at = end;
      }
      final(j);
    }
    fusion_.run(code_, at, code_.size());
  }
  // Scratch is planned for the parts a kernel splits into, so a plan runs at its own threads only.
  void check_threads() const {
    if (thread_pool().size() != threads_) [[unlikely]] {
      std::fprintf(stderr,
                   "bp::Program: planned for %d threads, but the pool now has %d: compile again "
                   "after resizing the pool\n",
                   threads_, thread_pool().size());
      std::abort();
    }
  }
  int threads() const { return threads_; }
  // Whether this step's parameter gradients start at zero (zero_grad before it) or hold sums to
  // add to (gradients accumulated over steps). At zero, each parameter's first writer writes its
  // gradient fresh (OpArgs::fresh) and only the few no first writer covers whole are zeroed here
  // (an embedding's table, written row by row): the step makes no pass over every gradient to
  // zero it, where the eager engine's zero_grad does.
  void start_gradients(bool zeroed) {
    if (zeroed != params_fresh_) {
      for (const FirstWrite& w : param_first_writes_)
        code_[w.at].args.fresh = zeroed ? uint8_t(code_[w.at].args.fresh | w.bit)
                                        : uint8_t(code_[w.at].args.fresh & ~w.bit);
      params_fresh_ = zeroed;
    }
    if (zeroed)
      for (const auto& [grad, n] : param_fills_) std::memset(grad, 0, n * sizeof(T));
  }
  T loss() const { return loss_[0]; }

  // Slots: node `id`'s operand k now reads `data` (same shape: the caller checked), or its
  // indices are `idx`.
  void bind_constant(uint32_t id, int k, const T* data) {
    for (int32_t at : {forward_at_[id - first_node_], backward_at_[id - first_node_]})
      if (at >= 0 && code_[at].args.in[k]) code_[at].args.in[k] = data;
  }
  void bind_index(uint32_t id, IndexSpan idx) {
    for (int32_t at : {forward_at_[id - first_node_], backward_at_[id - first_node_]})
      if (at >= 0) code_[at].args.index = idx;
  }

  const MemoryPlan& memory() const { return plan_; }
  // The kernel that serves each op of the step, in creation order (views have none).
  struct KernelUse {
    uint32_t node;
    TensorOp op;
    program_ir::OpShape shape;  // a third of an OpArgs: an unrolled RNN keeps 10^5 of them
    KernelChoice<T> choice;
  };
  const std::vector<KernelUse>& kernels() const { return kernels_; }
  size_t budget_bytes() const { return budget_bytes_; }  // what it was planned under (0: none)
  const std::vector<PlannedBuffer>& buffers() const { return planned_; }  // placed, for the tests
  size_t num_instructions() const { return code_.size(); }
  // Bytes the step's instructions move, modelled from their shapes (program_ir::bytes_moved),
  // with its fused groups' internal buffers (which stay in cache) and without.
  size_t bytes_moved() const { return bytes_moved_ - fusion_.saved_bytes(); }
  size_t bytes_moved_unfused() const { return bytes_moved_; }
  const Fusion<T>& fusion() const { return fusion_; }
  // Instructions that run side by side with others (in waves of more than one part).
  size_t side_by_side() const { return waves_.side_by_side(); }

 private:
  // The program before placement (engine/compiled/lowered.h).
  using Ref = program_ir::Ref<T>;
  using Buffer = program_ir::Buffer;
  using Pending = program_ir::Pending<T>;
  using Emitted = program_ir::Emitted<T>;
  using Lowered = program_ir::Lowered<T>;
  int32_t new_buffer(size_t elems, bool zeroed) {
    buffers_.push_back({elems, zeroed, -1});
    return int32_t(buffers_.size() - 1);
  }

  Emitted emit(const TensorGraph<T>& g, uint32_t root, DialectSelector<T>& dialects);

  // A rough cost of an op's forward, to choose what to recompute: the products' multiply-adds,
  // attention's two passes over (T, T) per head, a few operations per element otherwise.
  static double flops(const OpArgs<T>& a, TensorOp op) {
    const double out = double(a.rows) * a.cols;
    switch (op) {
      case TensorOp::matmul:
      case TensorOp::linear: return 2 * out * a.in_cols[0];
      case TensorOp::attention:
        return 2.0 * a.arg[0] * a.arg[2] * a.arg[1] * a.arg[1] * (a.cols / a.arg[2]);
      case TensorOp::layernorm: return 8 * out;
      case TensorOp::softmax:
      case TensorOp::gelu:
      case TensorOp::tanh: return 20 * out;
      default: return out;
    }
  }

  // The program in its final order, with `recomputed` nodes' outputs dropped after their last
  // forward use and recomputed before their first backward use; ops in place where they may be;
  // each zeroed buffer's fill right before its first use. Buffers come back merged (`buffers`).
  Lowered lower(const Emitted& e, const std::vector<uint32_t>& recomputed) const;
  // The bytes `l` moves unfused; then its tiled groups where it runs in order at one thread.
  void fuse(Lowered& l, int32_t loss_buffer, bool on) {
    bytes_moved_ = 0;
    for (const Pending& p : l.code) bytes_moved_ += program_ir::bytes_moved(p, l.buffers);
    fusion_.clear();
    if (on && threads_ == 1 && waves_.empty()) fusion_.find(l, loss_buffer);
  }

  void compile(const TensorGraph<T>& g, uint32_t root, ArenaBudget limit,
               DialectSelector<T>& dialects);

  // The given decisions' kernel for the next op: by dialect name among the op's kernels of this
  // build, able to run its shape, and the one `dialects` would have chosen with its timings.
  KernelChoice<T> given_choice(TensorOp op, const OpArgs<T>& shape,
                               const DialectSelector<T>& dialects) const;  // in program.cc

  // Each trained parameter's gradient's first writer (start_gradients), when it may write it fresh
  // (fresh_operand), and its last (backward(final)). In program.cc.
  void find_param_writes(const TensorGraph<T>& g, const std::vector<Pending>& code);

  static size_t numel(const typename TensorGraph<T>::Node& n) { return size_t(n.rows) * n.cols; }
  // An op's shapes and arguments with every pointer cleared: the refs fill them.
  static OpArgs<T> shapes_of(const TensorGraph<T>& g, const typename TensorGraph<T>::Node& n) {
    OpArgs<T> a = g.args_of(n);
    a.out = a.dout = a.aux = a.scratch = nullptr;
    for (int k = 0; k < 3; k++) a.in[k] = nullptr, a.din[k] = nullptr;
    return a;
  }
  [[noreturn]] __attribute__((format(printf, 1, 2))) static void fail(const char* format, ...) {
    va_list args;
    va_start(args, format);
    engine_vfail("bp::Program", format, args);
  }

  struct FreeDeleter {
    void operator()(T* p) const { std::free(p); }
  };
  std::vector<Buffer> buffers_;
  std::vector<const T*> outside_;  // parameters' values, then their gradients (Ref::outside)
  std::vector<KernelUse> kernels_;
  std::vector<PlannedBuffer> planned_;
  std::vector<Instr<T>> code_;
  size_t forward_end_ = 0;
  Waves<T> waves_;    // the schedule at two threads or more (engine/compiled/waves.h)
  Fusion<T> fusion_;  // tiled groups, at one thread (engine/compiled/fusion.h)
  std::vector<int32_t> forward_at_, backward_at_;  // node - first_node_ -> its instruction
  uint32_t first_node_ = 0;
  // Parameters' gradients (start_gradients): the instruction that writes each first, and the
  // operand's bit; the gradients no first writer writes whole (pointer, elements).
  struct FirstWrite {
    size_t at;
    uint8_t bit;
  };
  std::vector<FirstWrite> param_first_writes_;
  // Per persistent node: the last instruction that writes its gradient (SIZE_MAX: none, sorted
  // first), in the order of those instructions.
  std::vector<std::pair<size_t, uint32_t>> param_last_writes_;
  std::vector<std::pair<T*, size_t>> param_fills_;
  bool params_fresh_ = false;
  int threads_ = 1;                        // the pool's size it was planned for
  std::unique_ptr<T, FreeDeleter> arena_;  // (plan_.arena_bytes / sizeof(T)): every buffer
  T* loss_ = nullptr;                      // (1, 1), inside the arena
  size_t budget_bytes_ = 0;
  MemoryPlan plan_;
  std::vector<uint32_t> recomputed_;
  size_t bytes_moved_ = 0;
  const PlanDecisions* given_ = nullptr;  // while compiling from a plan cache's decisions
};

// The compile's steps, out of the class body: not inline, so that the one instantiation in
// engine/compiled/program.cc serves every program (the extern declaration below).
template <class T>
auto Program<T>::emit(const TensorGraph<T>& g, uint32_t root, DialectSelector<T>& dialects)
    -> Emitted {
  const uint32_t P = uint32_t(g.num_params());
  const uint32_t N = root + 1;
  Emitted e;
  e.forward_of.assign(N - P, -1), e.cost.assign(N - P, 0);
  // Where each node's value and gradient are: parameters and constants outside, the step's
  // nodes in buffers, a view wherever its operand is.
  std::vector<Ref> data(N), grad(N);
  std::vector<int32_t> aux(N, -1);
  std::vector<const Kernel<T>*> kernel_of(N, nullptr);
  kernels_.clear();
  outside_.assign(2 * size_t(P), nullptr);
  for (uint32_t j = 0; j < P; j++)
    outside_[j] = g.node_at(j).data, outside_[P + j] = g.node_at(j).grad;
  for (uint32_t j = 0; j < P; j++)
    data[j] = {-1, int32_t(j)}, grad[j] = g.node_at(j).grad ? Ref{-1, int32_t(P + j)} : Ref{};
  std::vector<Pending>& code = e.code;

  // Whether each library pays for its memory, weighed over the whole step
  // (engine/dialects/dialects.h).
  std::vector<std::pair<TensorOp, OpArgs<T>>> ops;
  for (uint32_t i = P; i < N; i++)
    if (g.node_at(i).op != TensorOp::view && g.node_at(i).op != TensorOp::leaf)
      ops.push_back({g.node_at(i).op, shapes_of(g, g.node_at(i))});
  if (!given_) dialects.weigh_libraries(ops);
  // Forward, in creation order: every node gets its buffers here (a view its operand's).
  for (uint32_t i = P; i < N; i++) {
    const auto& n = g.node_at(i);
    const OpRule<T>& rule = op_rules_for<T>(g.precision())[int(n.op)];
    if (n.op == TensorOp::view) {
      data[i] = data[n.in[0]], grad[i] = grad[n.in[0]];
      continue;
    }
    if (n.op == TensorOp::leaf) fail("node %u is an input leaf inside the step", i);
    data[i] = {new_buffer(numel(n), rule.forward_accumulates), -1};
    if (n.needs_grad) grad[i] = {new_buffer(numel(n), true), -1};
    const OpArgs<T> shape = shapes_of(g, n);
    kernels_.push_back({i, n.op, program_ir::shape_of(shape), {}});
    kernels_.back().choice =
        given_ ? given_choice(n.op, shape, dialects) : dialects.choose(n.op, shape);
    const Kernel<T>& kernel = *kernels_.back().choice.kernel;
    kernel_of[i] = &kernel;
    Pending p{kernel.forward, kernels_.back().shape, {}, {}, {}, {}, {}, {}, n.op, false, i};
    if (const size_t a = rule.aux_elems(shape)) aux[i] = new_buffer(a, false);
    p.out = data[i], p.aux = Ref{aux[i], -1};
    bool recomputable = !tensor_op_takes_indices(n.op) && i != root;
    for (int k = 0; k < tensor_op_operands(n.op); k++) {
      p.in[k] = data[n.in[k]];
      const auto& x = g.node_at(n.in[k]);
      if (n.in[k] < P && !x.needs_grad) recomputable = false;  // a slot: bound per step
    }
    if (const size_t s = kernel.forward_scratch(shape)) p.scratch = {new_buffer(s, false), -1};
    e.forward_of[i - P] = int32_t(code.size());
    e.cost[i - P] = flops(shape, n.op);
    if (recomputable) e.candidates.push_back(i);
    code.push_back(p);
  }
  e.forward_count = code.size();

  // Backward, in reverse creation order, as the eager tape walks it.
  if (grad[root].buffer < 0)
    fail(
        "the loss (node %u) is no op of the step with a gradient (a parameter, or a view of "
        "one)",
        root);
  code.push_back({program_kernels::seed_loss<T>,
                  {},
                  grad[root],
                  {},
                  {},
                  {},
                  {},
                  {},
                  TensorOp::count,
                  true,
                  root});
  code.back().args.rows = code.back().args.cols = 1;
  for (uint32_t i = N; i-- > P;) {
    const auto& n = g.node_at(i);
    const OpRule<T>& rule = op_rules_for<T>(g.precision())[int(n.op)];
    if (!n.needs_grad || !rule.backward) continue;
    const Kernel<T>& kernel = *kernel_of[i];
    const OpArgs<T> shape = shapes_of(g, n);
    Pending p{kernel.backward, program_ir::shape_of(shape), {}, {}, {}, {}, {}, {}, n.op, true, i};
    p.fresh_ok = kernel.backward_fresh;
    p.dout = grad[i];
    // Only what the rule reads: a pointer left null faults at once if the table is wrong.
    if (rule.backward_reads & kReadsOut) p.out = data[i];
    if (rule.backward_reads & kReadsAux) p.aux = Ref{aux[i], -1};
    for (int k = 0; k < tensor_op_operands(n.op); k++) {
      if (rule.backward_reads & (kReadsIn0 << k)) p.in[k] = data[n.in[k]];
      p.din[k] = grad[n.in[k]];
    }
    if (const size_t s = kernel.backward_scratch(shape)) p.scratch = {new_buffer(s, false), -1};
    code.push_back(p);
  }
  e.loss_buffer = data[root].buffer;
  // Only what a backward reads is worth recomputing (the rest dies in the forward anyway).
  std::vector<bool> read_later(buffers_.size(), false);
  for (size_t t = e.forward_count; t < code.size(); t++)
    for (const Ref* r :
         {&code[t].out, &code[t].aux, &code[t].in[0], &code[t].in[1], &code[t].in[2]})
      if (r->buffer >= 0) read_later[r->buffer] = true;
  std::erase_if(e.candidates,
                [&](uint32_t c) { return !read_later[code[e.forward_of[c - P]].out.buffer]; });
  return e;
}

template <class T>
auto Program<T>::lower(const Emitted& e, const std::vector<uint32_t>& recomputed) const -> Lowered {
  Lowered l;
  l.buffers = buffers_;
  // Room for the whole program, fills included (at most one per zeroed buffer), so that it is
  // never copied to grow.
  size_t zeroed = 0;
  for (const Buffer& b : buffers_) zeroed += b.zeroed;
  std::vector<Pending> code;
  code.reserve(e.code.size() + 3 * recomputed.size() + zeroed);
  code.assign(e.code.begin(), e.code.begin() + e.forward_count);
  // Each recomputed node's forward again, writing a fresh output (and aux) buffer; every later
  // reader of the old ones reads the copies, so the old ones die with the forward.
  struct Move {
    int32_t from, to;  // an output or aux buffer and its copy
    size_t recompute;  // which of `recomputes` makes it
  };
  std::vector<Move> moves;
  std::vector<Pending> recomputes;
  auto copy_of = [&](int32_t b) {
    l.buffers.push_back({l.buffers[b].elems, l.buffers[b].zeroed, -1});
    return int32_t(l.buffers.size() - 1);
  };
  for (uint32_t node : recomputed) {
    Pending r = e.code[e.forward_of[node - first_node_]];
    r.recompute = r.backward = true;
    moves.push_back({r.out.buffer, copy_of(r.out.buffer), recomputes.size()});
    r.out.buffer = moves.back().to;
    if (r.aux.buffer >= 0) {
      moves.push_back({r.aux.buffer, copy_of(r.aux.buffer), recomputes.size()});
      r.aux.buffer = moves.back().to;
    }
    if (r.scratch.buffer >= 0) r.scratch.buffer = copy_of(r.scratch.buffer);
    recomputes.push_back(r);
  }
  // Each copy is made right before its first reader; a recomputation that reads another's
  // output has that one made first. Moves are found by buffer (one lookup a reference, not a scan
  // of every move: a budget can recompute thousands of nodes of an unrolled RNN).
  std::vector<int32_t> move_of(buffers_.size(), -1);
  for (size_t m = moves.size(); m-- > 0;) move_of[size_t(moves[m].from)] = int32_t(m);  // first
  const auto moved = [&](const Ref* r) {
    return r->buffer >= 0 && size_t(r->buffer) < move_of.size() ? move_of[size_t(r->buffer)] : -1;
  };
  std::vector<bool> placed(recomputes.size(), false);
  auto redirect = [&](Pending& p, auto&& place) {
    for (Ref* r : {&p.out, &p.aux, &p.in[0], &p.in[1], &p.in[2]})
      if (const int32_t m = moved(r); m >= 0) {
        place(moves[size_t(m)].recompute, place);
        r->buffer = moves[size_t(m)].to;
      }
  };
  auto place = [&](size_t i, auto&& self) -> void {
    if (placed[i]) return;
    placed[i] = true;
    Pending r = recomputes[i];
    for (Ref* in : {&r.in[0], &r.in[1], &r.in[2]})
      if (const int32_t m = moved(in); m >= 0) {
        self(moves[size_t(m)].recompute, self);
        in->buffer = moves[size_t(m)].to;
      }
    code.push_back(r);
  };
  for (size_t t = e.forward_count; t < e.code.size(); t++) {
    Pending p = e.code[t];
    redirect(p, place);
    code.push_back(p);
  }
  for (size_t i = 0; i < recomputes.size(); i++)
    if (!placed[i])
      fail("node %u was chosen for recomputation but no backward reads it", recomputed[i]);

  // In place: an elementwise forward writes over an operand of its size that nothing reads
  // later (not the loss, which is read after the step).
  program_ir::touches(code, l.buffers, l.first, l.last);
  for (size_t t = 0; t < e.forward_count; t++) {
    Pending& p = code[t];
    if (!op_rules<T>()[int(p.op)].elementwise) continue;
    const int32_t out = program_ir::find(l.buffers, p.out.buffer);
    for (int k = 0; k < 3; k++) {
      if (p.in[k].buffer < 0) continue;
      const int32_t in = program_ir::find(l.buffers, p.in[k].buffer);
      if (in != out && l.buffers[in].elems == l.buffers[out].elems && l.last[in] == int32_t(t) &&
          l.first[out] == int32_t(t) && out != e.loss_buffer) {
        // The merged buffer's lifetime is the union of both (what program_ir::touches() would
        // find again, without a pass over the whole program per merge: an unrolled RNN has 10^4
        // of them).
        l.buffers[out].parent = in;
        l.first[in] = std::min(l.first[in], l.first[out]);
        l.last[in] = std::max(l.last[in], l.last[out]);
        break;
      }
    }
  }

  // Each zeroed buffer's fill right before its first use, unless that use writes it fresh. The
  // fills are spliced in from the back, in the program's own array (reserved for them): an
  // unrolled RNN's program is tens of megabytes, and a second copy of it was the compile's peak.
  std::vector<std::pair<int32_t, int32_t>> fills;  // (instruction, buffer)
  for (int32_t b = 0; b < int32_t(l.buffers.size()); b++)
    if (l.buffers[b].parent < 0 && l.buffers[b].zeroed && l.first[b] >= 0) {
      Pending& p = code[l.first[b]];
      const int k = program_ir::fresh_operand(p, [&](const Ref& r) {
        return r.buffer >= 0 && program_ir::find(l.buffers, r.buffer) == b;
      });
      if (k >= 0)
        p.args.fresh |= uint8_t(1 << k);
      else
        fills.push_back({l.first[b], b});
    }
  std::sort(fills.begin(), fills.end());
  const size_t n = code.size();
  l.forward_end = e.forward_count;
  for (const auto& [t, b] : fills) l.forward_end += size_t(t) < e.forward_count;
  code.resize(n + fills.size());
  for (size_t t = n, w = code.size(), f = fills.size(); t-- > 0;) {
    code[--w] = code[t];
    for (; f > 0 && size_t(fills[f - 1].first) == t; f--) {
      const int32_t b = fills[f - 1].second;
      Pending z{program_kernels::zero_fill<T>,
                {},
                {b, -1},
                {},
                {},
                {},
                {},
                {},
                TensorOp::count,
                code[w].backward,
                code[w].node};
      z.args.rows = 1, z.args.cols = int32_t(l.buffers[b].elems);
      code[--w] = z;
    }
  }
  l.code = std::move(code);
  program_ir::touches(l.code, l.buffers, l.first, l.last);
  const int32_t loss = program_ir::find(l.buffers, e.loss_buffer);
  l.last[loss] = int32_t(l.code.size()) - 1;  // read after the step
  return l;
}

template <class T>
void Program<T>::compile(const TensorGraph<T>& g, uint32_t root, ArenaBudget limit,
                         DialectSelector<T>& dialects) {
  const uint32_t P = uint32_t(g.num_params());
  first_node_ = P;
  const uint32_t N = root + 1;
  Emitted e = emit(g, root, dialects);
  std::vector<uint32_t> recomputed;
  Lowered l;
  std::vector<int32_t> slot;
  // The activations recomputed to aim at `target` bytes (0: only what costs almost nothing).
  auto choose = [&](size_t target, size_t* reached) {
    size_t unfused_peak = 0;
    return choose_recomputation(
        e, buffers_, first_node_,
        [&](const Emitted& em, const std::vector<uint32_t>& r) { return lower(em, r); }, target,
        &unfused_peak, reached);
  };
  // The program with `r` recomputed, in waves (kept in order when `budgeted`) and fused: its
  // buffers' lifetimes in planned_.
  auto lay_out = [&](const std::vector<uint32_t>& r, bool budgeted) {
    l = lower(e, r);
    waves_.group(l, e.loss_buffer, threads_, budgeted);
    fuse(l, e.loss_buffer, limit.fuse);
    planned_ = program_ir::lifetimes(l, &slot);
  };
  size_t budget = limit.bytes, free_arena = 0;
  // Under a budget, first the arena this program plans without one, at its own threads and with
  // its own fusion: a fraction is of that arena (so a budget never exceeds the plan it would have
  // had, whatever the thread count), and a budget no plan meets is told against it. A fraction
  // so small it rounds to no bytes is still a budget (one no plan meets), never none.
  if (limit.bytes > 0 || limit.fraction > 0) {
    size_t reached = 0;
    lay_out(limit.free_recomputation ? choose(0, &reached) : std::vector<uint32_t>{}, false);
    free_arena = plan_memory(planned_, waves_.time_slots(l)).arena_bytes;
    if (limit.fraction > 0)
      budget = std::max<size_t>(1, size_t(limit.fraction * double(free_arena)));
  }
  budget_bytes_ = budget;
  // The choice aims at the lower bound; placement can need a little more. Then aim lower by
  // the excess and choose again (a few times at most), or give up with the smallest arena
  // placed, which as a budget is met.
  size_t target = budget, smallest = SIZE_MAX;
  if (given_) {
    recomputed = given_->recomputed;
    for (uint32_t c : recomputed)
      if (std::find(e.candidates.begin(), e.candidates.end(), c) == e.candidates.end())
        throw PlanMismatch{"node " + std::to_string(c) + " cannot be recomputed"};
    std::vector<uint32_t> sorted = recomputed;
    std::sort(sorted.begin(), sorted.end());
    if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end())
      throw PlanMismatch{"a node recomputed twice"};
    lay_out(recomputed, budget_bytes_ > 0);
    if (given_->offsets.size() != planned_.size())
      throw PlanMismatch{std::to_string(given_->offsets.size()) + " buffers placed for " +
                         std::to_string(planned_.size())};
    // Nothing read from a file is trusted: every offset is checked against the lifetimes
    // made here, and the bounds are computed again rather than read.
    plan_ = MemoryPlan{};
    plan_.arena_bytes = given_->plan.arena_bytes;
    for (size_t b = 0; b < planned_.size(); b++) {
      planned_[b].bytes = plan_aligned(planned_[b].bytes);
      planned_[b].offset = given_->offsets[b];
      plan_.unplanned_bytes += planned_[b].bytes;
    }
    // Any placement fits in the buffers side by side; a larger arena is not a plan's.
    if (plan_.arena_bytes > plan_.unplanned_bytes)
      throw PlanMismatch{"an arena of " + std::to_string(plan_.arena_bytes) +
                         " bytes where its buffers side by side take " +
                         std::to_string(plan_.unplanned_bytes)};
    if (std::string why = plan_placement_error(planned_, plan_.arena_bytes); !why.empty())
      throw PlanMismatch{why};
    plan_.lower_bound_bytes = plan_memory_bound(planned_, waves_.time_slots(l));
    if (budget && plan_.arena_bytes > budget)
      throw PlanMismatch{"an arena of " + std::to_string(plan_.arena_bytes) +
                         " bytes over the budget of " + std::to_string(budget)};
  }
  for (int attempt = 0; !given_; attempt++) {
    size_t reached = 0;
    if (budget || limit.free_recomputation) recomputed = choose(target, &reached);
    lay_out(recomputed, budget_bytes_ > 0);
    plan_ = plan_memory(planned_, waves_.time_slots(l));
    smallest = std::min(smallest, plan_.arena_bytes);
    if (!budget || plan_.arena_bytes <= budget) break;
    if (reached > target || attempt == 8 || plan_.arena_bytes - budget >= target)
      throw BudgetError{budget, smallest, free_arena};
    target -= plan_.arena_bytes - budget;
  }
  plan_.recomputed_nodes = recomputed.size();
  recomputed_ = recomputed;
  std::vector<Pending>().swap(e.code);  // lowered: its memory is the program's now
  arena_.reset(
      static_cast<T*>(std::aligned_alloc(kPlanAlign, std::max(plan_.arena_bytes, kPlanAlign))));
  if (!arena_) throw AllocationFailed(plan_.arena_bytes, "the compiled program's arena");

  auto resolve = [&](const Ref& r) -> T* {
    if (r.buffer < 0) return r.outside < 0 ? nullptr : const_cast<T*>(outside_[r.outside]);
    return arena_.get() + planned_[slot[program_ir::find(l.buffers, r.buffer)]].offset / sizeof(T);
  };
  code_.clear();
  code_.reserve(l.code.size());
  forward_at_.assign(N - P, -1), backward_at_.assign(N - P, -1);
  forward_end_ = l.forward_end;
  for (Pending& p : l.code) {
    OpArgs<T> a = program_ir::args_of<T>(p.args);
    a.out = resolve(p.out), a.dout = resolve(p.dout), a.aux = resolve(p.aux);
    a.scratch = resolve(p.scratch);
    for (int k = 0; k < 3; k++) a.in[k] = resolve(p.in[k]), a.din[k] = resolve(p.din[k]);
    if (p.op != TensorOp::count && !p.recompute)  // not a fill, the seed or a recomputation
      (p.backward ? backward_at_ : forward_at_)[p.node - P] = int32_t(code_.size());
    code_.push_back({p.run, a});
  }
  loss_ =
      arena_.get() + planned_[slot[program_ir::find(l.buffers, e.loss_buffer)]].offset / sizeof(T);
  find_param_writes(g, l.code);
  if (given_ && given_->instructions != code_.size())
    throw PlanMismatch{std::to_string(code_.size()) + " instructions where the plan made " +
                       std::to_string(given_->instructions)};
}

extern template class Program<float>;
extern template class Program<double>;

}  // namespace bp
