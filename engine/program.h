// engine/program.h: a captured training step compiled into a flat program over one planned arena.
//
// Input: a record-only TensorGraph (engine/tensor.h) holding one step's ops up to its loss. The
// program is the whole step: every op's forward in creation order, then the backward generated
// from the same rules (engine/ops.h) in reverse order, then the optimizer update over every
// parameter. Each instruction is one kernel call over an OpArgs whose pointers were resolved at
// compile time: running it is a loop of indirect calls, with no graph, no allocation and no
// branch on op kinds.
//
// Memory (engine/planner.h): every activation, gradient, saved aux and scratch buffer is a buffer
// with a lifetime over the program; buffers that are never live together share bytes. An
// activation lives from its forward to its last reader (a consumer's forward, or a backward that
// reads it: the rules say which); its gradient from its first accumulation to its own backward.
// Elementwise ops write over an operand that nothing reads afterwards (residual adds, ReLU of a
// dead input), so their output takes no buffer of its own. Gradients are zeroed right before
// their first accumulation, as the eager tape's zeroed allocations are, so the arithmetic is the
// eager engine's, operation for operation: gradients come out bitwise equal (tested).
//
// Inputs that change between steps are slots: a constant operand (a batch made at setup) and the
// indices of embedding and cross_entropy are patched into the instructions that read them before
// each step (bind_constant, bind_index). Shapes never change: engine/compiled.h refuses a step
// whose ops or shapes differ from the captured ones.
//
// Not here: capture and the replay guard (engine/compiled.h), kernel choice (every instruction
// runs the op's rule).
// Tests: engine/compiled_test.cc.
#pragma once

#include <algorithm>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <vector>

#include "engine/ops.h"
#include "engine/planner.h"
#include "engine/tensor.h"

namespace bp {

template <class T>
struct Instr {
  void (*run)(const OpArgs<T>&);
  OpArgs<T> args;
  TensorOp op;  // what it came from (TensorOp::count: a zero fill or the loss seed)
  bool backward;
};

// One parameter's optimizer update, pointers resolved (moments null for SGD).
template <class T>
struct ParamUpdate {
  T* param;
  const T* grad;
  T *m, *v;
  size_t n;
};

namespace program_kernels {
template <class T>
void zero_fill(const OpArgs<T>& a) {  // out (rows * cols) = 0
  std::memset(a.out, 0, size_t(a.rows) * a.cols * sizeof(T));
}
template <class T>
void seed_loss(const OpArgs<T>& a) {  // d(loss)/d(loss) = 1, added as the eager tape adds it
  a.out[0] += T(1);
}
}  // namespace program_kernels

template <class T>
class Program {
 public:
  Program() = default;
  Program(const Program&) = delete;
  Program& operator=(const Program&) = delete;
  Program(Program&&) = default;
  Program& operator=(Program&&) = default;

  // Compiles nodes [num_params, root] of the record-only graph `g`; root is the loss (1, 1).
  Program(const TensorGraph<T>& g, uint32_t root) { compile(g, root); }

  void forward() const {
    for (size_t i = 0; i < forward_end_; i++) code_[i].run(code_[i].args);
  }
  void backward() const {
    for (size_t i = forward_end_; i < code_.size(); i++) code_[i].run(code_[i].args);
  }
  void sgd_update_all(T lr) const {
    for (const ParamUpdate<T>& u : updates_) sgd_update(u.param, u.grad, lr, u.n);
  }
  void adamw_update_all(const AdamWStep<T>& k) const {
    for (const ParamUpdate<T>& u : updates_) adamw_update(u.param, u.grad, u.m, u.v, k, u.n);
  }
  // The update segment: every trained parameter of g (moments from g once AdamW allocated them).
  void set_updates(const TensorGraph<T>& g) {
    updates_.clear();
    for (size_t i = 0; i < g.num_params(); i++) {
      const auto& p = g.node_at(i);
      if (p.grad)
        updates_.push_back({p.data, p.grad, g.adam_m(i), g.adam_v(i), size_t(p.rows) * p.cols});
    }
  }
  bool has_updates() const { return !updates_.empty(); }

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
  const std::vector<PlannedBuffer>& buffers() const { return planned_; }  // placed, for the tests
  size_t num_instructions() const { return code_.size(); }
  size_t forward_instructions() const { return forward_end_; }
  const std::vector<Instr<T>>& code() const { return code_; }

 private:
  // Where a pointer of an instruction goes: a planned buffer, or memory outside the arena
  // (parameters, constants), or nowhere.
  struct Ref {
    int32_t buffer = -1;
    const T* outside = nullptr;
  };
  struct Buffer {
    size_t elems;
    bool zeroed;          // accumulated into: filled with zeros right before its first use
    int32_t parent = -1;  // merged into another buffer (an op in place)
  };
  struct Pending {
    void (*run)(const OpArgs<T>&);
    OpArgs<T> args;  // shapes and op arguments; pointers come from the refs
    Ref out, dout, aux, in[3], din[3], scratch;
    TensorOp op;
    bool backward;
    uint32_t node;
  };
  template <class F>
  static void for_each_ref(Pending& p, F&& f) {
    f(p.out), f(p.dout), f(p.aux), f(p.scratch);
    for (int k = 0; k < 3; k++) f(p.in[k]), f(p.din[k]);
  }

  int32_t find(int32_t b) const {
    while (buffers_[b].parent >= 0) b = buffers_[b].parent;
    return b;
  }
  int32_t new_buffer(size_t elems, bool zeroed) {
    buffers_.push_back({elems, zeroed, -1});
    return int32_t(buffers_.size() - 1);
  }

  void compile(const TensorGraph<T>& g, uint32_t root) {
    const uint32_t P = uint32_t(g.num_params());
    first_node_ = P;
    const uint32_t N = root + 1;
    // Where each node's value and gradient are: parameters and constants outside, the step's
    // nodes in buffers, a view wherever its operand is.
    std::vector<Ref> data(N), grad(N);
    std::vector<int32_t> aux(N, -1);
    for (uint32_t j = 0; j < P; j++)
      data[j] = {-1, g.node_at(j).data}, grad[j] = {-1, g.node_at(j).grad};
    auto data_ref = [&](uint32_t j) { return data[j]; };
    auto grad_ref = [&](uint32_t j) { return grad[j]; };
    std::vector<Pending> code;
    std::vector<int32_t> forward_of(N, -1), backward_of(N, -1);

    // Forward, in creation order: every node gets its buffers here (a view its operand's).
    for (uint32_t i = P; i < N; i++) {
      const auto& n = g.node_at(i);
      const OpRule<T>& rule = op_rules<T>[int(n.op)];
      const uint32_t x = n.in[0];
      if (n.op == TensorOp::view) {
        data[i] = data[x], grad[i] = grad[x];
        continue;
      }
      if (n.op == TensorOp::leaf) fail("node %u is an input leaf inside the step", i);
      data[i] = {new_buffer(numel(n), rule.forward_accumulates), nullptr};
      if (n.needs_grad) grad[i] = {new_buffer(numel(n), true), nullptr};
      Pending p{rule.forward, shapes_of(g, n), {}, {}, {}, {}, {}, {}, n.op, false, i};
      if (const size_t a = rule.aux_elems(p.args)) aux[i] = new_buffer(a, false);
      p.out = data_ref(i), p.aux = Ref{aux[i], nullptr};
      for (int k = 0; k < TensorGraph<T>::operand_count(n.op); k++) p.in[k] = data_ref(n.in[k]);
      if (const size_t s = rule.forward_scratch(p.args))
        p.scratch = {new_buffer(s, false), nullptr};
      forward_of[i] = int32_t(code.size());
      code.push_back(p);
    }
    const size_t forward_count = code.size();

    // Backward, in reverse creation order, as the eager tape walks it.
    if (grad[root].buffer < 0)
      fail(
          "the loss (node %u) is no op of the step with a gradient (a parameter, or a view of one)",
          root);
    code.push_back({program_kernels::seed_loss<T>,
                    {},
                    grad_ref(root),
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
      const OpRule<T>& rule = op_rules<T>[int(n.op)];
      if (!n.needs_grad || !rule.backward) continue;
      Pending p{rule.backward, shapes_of(g, n), {}, {}, {}, {}, {}, {}, n.op, true, i};
      p.dout = grad_ref(i);
      // Only what the rule reads: a pointer left null faults at once if the table is wrong.
      if (rule.backward_reads & kReadsOut) p.out = data_ref(i);
      if (rule.backward_reads & kReadsAux) p.aux = Ref{aux[i], nullptr};
      for (int k = 0; k < TensorGraph<T>::operand_count(n.op); k++) {
        if (rule.backward_reads & (kReadsIn0 << k)) p.in[k] = data_ref(n.in[k]);
        p.din[k] = grad_ref(n.in[k]);
      }
      if (const size_t s = rule.backward_scratch(p.args))
        p.scratch = {new_buffer(s, false), nullptr};
      backward_of[i] = int32_t(code.size());
      code.push_back(p);
    }

    // In place: an elementwise op writes over an operand of its size that nothing reads later.
    std::vector<int32_t> first, last;
    touches(code, first, last);
    const int32_t loss_buffer = data[root].buffer;
    for (size_t t = 0; t < forward_count; t++) {
      Pending& p = code[t];
      if (!op_rules<T>[int(p.op)].elementwise) continue;
      const int32_t out = find(p.out.buffer);
      for (int k = 0; k < 3; k++) {
        if (p.in[k].buffer < 0) continue;
        const int32_t in = find(p.in[k].buffer);
        if (in != out && buffers_[in].elems == buffers_[out].elems && last[in] == int32_t(t) &&
            first[out] == int32_t(t) && out != loss_buffer) {
          buffers_[out].parent = in;
          touches(code, first, last);
          break;
        }
      }
    }

    // The final order: each zeroed buffer's fill right before its first use.
    std::vector<std::vector<int32_t>> fills(code.size());
    for (int32_t b = 0; b < int32_t(buffers_.size()); b++)
      if (buffers_[b].parent < 0 && buffers_[b].zeroed && first[b] >= 0)
        fills[first[b]].push_back(b);
    std::vector<Pending> ordered;
    forward_at_.assign(N - P, -1), backward_at_.assign(N - P, -1);
    for (size_t t = 0; t < code.size(); t++) {
      if (t == forward_count) forward_end_ = ordered.size();
      for (int32_t b : fills[t]) {
        Pending z{program_kernels::zero_fill<T>,
                  {},
                  {b, nullptr},
                  {},
                  {},
                  {},
                  {},
                  {},
                  TensorOp::count,
                  code[t].backward,
                  code[t].node};
        z.args.rows = 1, z.args.cols = int32_t(buffers_[b].elems);
        ordered.push_back(z);
      }
      if (code[t].op != TensorOp::count)  // not the loss seed
        (code[t].backward ? backward_at_ : forward_at_)[code[t].node - P] = int32_t(ordered.size());
      ordered.push_back(code[t]);
    }
    if (forward_count == code.size()) forward_end_ = ordered.size();

    // Plan: lifetimes over the final order; the loss lives to the end (read after the update).
    touches(ordered, first, last);
    std::vector<PlannedBuffer>& planned = planned_;
    planned.clear();
    std::vector<int32_t> slot(buffers_.size(), -1);
    for (int32_t b = 0; b < int32_t(buffers_.size()); b++) {
      if (buffers_[b].parent >= 0 || first[b] < 0) continue;
      if (b == find(loss_buffer)) last[b] = int32_t(ordered.size()) - 1;
      slot[b] = int32_t(planned.size());
      planned.push_back({buffers_[b].elems * sizeof(T), first[b], last[b]});
    }
    plan_ = plan_memory(planned, int32_t(ordered.size()));
    arena_.reset(
        static_cast<T*>(std::aligned_alloc(kPlanAlign, std::max(plan_.arena_bytes, kPlanAlign))));
    if (!arena_) throw std::bad_alloc();

    auto resolve = [&](const Ref& r) -> T* {
      if (r.buffer < 0) return const_cast<T*>(r.outside);
      return arena_.get() + planned[slot[find(r.buffer)]].offset / sizeof(T);
    };
    code_.clear();
    for (Pending& p : ordered) {
      OpArgs<T> a = p.args;
      a.out = resolve(p.out), a.dout = resolve(p.dout), a.aux = resolve(p.aux);
      a.scratch = resolve(p.scratch);
      for (int k = 0; k < 3; k++) a.in[k] = resolve(p.in[k]), a.din[k] = resolve(p.din[k]);
      code_.push_back({p.run, a, p.op, p.backward});
    }
    loss_ = resolve(data_ref(root));
  }

  // first[b], last[b]: the first and last instruction touching buffer b (merged ones: their root).
  void touches(std::vector<Pending>& code, std::vector<int32_t>& first,
               std::vector<int32_t>& last) const {
    first.assign(buffers_.size(), -1), last.assign(buffers_.size(), -1);
    for (int32_t t = 0; t < int32_t(code.size()); t++)
      for_each_ref(code[t], [&](const Ref& r) {
        if (r.buffer < 0) return;
        const int32_t b = find(r.buffer);
        if (first[b] < 0) first[b] = t;
        last[b] = t;
      });
  }

  static size_t numel(const typename TensorGraph<T>::Node& n) { return size_t(n.rows) * n.cols; }
  // An op's shapes and arguments with every pointer cleared: the refs fill them.
  static OpArgs<T> shapes_of(const TensorGraph<T>& g, const typename TensorGraph<T>::Node& n) {
    OpArgs<T> a = g.args_of(n);
    a.out = a.dout = a.aux = a.scratch = nullptr;
    for (int k = 0; k < 3; k++) a.in[k] = nullptr, a.din[k] = nullptr;
    return a;
  }
  [[noreturn]] __attribute__((format(printf, 1, 2))) static void fail(const char* format, ...) {
    std::fprintf(stderr, "bp::Program: ");
    va_list args;
    va_start(args, format);
    std::vfprintf(stderr, format, args);
    va_end(args);
    std::fputc('\n', stderr);
    std::abort();
  }

  struct FreeDeleter {
    void operator()(T* p) const { std::free(p); }
  };
  std::vector<Buffer> buffers_;
  std::vector<PlannedBuffer> planned_;
  std::vector<Instr<T>> code_;
  size_t forward_end_ = 0;
  std::vector<int32_t> forward_at_, backward_at_;  // node - first_node_ -> its instruction
  uint32_t first_node_ = 0;
  std::vector<ParamUpdate<T>> updates_;
  std::unique_ptr<T, FreeDeleter> arena_;
  T* loss_ = nullptr;
  MemoryPlan plan_;
};

}  // namespace bp
