// engine/core/op_args.h: what one application of a tensor op is (engine/core/ops.h has the ops):
// the closed set of ops and their names, an OpArgs (every pointer, shape and argument of one
// call), an OpRule (an op's forward and backward and the facts a planner needs), and the few
// helpers every kernel shares. A kernel table (engine/dialects/) needs this file, not the ops.
#pragma once

#include <array>
#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <type_traits>

#include "engine/kernels/adamw_step.h"
#include "engine/kernels/isa_namespace.h"

namespace bp {

enum class TensorOp : uint8_t {
  leaf,
  view,
  matmul,
  linear,
  add,
  mul,
  tanh,
  relu,
  gelu,
  exp,
  log,
  embedding,
  sum,
  mean,
  layernorm,
  softmax,
  attention,
  cross_entropy,
  sigmoid,
  logsumexp,
  sum_rows,
  sub,
  div,
  log_softmax,
  nll,
  transpose,
  count
};
inline constexpr const char* tensor_op_names[] = {
    "leaf",      "view",    "matmul",      "linear",        "add",       "mul",       "tanh",
    "relu",      "gelu",    "exp",         "log",           "embedding", "sum",       "mean",
    "layernorm", "softmax", "attention",   "cross_entropy", "sigmoid",   "logsumexp", "sum_rows",
    "sub",       "div",     "log_softmax", "nll",           "transpose"};
static_assert(std::size(tensor_op_names) == size_t(TensorOp::count), "name every TensorOp");
// The ops whose node holds indices (Node::index) besides its operands: a step binds its own.
inline constexpr bool tensor_op_takes_indices(TensorOp op) {
  return op == TensorOp::embedding || op == TensorOp::cross_entropy || op == TensorOp::nll;
}
// The tensor operands an op's node reads (its in[0..n)); the others read one, a leaf none.
inline constexpr int tensor_op_operands(TensorOp op) {
  switch (op) {
    case TensorOp::leaf: return 0;
    case TensorOp::matmul:
    case TensorOp::add:
    case TensorOp::mul:
    case TensorOp::sub:
    case TensorOp::div: return 2;
    case TensorOp::linear:
    case TensorOp::layernorm: return 3;
    default: return 1;
  }
}

// Misuse of the engine's API stops the program with one line, "<where>: <what>" (every class's
// fail or refuse formats its message and ends here).
[[noreturn]] inline void engine_vfail(const char* where, const char* format, va_list args) {
  std::fprintf(stderr, "%s: ", where);
  std::vfprintf(stderr, format, args);
  std::fputc('\n', stderr);
  std::abort();
}

// The precision an op runs in: float32, or under mixed precision bfloat16 operands for the ops
// engine/core/ops_bf16.h's table names (float32 accumulation; the rest stays float32).
enum class Precision : uint8_t { fp32, bf16 };
inline const char* precision_name(Precision p) { return p == Precision::bf16 ? "bf16" : "fp32"; }

// Indices (token ids, targets) live outside the graph: the caller owns them for the step.
struct IndexSpan {
  const int32_t* data = nullptr;
  int32_t size = 0;
};

// One application of an op. A null gradient pointer means nothing upstream needs it.
template <class T>
struct OpArgs {
  T* out = nullptr;   // (rows, cols)
  T* dout = nullptr;  // (rows, cols), null when no operand needs a gradient
  T* aux = nullptr;   // what backward needs that forward had (aux_elems)
  const T* in[3] = {};
  T* din[3] = {};
  int32_t rows = 0, cols = 0;
  int32_t in_rows[3] = {}, in_cols[3] = {};
  int32_t arg[3] = {};   // matmul: transpose b; linear: relu; attention: B, T, H
  IndexSpan index;       // embedding: ids; cross_entropy: targets
  T* scratch = nullptr;  // forward_scratch or backward_scratch elements, uninitialised
  // Under Precision::bf16 (engine/core/ops_bf16.h): bit k of half_given says that half[k] holds
  // in[k] rounded to bfloat16 (a parameter's copy, which the optimizer writes).
  Precision precision = Precision::fp32;
  const uint16_t* half[2] = {};
  uint8_t half_given = 0;
  // Bit k: din[k] is uninitialised and is written, not added to. The compiled mode sets it on a
  // gradient's first writer instead of filling the gradient with zeros first. A kernel given it
  // computes what adding to zero gives, bit for bit: where it would load din[k] it takes 0.
  uint8_t fresh = 0;
};

// What a backward reads besides its own output gradient, for liveness.
enum : uint8_t { kReadsIn0 = 1, kReadsIn1 = 2, kReadsIn2 = 4, kReadsOut = 8, kReadsAux = 16 };

template <class T>
struct OpRule {
  void (*forward)(const OpArgs<T>&);   // null: no work (a leaf, a view)
  void (*backward)(const OpArgs<T>&);  // null: no work
  size_t (*aux_elems)(const OpArgs<T>&);
  size_t (*forward_scratch)(const OpArgs<T>&);
  size_t (*backward_scratch)(const OpArgs<T>&);
  uint8_t backward_reads;
  bool forward_accumulates;    // adds into out: out must start at zero
  bool elementwise;            // out[i] from operands' element i only: may overwrite operand 0
  uint8_t backward_fresh = 0;  // the din[k] (bit k) backward can write fresh (OpArgs::fresh)
  // Each output row from the same row of its operands alone, forward and backward (a row-wise
  // reduction, softmax): like an elementwise op, it may run on any range of rows by itself.
  bool row_wise = false;
};

// The ops' helpers, in the kernels' namespace (engine/kernels/isa_namespace.h) with them.
BP_KERNELS_BEGIN
namespace ops {

template <class T>
size_t none(const OpArgs<T>&) {
  return 0;
}
template <class T>
size_t numel(const OpArgs<T>& a) {
  return size_t(a.rows) * a.cols;
}
// PyTorch's relu: NaN and -0 pass through, and a NaN output passes its gradient, so a NaN is
// never turned into a finite 0 that the check cannot see.
template <class T>
inline T relu_of(T x) {
  return x < T(0) ? T(0) : x;
}
template <class T>
inline bool relu_passes(T out) {
  return !(out <= T(0));
}

}  // namespace ops
BP_KERNELS_END

// ---- the op tables ----
// Every op's rule in TensorOp's order ({forward, backward, aux, forward scratch, backward scratch,
// what backward reads, forward accumulates, elementwise, operands backward writes fresh,
// row-wise}), for float and double, and float's under Precision::bf16 (engine/core/ops_bf16.h:
// the products' rules replaced). The tables are made once per instruction-set unit, from
// engine/core/op_table.h: engine/core/ops.cc at the build's baseline, engine/core/ops_avx512.cc
// above it; op_tables() gives those of the level the process runs (engine/runtime/isa.h), chosen
// at its first call. A translation unit that reads them compiles none of the kernels they point to
// (dev/notes.md, "The engine compiled once").
template <class T>
using OpRuleTable = std::array<OpRule<T>, size_t(TensorOp::count)>;

// The buffers of an update, each `size` elements (moments null until AdamW's first step; the
// values' bf16 copy null unless a bf16 program reads it).
template <class T>
struct FlatView {
  T *values = nullptr, *grads = nullptr, *m = nullptr, *v = nullptr;
  uint16_t* half = nullptr;
};
// The optimizer's passes over n elements of the flat buffers (engine/core/optimizer_passes.h).
template <class T>
struct OptimizerPasses {
  bool (*finite)(const T* grads, size_t n);
  void (*sgd)(const FlatView<T>& f, T lr, size_t n);
  void (*adamw)(const FlatView<T>& f, const AdamWStep<T>& k, size_t n);
  void (*stream)(const FlatView<T>& f, size_t n);
};

struct OpTables {
  const char* isa;  // the level the unit is compiled for
  const OpRuleTable<float>* f32;
  const OpRuleTable<double>* f64;
  const OpRuleTable<float>* bf16;
  const OptimizerPasses<float>* optimizer_f32;
  const OptimizerPasses<double>* optimizer_f64;
};
const OpTables& op_tables();  // engine/core/ops.cc
template <class T>
const OpRuleTable<T>& op_rules() {
  if constexpr (std::is_same_v<T, float>)
    return *op_tables().f32;
  else
    return *op_tables().f64;
}
inline const OpRuleTable<float>& op_rules_bf16() { return *op_tables().bf16; }
template <class T>
const OptimizerPasses<T>& optimizer_passes() {
  if constexpr (std::is_same_v<T, float>)
    return *op_tables().optimizer_f32;
  else
    return *op_tables().optimizer_f64;
}
template <class T>
const OpRuleTable<T>& op_rules_for(Precision p) {
  if constexpr (std::is_same_v<T, float>)
    if (p == Precision::bf16) return op_rules_bf16();
  return op_rules<T>();
}

}  // namespace bp
