// engine/core/ops_bf16.h: mixed precision's op table (RAF's AutoCast; torch.autocast's lists for
// bfloat16 on a CPU) and the ops whose arithmetic it changes.
//
// Under Precision::bf16 the products, matmul and linear, take bfloat16 operands and accumulate in
// float32 (engine/kernels/bf16.h), forward and backward. Every other op computes in float32
// (layernorm, softmax, cross-entropy, exp, log, the reductions, the elementwise ops, and
// attention, whose heads of 4 to 32 channels have no product a bf16 kernel could speed up), as do
// the parameters (master weights), every gradient and the optimizer's state. What a backward
// reads of the forward is bf16, so that no float32 activation lives from the forward to the
// backward (the compiled mode's planner sees it through backward_reads and frees it at its last
// forward reader):
// - a product's activation operand is rounded to bf16 once, in the forward, into its aux, which
//   both the product and its backward read; linear with ReLU keeps a bit per output for its
//   backward's mask;
// - a parameter operand is read from its bf16 copy (OpArgs::half), written by the optimizer's pass
//   with each update (engine/core/optimizer.h), so no step converts a weight. Without one (a
//   product of two activations, a weight that is not a parameter) aux holds its copy too;
// - any other op whose backward reads its input or its output (saved_in_bf16) saves that in bf16
//   in its aux and widens it into scratch for the float32 backward.
// The output gradient is rounded to bf16 in the backward's scratch, once for both products.
// Tests: engine/core/ops_bf16_test.cc.
#pragma once

#include <cstdint>
#include <cstring>

#include "engine/core/ops.h"
#include "engine/kernels/bf16.h"

namespace bp {

// The table: which ops run on bf16 operands under Precision::bf16 (the rest in float32).
constexpr bool runs_bf16(TensorOp op) { return op == TensorOp::matmul || op == TensorOp::linear; }
// Which float32 activation an op's backward reads, saved in bf16 under Precision::bf16 (its
// arithmetic stays float32): every op that reads one, its input or its output; attention its
// probabilities too. Not mul and logsumexp (two each), nor cross_entropy's probabilities (its
// logits' gradient comes from them alone) or layernorm's means and deviations (a row each).
enum class SavedBf16 : uint8_t { none, input, output };
constexpr SavedBf16 saved_in_bf16(TensorOp op) {
  switch (op) {
    case TensorOp::gelu:
    case TensorOp::log:
    case TensorOp::layernorm:
    case TensorOp::attention: return SavedBf16::input;
    case TensorOp::tanh:
    case TensorOp::relu:
    case TensorOp::exp:
    case TensorOp::softmax:
    case TensorOp::sigmoid: return SavedBf16::output;
    default: return SavedBf16::none;
  }
}
// The ops whose rule the bf16 table replaces.
constexpr bool replaced_in_bf16(TensorOp op) {
  return runs_bf16(op) || saved_in_bf16(op) != SavedBf16::none;
}

BP_KERNELS_BEGIN
namespace ops {

// Floats that hold n bf16 values, rounded as scratch pieces are.
inline size_t half_floats(size_t n) { return scratch_round((n + 1) / 2); }
inline uint16_t* as_half(float* p) { return reinterpret_cast<uint16_t*>(p); }
inline const uint16_t* as_half(const float* p) { return reinterpret_cast<const uint16_t*>(p); }
// out = bf16(in), n elements, split over the pool like any elementwise op.
inline void to_bf16(uint16_t* out, const float* in, size_t n) {
  for_chunks(n, [&](size_t b, size_t e) { bf16::from_floats(out + b, in + b, e - b); });
}

// The products' policy for ops.h's backward helpers (side by side, scratch): bf16::gemm, split
// by bands of rows.
struct Bf16Products {
  static constexpr bool side_by_side = true;
  static size_t scratch_elems(int32_t M, int32_t N, int32_t K, bool trans_a, bool trans_b) {
    return bf16::gemm_scratch_floats(M, K, N, trans_a, trans_b, bf16::best_path());
  }
  static int parts(int32_t M, int32_t K, int32_t N) {
    return bf16::detail::row_band_parts(M, K, N);
  }
};
// c (+)= op(a) op(b), a and b bf16; fresh: c is written as if it started from zero.
inline void product_bf16(float* c, const uint16_t* a, const uint16_t* b, const Product& p,
                         float* scratch, bool fresh) {
  bf16::gemm(c, {a, p.trans_a, b, p.trans_b}, p.M, p.K, p.N, scratch, bf16::best_path(), fresh);
}

// Where each operand's bf16 copy is: in aux (activations, in order), or OpArgs::half.
struct HalfOperands {
  const uint16_t* x[2];
  size_t aux_floats;
};
inline HalfOperands half_operands(const OpArgs<float>& a, int operands) {
  HalfOperands h{{nullptr, nullptr}, 0};
  for (int k = 0; k < operands; k++) {
    if (a.half_given & (1 << k)) {
      h.x[k] = a.half[k];
      continue;
    }
    h.x[k] = a.aux ? as_half(a.aux + h.aux_floats) : nullptr;
    h.aux_floats += half_floats(size_t(a.in_rows[k]) * a.in_cols[k]);
  }
  return h;
}
// The forward's copies: each operand without a given copy rounded into aux.
inline HalfOperands save_operands(const OpArgs<float>& a, int operands) {
  const HalfOperands h = half_operands(a, operands);
  for (int k = 0; k < operands; k++)
    if (!(a.half_given & (1 << k)))
      to_bf16(const_cast<uint16_t*>(h.x[k]), a.in[k], size_t(a.in_rows[k]) * a.in_cols[k]);
  return h;
}

// linear with ReLU: which outputs passed, a bit each, after the operands' copies (its backward
// reads these, not the float32 output).
inline size_t relu_mask_floats(const OpArgs<float>& a) {
  return a.arg[0] ? scratch_round((numel(a) + 31) / 32) : 0;
}
inline size_t matmul_aux_bf16(const OpArgs<float>& a) { return half_operands(a, 2).aux_floats; }
inline size_t linear_aux_bf16(const OpArgs<float>& a) {
  return half_operands(a, 2).aux_floats + relu_mask_floats(a);
}
inline uint32_t* relu_mask(const OpArgs<float>& a) {
  return reinterpret_cast<uint32_t*>(a.aux + half_operands(a, 2).aux_floats);
}
template <bool Linear>
size_t bf16_forward_scratch(const OpArgs<float>& a) {
  const Product p = products_of(a, Linear)[0];
  return Bf16Products::scratch_elems(p.M, p.N, p.K, p.trans_a, p.trans_b);
}
// The output gradient in bf16, then the two products' scratch.
template <bool Linear>
size_t bf16_backward_scratch(const OpArgs<float>& a) {
  const std::array<Product, 3> p = products_of(a, Linear);
  return half_floats(size_t(a.rows) * a.cols) + backward_products_scratch<Bf16Products>(p[1], p[2]);
}

inline void matmul_forward_bf16(const OpArgs<float>& a) {
  const HalfOperands h = save_operands(a, 2);
  product_bf16(a.out, h.x[0], h.x[1], matmul_products(a)[0], a.scratch, false);
}
// The backward's products, on the output gradient g rounded to bf16 in scratch.
inline void matmul_backward_bf16(const OpArgs<float>& a) {
  const std::array<Product, 3> p = matmul_products(a);
  const HalfOperands h = half_operands(a, 2);
  uint16_t* g = as_half(a.scratch);
  to_bf16(g, a.dout, size_t(a.rows) * a.cols);
  OpArgs<float> rest = a;
  rest.scratch = a.scratch + half_floats(size_t(a.rows) * a.cols);
  operand_gradients<Bf16Products>(
      rest, p[1], p[2],
      [&](float* scratch) {  // da += g op(b)^T
        product_bf16(a.din[0], g, h.x[1], p[1], scratch, a.fresh & 1);
      },
      [&](float* scratch) {
        if (a.arg[0])  // db += g^T a
          product_bf16(a.din[1], g, h.x[0], p[2], scratch, a.fresh & 2);
        else  // db += a^T g
          product_bf16(a.din[1], h.x[0], g, p[2], scratch, a.fresh & 2);
      });
}

inline void linear_forward_bf16(const OpArgs<float>& a) {
  const HalfOperands h = save_operands(a, 2);
  const int32_t N = a.rows, OC = a.cols;
  for_rows(N, OC, [&](int32_t r0, int32_t r1) {
    for (int32_t r = r0; r < r1; r++)
      std::memcpy(a.out + size_t(r) * OC, a.in[2], OC * sizeof(float));
  });
  product_bf16(a.out, h.x[0], h.x[1], linear_products(a)[0], a.scratch, false);
  if (!a.arg[0]) return;
  const size_t n = numel(a);
  uint32_t* mask = relu_mask(a);
  float* out = a.out;
  for_chunks((n + 31) / 32, [=](size_t w0, size_t w1) {  // whole words of 32 outputs a part
    for (size_t w = w0; w < w1; w++) {
      float* o = out + w * 32;
      const int count = int(std::min<size_t>(32, n - w * 32));
      uint32_t bits = 0;
      if (count == 32) {  // a fixed trip count, so that the compiler vectorizes it
        for (int j = 0; j < 32; j++) {
          o[j] = relu_of(o[j]);
          bits |= uint32_t(relu_passes(o[j])) << j;
        }
      } else {
        for (int j = 0; j < count; j++) {
          o[j] = relu_of(o[j]);
          bits |= uint32_t(relu_passes(o[j])) << j;
        }
      }
      mask[w] = bits;
    }
  });
}
// dx += g w; dw += g^T x (both on bf16 g, w, x); db += the column sums of g, in float32.
inline void linear_backward_bf16(const OpArgs<float>& a) {
  const int32_t N = a.rows, OC = a.cols;
  const std::array<Product, 3> p = linear_products(a);
  const HalfOperands h = half_operands(a, 2);
  float* g = a.dout;
  if (a.arg[0]) {
    const uint32_t* mask = relu_mask(a);
    const size_t n = size_t(N) * OC;
    for_chunks((n + 31) / 32, [=](size_t w0, size_t w1) {  // as the forward wrote them
      for (size_t w = w0; w < w1; w++) {
        float* gw = g + w * 32;
        const uint32_t bits = mask[w];
        const int count = int(std::min<size_t>(32, n - w * 32));
        if (count == 32)
          for (int j = 0; j < 32; j++) gw[j] = bits >> j & 1 ? gw[j] : 0.f;
        else
          for (int j = 0; j < count; j++) gw[j] = bits >> j & 1 ? gw[j] : 0.f;
      }
    });
  }
  uint16_t* gh = as_half(a.scratch);
  to_bf16(gh, g, size_t(N) * OC);
  OpArgs<float> rest = a;
  rest.scratch = a.scratch + half_floats(size_t(N) * OC);
  operand_gradients<Bf16Products>(
      rest, p[1], p[2],
      [&](float* scratch) { product_bf16(a.din[0], gh, h.x[1], p[1], scratch, a.fresh & 1); },
      [&](float* scratch) { product_bf16(a.din[1], gh, h.x[0], p[2], scratch, a.fresh & 2); });
  if (a.din[2])
    for_columns(OC, N, [&](int32_t c0, int32_t c1) {
      for (int32_t r = 0; r < N; r++)
        axpy(a.din[2] + c0, 1.f, g + size_t(r) * OC + c0, c1 - c0, (a.fresh & 4) && !r);
    });
}

// ---- every other op whose backward reads one float32 activation: saved in bf16 ----
// The op's float32 rule (Op), with that activation (its input, or its output when Out) rounded to
// bf16 into aux, and, when Aux, what its forward saves for the backward (attention's
// probabilities) made in forward scratch and kept in bf16; each widened into scratch for its
// backward, whose arithmetic is float32's on the rounded values. aux: [the op's aux, in bf16 when
// Aux][the activation in bf16]; forward scratch: [the op's][its aux in float32, when Aux];
// backward scratch: [the op's][the activation][its aux, when Aux], widened.
template <TensorOp Op, bool Out, bool Aux>
struct Saved {
  static const OpRule<float>& base() { return op_rules<float>()[int(Op)]; }
  static size_t elems(const OpArgs<float>& a) {
    return Out ? numel(a) : size_t(a.in_rows[0]) * a.in_cols[0];
  }
  static size_t base_aux(const OpArgs<float>& a) { return base().aux_elems(a); }
  static size_t own_aux(const OpArgs<float>& a) {  // the op's aux as this rule keeps it
    return Aux ? half_floats(base_aux(a)) : scratch_round(base_aux(a));
  }
  static uint16_t* copy(const OpArgs<float>& a) { return as_half(a.aux + own_aux(a)); }
  static size_t aux_elems(const OpArgs<float>& a) { return own_aux(a) + half_floats(elems(a)); }
  static size_t forward_scratch(const OpArgs<float>& a) {
    return scratch_round(base().forward_scratch(a)) + (Aux ? base_aux(a) : 0);
  }
  static size_t backward_scratch(const OpArgs<float>& a) {
    return scratch_round(base().backward_scratch(a)) + scratch_round(elems(a)) +
           (Aux ? base_aux(a) : 0);
  }
  static void widen(float* out, const uint16_t* in, size_t n) {
    for_chunks(n, [&](size_t b, size_t e) {
      for (size_t i = b; i < e; i++) out[i] = bf16::to_float(in[i]);
    });
  }
  static void forward(const OpArgs<float>& a) {
    if constexpr (!Out) to_bf16(copy(a), a.in[0], elems(a));  // before out may overwrite it
    OpArgs<float> own = a;
    if constexpr (Aux) own.aux = a.scratch + scratch_round(base().forward_scratch(a));
    base().forward(own);
    if constexpr (Aux) to_bf16(as_half(a.aux), own.aux, base_aux(a));
    if constexpr (Out) to_bf16(copy(a), a.out, elems(a));
  }
  static void backward(const OpArgs<float>& a) {
    float* wide = a.scratch + scratch_round(base().backward_scratch(a));
    widen(wide, copy(a), elems(a));
    OpArgs<float> widened = a;
    if constexpr (Out)
      widened.out = wide;
    else
      widened.in[0] = wide;
    if constexpr (Aux) {
      widened.aux = wide + scratch_round(elems(a));
      widen(widened.aux, as_half(a.aux), base_aux(a));
    }
    base().backward(widened);
  }
};

}  // namespace ops
BP_KERNELS_END

}  // namespace bp
