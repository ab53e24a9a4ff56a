// engine/compiled/lowered.h: a compiled program before its memory is placed, what the program
// (engine/compiled/program.h), its schedule (engine/compiled/waves.h) and its recomputation
// (engine/compiled/recompute.h) pass between them.
//
// An instruction is Pending: its kernel, its shapes, and for each pointer a Ref, a buffer of the
// program (by index) or memory outside the arena (a parameter, a constant). Emitted is the step as
// captured: forward, the loss's seed, backward, and the nodes whose outputs may be recomputed.
// Lowered is the program in its final order (recomputations placed, ops in place merged into
// their operand's buffer, zero fills before first uses), with each buffer's first and last
// instruction: the planner's input (lifetimes).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "engine/compiled/planner.h"
#include "engine/core/ops.h"

namespace bp {
// The program's own instructions besides the kernels: a buffer's zero fill, the loss's seed.
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
}  // namespace bp

namespace bp::program_ir {

// Where a pointer of an instruction goes: a planned buffer, or memory outside the arena
// (parameters, constants: an index into the program's table of them), or nowhere.
template <class T>
struct Ref {
  int32_t buffer = -1;
  int32_t outside = -1;
  bool present() const { return buffer >= 0 || outside >= 0; }
};
// An op's shapes and arguments: OpArgs without the pointers that placement gives it, so that
// an unrolled RNN's half a million pending instructions take a third of the bytes.
struct OpShape {
  int32_t rows = 0, cols = 0;
  int32_t in_rows[3] = {}, in_cols[3] = {};
  int32_t arg[3] = {};
  IndexSpan index;
  uint8_t fresh = 0;
  Precision precision = Precision::fp32;
  uint8_t half_given = 0;
  const uint16_t* half[2] = {};  // parameters' bf16 copies (OpArgs::half): fixed addresses
};
template <class T>
OpShape shape_of(const OpArgs<T>& a) {
  OpShape s;
  s.rows = a.rows, s.cols = a.cols, s.index = a.index, s.fresh = a.fresh;
  s.precision = a.precision, s.half_given = a.half_given, s.half[0] = a.half[0],
  s.half[1] = a.half[1];
  for (int k = 0; k < 3; k++)
    s.in_rows[k] = a.in_rows[k], s.in_cols[k] = a.in_cols[k], s.arg[k] = a.arg[k];
  return s;
}
template <class T>
OpArgs<T> args_of(const OpShape& s) {  // null pointers but the parameters' bf16 copies
  OpArgs<T> a;
  a.rows = s.rows, a.cols = s.cols, a.index = s.index, a.fresh = s.fresh;
  a.precision = s.precision, a.half_given = s.half_given, a.half[0] = s.half[0],
  a.half[1] = s.half[1];
  for (int k = 0; k < 3; k++)
    a.in_rows[k] = s.in_rows[k], a.in_cols[k] = s.in_cols[k], a.arg[k] = s.arg[k];
  return a;
}
struct Buffer {
  size_t elems;
  bool zeroed;          // accumulated into: filled with zeros right before its first use
  int32_t parent = -1;  // merged into another buffer (an op in place)
};
template <class T>
struct Pending {
  void (*run)(const OpArgs<T>&);
  OpShape args;  // pointers come from the refs
  Ref<T> out, dout, aux, in[3], din[3], scratch;
  TensorOp op;
  bool backward;
  uint32_t node;
  bool recompute = false;  // a forward again, right before the backward that needs its output
  uint8_t fresh_ok = 0;    // the din[k] (bit k) the kernel's backward can write fresh
};
template <class T, class F>
void for_each_ref(const Pending<T>& p, F&& f) {
  f(p.out), f(p.dout), f(p.aux), f(p.scratch);
  for (int k = 0; k < 3; k++) f(p.in[k]), f(p.din[k]);
}
// The operand k through which `p` may write the gradient `is_it` picks out fresh
// (OpArgs::fresh), or -1: p's kernel can write din[k] so, and p touches that memory through
// din[k] alone (add(x, x) adds both halves into one).
template <class T, class F>
int fresh_operand(const Pending<T>& p, F&& is_it) {
  int refs = 0, operand = -1;
  for_each_ref(p, [&](const Ref<T>& r) { refs += is_it(r); });
  for (int k = 0; k < 3; k++)
    if (is_it(p.din[k])) operand = k;
  return refs == 1 && operand >= 0 && (p.fresh_ok >> operand & 1) ? operand : -1;
}
// The buffer `b` was merged into (itself if none).
inline int32_t find(const std::vector<Buffer>& buffers, int32_t b) {
  while (buffers[b].parent >= 0) b = buffers[b].parent;
  return b;
}

// The step as emitted: forward, seed, backward; each node's buffers; what may be recomputed.
template <class T>
struct Emitted {
  std::vector<Pending<T>> code;
  size_t forward_count = 0;
  int32_t loss_buffer = -1;
  std::vector<uint32_t> candidates;  // nodes whose output may be dropped and recomputed
  std::vector<int32_t> forward_of;   // node - P -> its forward in code
  std::vector<double> cost;          // node - P -> FLOPs of its forward (a model, for choosing)
};

// The program in its final order (Program::lower), its buffers merged where ops run in place.
template <class T>
struct Lowered {
  std::vector<Pending<T>> code;
  std::vector<Buffer> buffers;
  std::vector<int32_t> first, last;  // per buffer: the first and last instruction (or wave)
  size_t forward_end = 0;
};

// The bytes an instruction moves, as a model from its shapes: each operand it reads once, what it
// writes once, a gradient it adds into twice (read and written; once where it is written fresh),
// scratch not at all. What fusion saves is this sum's fall (the study fusion).
template <class T>
size_t bytes_moved(const Pending<T>& p, const std::vector<Buffer>& buffers) {
  const OpShape& a = p.args;
  const size_t out = size_t(a.rows) * a.cols;
  size_t elems = 0;
  for (int k = 0; k < 3; k++) {
    const size_t in = size_t(a.in_rows[k]) * a.in_cols[k];
    if (p.in[k].present()) elems += in;
    if (p.din[k].present()) elems += (a.fresh >> k & 1) ? in : 2 * in;
  }
  if (p.out.present()) elems += out;
  if (p.dout.present()) elems += out;
  if (p.aux.buffer >= 0) elems += buffers[p.aux.buffer].elems;
  return elems * sizeof(T);
}

// first[b], last[b]: the first and last instruction touching buffer b (merged ones: their root).
template <class T>
void touches(const std::vector<Pending<T>>& code, const std::vector<Buffer>& buffers,
             std::vector<int32_t>& first, std::vector<int32_t>& last) {
  first.assign(buffers.size(), -1), last.assign(buffers.size(), -1);
  for (int32_t t = 0; t < int32_t(code.size()); t++)
    for_each_ref(code[t], [&](const Ref<T>& r) {
      if (r.buffer < 0) return;
      const int32_t b = find(buffers, r.buffer);
      if (first[b] < 0) first[b] = t;
      last[b] = t;
    });
}

// Planner input: every root buffer in use, with its lifetime; slot[b]: its index there.
template <class T>
std::vector<PlannedBuffer> lifetimes(const Lowered<T>& l, std::vector<int32_t>* slot) {
  std::vector<PlannedBuffer> planned;
  if (slot) slot->assign(l.buffers.size(), -1);
  for (int32_t b = 0; b < int32_t(l.buffers.size()); b++) {
    if (l.buffers[b].parent >= 0 || l.first[b] < 0) continue;
    if (slot) (*slot)[b] = int32_t(planned.size());
    planned.push_back({l.buffers[b].elems * sizeof(T), l.first[b], l.last[b]});
  }
  return planned;
}
// The most bytes live at one instruction (the planner's lower bound); `mean_live`, if given,
// the bytes live on average.
template <class T>
size_t lower_bound_of(const Lowered<T>& l, double* mean_live = nullptr) {
  const std::vector<PlannedBuffer> b = lifetimes(l, nullptr);
  return plan_memory_bound(b, int32_t(l.code.size()), mean_live);
}

}  // namespace bp::program_ir
