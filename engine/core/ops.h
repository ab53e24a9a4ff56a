// engine/core/ops.h: the closed set of tensor ops and all their derivative rules, in one table.
//
// One application of an op is an OpArgs: its output, the output's gradient, what it saves for the
// backward (aux), its operands and their gradients, shapes, op arguments, token indices and
// scratch, all as raw pointers. Each op has a forward and a backward over an OpArgs, side by side
// (the arithmetic itself is in engine/kernels/kernels.h and engine/kernels/products.h), plus the
// facts a planner needs: how much aux and scratch it takes, what its backward reads, whether its
// forward accumulates into its output, and whether it may write over an operand. Both ways of
// running a step use this one table: the eager graph (engine/core/tensor.h) fills an OpArgs per
// node as it goes; the compiled program (engine/compiled/program.h) fills them once, at planned
// addresses, and calls the same functions as its `engine` dialect, or another kernel of the op's
// (engine/dialects/dialects.h: the matmul and linear functions here are templates over the product
// kernel, so a dialect replaces only that).
//
// Not here: operand checking (engine/core/tensor.h does it, with the shapes in its messages),
// memory. Tests: engine/core/tensor_test.cc (every op against finite differences in double, both
// modes).
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <type_traits>

#include "engine/core/op_args.h"
#include "engine/kernels/kernels.h"
#include "engine/kernels/products.h"
#include "engine/runtime/threads.h"

namespace bp {
BP_KERNELS_BEGIN
namespace ops {

// ---- splitting an op over the pool's threads (engine/runtime/threads.h) ----
// Below split_thresholds().elems elements an op runs inline (engine/runtime/threads.h).
// Elementwise work goes in chunks of whole vectors (kChunk elements), so that every element takes
// the same code (a loop's vector body or its remainder) at any thread count; rows go whole, and a
// sum down the rows (a broadcast operand's gradient, a bias's) goes by chunks of columns, each
// column summed in row order as on one thread.
inline constexpr int64_t kChunk = 16;
template <class F>  // f(begin, end) over [0, n)
void for_chunks(size_t n, F&& f) {
  parallel_for(
      int64_t((n + kChunk - 1) / kChunk), split_thresholds().elems / kChunk,
      [&](int64_t b0, int64_t b1) { f(size_t(b0 * kChunk), std::min(n, size_t(b1 * kChunk))); });
}
inline int64_t row_grain(int64_t cols) {
  return std::max<int64_t>(1, split_thresholds().elems / std::max<int64_t>(cols, 1));
}
template <class F>  // f(r0, r1) over rows of `cols` elements
void for_rows(int32_t rows, int64_t cols, F&& f) {
  parallel_for(rows, row_grain(cols), [&](int64_t r0, int64_t r1) { f(int32_t(r0), int32_t(r1)); });
}
template <class F>  // f(c0, c1) over columns of a (rows, cols) sum down the rows
void for_columns(int32_t cols, int64_t rows, F&& f) {
  const int64_t chunks = (cols + kChunk - 1) / kChunk;
  parallel_for(chunks,
               std::max<int64_t>(1, split_thresholds().elems / kChunk / std::max<int64_t>(rows, 1)),
               [&](int64_t b0, int64_t b1) {
                 f(int32_t(b0 * kChunk), int32_t(std::min<int64_t>(cols, b1 * kChunk)));
               });
}

// ---- matmul and linear, over a product policy G (engine/kernels/products.h's TiledGemm by
// default; the other matmul dialects in engine/dialects/dialects.h) ----

// One product c (M, N) += op(a) (M, K) op(b) (K, N).
struct Product {
  int32_t M, N, K;
  bool trans_a, trans_b;
};
template <class G, class T>
void run_product(T* c, const T* a, const T* b, const Product& p, T* scratch, bool fresh = false) {
  G::run(c, a, p.trans_a, b, p.trans_b, p.M, p.N, p.K, scratch, fresh);
}

// matmul: out (M, N) = in0 (M, K) @ op(in1), op(in1) = in1^T when arg[0]. Its products: [0] the
// forward, [1] in0's gradient, [2] in1's.
template <class T>
std::array<Product, 3> matmul_products(const OpArgs<T>& a) {
  const int32_t M = a.rows, N = a.cols, K = a.in_cols[0];
  const bool tb = a.arg[0];
  return {Product{M, N, K, false, tb}, Product{M, K, N, false, !tb},
          tb ? Product{N, K, M, true, false} : Product{K, N, M, true, false}};
}
// The two operand gradients' products of a backward side by side, one a thread, when the pool
// has two or more and that is quicker than each in turn (a layer's dX and dW in mini_gpt):
// neither splits on its own, or one does and its part of the pool's work is still less than the
// other's whole. Each product computes what it computes alone, so the bits do not change. Our
// kernels only, those that say so (a library runs its own threads).
template <class G>
bool splits_alone(const Product& p) {
  if constexpr (requires { G::parts(p.M, p.K, p.N); }) return G::parts(p.M, p.K, p.N) > 1;
  const GemmSplit s = gemm_split_of(p.M, p.K, p.N);
  if constexpr (requires { requires !G::column_splits; }) return s.parts > 1 && s.by_rows;
  return s.parts > 1;
}
template <class G>
bool products_side_by_side(const Product& x, const Product& y) {
  if constexpr (!requires { requires G::side_by_side; }) {
    return false;
  } else {
    const auto macs = [](const Product& p) { return int64_t(p.M) * p.N * p.K; };
    const int64_t least = split_thresholds().pair_macs;
    const int threads = thread_pool().size();
    if (threads < 2 || macs(x) < least || macs(y) < least) return false;
    const bool x_splits = splits_alone<G>(x), y_splits = splits_alone<G>(y);
    if (x_splits == y_splits) return !x_splits;
    // in turn: the split one's macs / threads, then the other's whole; side by side: the larger
    const int64_t split = macs(x_splits ? x : y), whole = macs(x_splits ? y : x);
    return split - split / threads < whole;
  }
}
template <class G>
size_t backward_products_scratch(const Product& x, const Product& y) {
  const size_t sx = G::scratch_elems(x.M, x.N, x.K, x.trans_a, x.trans_b),
               sy = G::scratch_elems(y.M, y.N, y.K, y.trans_a, y.trans_b);
  return products_side_by_side<G>(x, y) ? scratch_round(sx) + sy : std::max(sx, sy);
}
// da(scratch) for din[0] and db(scratch) for din[1], side by side when they may be (and write
// different buffers: x @ x^T's two gradients are one), else one after the other in one scratch.
template <class G, class T, class A, class B>
void operand_gradients(const OpArgs<T>& a, const Product& pa, const Product& pb, A&& da, B&& db) {
  if (a.din[0] && a.din[1] && a.din[0] != a.din[1] && products_side_by_side<G>(pa, pb)) {
    T* second =
        a.scratch + scratch_round(G::scratch_elems(pa.M, pa.N, pa.K, pa.trans_a, pa.trans_b));
    thread_pool().run(2, [&](int part, int) { part == 0 ? da(a.scratch) : db(second); });
    return;
  }
  if (a.din[0]) da(a.scratch);
  if (a.din[1]) db(a.scratch);
}

template <class T, class G = TiledGemm>
void matmul_forward(const OpArgs<T>& a) {
  run_product<G>(a.out, a.in[0], a.in[1], matmul_products(a)[0], a.scratch);
}
template <class T, class G = TiledGemm>
void matmul_backward(const OpArgs<T>& a) {
  const std::array<Product, 3> p = matmul_products(a);
  operand_gradients<G>(
      a, p[1], p[2],
      [&](T* scratch) {  // da += g op(b)^T
        run_product<G>(a.din[0], a.dout, a.in[1], p[1], scratch, a.fresh & 1);
      },
      [&](T* scratch) {
        if (a.arg[0])  // db += g^T a
          run_product<G>(a.din[1], a.dout, a.in[0], p[2], scratch, a.fresh & 2);
        else  // db += a^T g
          run_product<G>(a.din[1], a.in[0], a.dout, p[2], scratch, a.fresh & 2);
      });
}

// linear: out (N, OC) = in0 (N, C) @ in1^T + in2, in1 (OC, C), in2 (1, OC); arg[0]: relu.
// torch.nn.Linear, fused: the output starts as the bias rows and the gemm accumulates onto them,
// so neither the product nor its gradient is stored apart. With relu, the ReLU is applied in
// place: relu(linear(...)) without storing the pre-activation and its gradient.
template <class T>
std::array<Product, 3> linear_products(const OpArgs<T>& a) {
  const int32_t N = a.rows, OC = a.cols, C = a.in_cols[0];
  return {Product{N, OC, C, false, true}, Product{N, C, OC, false, false},
          Product{OC, C, N, true, false}};
}
template <class T, class G = TiledGemm>
void linear_forward(const OpArgs<T>& a) {
  if constexpr (requires { &G::template linear_forward<T>; })  // a policy's one-kernel forward
    if (G::linear_forward(a.out, a.in[0], a.in[1], a.in[2], a.rows, a.cols, a.in_cols[0],
                          a.arg[0] != 0, a.scratch))
      return;
  const int32_t N = a.rows, OC = a.cols;
  for_rows(N, OC, [&](int32_t r0, int32_t r1) {
    for (int32_t r = r0; r < r1; r++) std::memcpy(a.out + size_t(r) * OC, a.in[2], OC * sizeof(T));
  });
  run_product<G>(a.out, a.in[0], a.in[1], linear_products(a)[0], a.scratch);
  if (a.arg[0])
    for_chunks(size_t(N) * OC, [&](size_t i0, size_t i1) {
      T* out = a.out;
#pragma omp simd
      for (size_t i = i0; i < i1; i++) out[i] = relu_of(out[i]);
    });
}
// dx += g w; dw += g^T x; db += the column sums of g.
template <class T, class G = TiledGemm>
void linear_backward(const OpArgs<T>& a) {
  const int32_t N = a.rows, OC = a.cols;
  const std::array<Product, 3> p = linear_products(a);
  T* g = a.dout;
  if (a.arg[0])  // relu: pass the gradient where the output is not <= 0 (in place: this op's
    for_chunks(size_t(N) * OC, [&](size_t i0, size_t i1) {  // output gradient has no other reader)
      for (size_t i = i0; i < i1; i++) g[i] = relu_passes(a.out[i]) ? g[i] : T(0);
    });
  operand_gradients<G>(
      a, p[1], p[2],
      [&](T* scratch) { run_product<G>(a.din[0], g, a.in[1], p[1], scratch, a.fresh & 1); },
      [&](T* scratch) { run_product<G>(a.din[1], g, a.in[0], p[2], scratch, a.fresh & 2); });
  if (a.din[2])  // written by the first row when fresh
    for_columns(OC, N, [&](int32_t c0, int32_t c1) {
      for (int32_t r = 0; r < N; r++)
        axpy(a.din[2] + c0, T(1), g + size_t(r) * OC + c0, c1 - c0, (a.fresh & 4) && !r);
    });
}

// Scratch and availability of either op's products under G (the backward's share one scratch
// when they run one after the other, or have one each side by side).
template <class T>
std::array<Product, 3> products_of(const OpArgs<T>& a, bool linear) {
  return linear ? linear_products(a) : matmul_products(a);
}
template <class T, class G, bool Linear>
size_t product_forward_scratch(const OpArgs<T>& a) {
  const Product p = products_of(a, Linear)[0];
  return G::scratch_elems(p.M, p.N, p.K, p.trans_a, p.trans_b);
}
template <class T, class G, bool Linear>
size_t product_backward_scratch(const OpArgs<T>& a) {
  const std::array<Product, 3> p = products_of(a, Linear);
  return backward_products_scratch<G>(p[1], p[2]);
}
template <class T, class G, bool Linear>
bool products_available(const OpArgs<T>& a) {
  for (const Product& p : products_of(a, Linear))
    if (!G::template available<T>(p.M, p.N, p.K, p.trans_a, p.trans_b)) return false;
  if constexpr (Linear && requires { &G::template linear_forward_ready<T>; })
    G::template linear_forward_ready<T>(a.rows, a.cols, a.in_cols[0], a.arg[0] != 0);
  return true;
}

// ---- add, mul, sub, div: in1 has in0's shape, or is one row broadcast over every row ----
template <class T>
bool broadcasts_row(const OpArgs<T>& a) {
  return a.in_rows[1] == 1 && a.rows != 1;
}
// out = f(x, y) element by element, y's row r or its one broadcast row.
template <class T, class F>
void binary_rows(const OpArgs<T>& a, F f) {
  const int32_t C = a.cols;
  const bool row = broadcasts_row(a);
  for_rows(a.rows, C, [&](int32_t r0, int32_t r1) {
    for (int32_t r = r0; r < r1; r++) {
      const T* yr = a.in[1] + (row ? 0 : size_t(r) * C);
      const T* xr = a.in[0] + size_t(r) * C;
      T* out = a.out + size_t(r) * C;
      for (int32_t c = 0; c < C; c++) out[c] = f(xr[c], yr[c]);
    }
  });
}
template <class T>
void add_forward(const OpArgs<T>& a) {
  binary_rows(a, [](T x, T y) { return x + y; });
}
// add's backward (y_sign 1) and sub's (-1): x's gradient is g, y's y_sign g. A broadcast row's
// gradient is a sum down the rows: by columns, written by the first row.
template <class T>
void signed_sum_backward(const OpArgs<T>& a, T y_sign) {
  const int32_t C = a.cols;
  const bool row = broadcasts_row(a);
  for_rows(a.rows, C, [&](int32_t r0, int32_t r1) {
    for (int32_t r = r0; r < r1; r++) {
      const T* gr = a.dout + size_t(r) * C;
      if (a.din[0]) axpy(a.din[0] + size_t(r) * C, T(1), gr, C, a.fresh & 1);
      if (a.din[1] && !row) axpy(a.din[1] + size_t(r) * C, y_sign, gr, C, a.fresh & 2);
    }
  });
  if (a.din[1] && row)
    for_columns(C, a.rows, [&](int32_t c0, int32_t c1) {
      for (int32_t r = 0; r < a.rows; r++)
        axpy(a.din[1] + c0, y_sign, a.dout + size_t(r) * C + c0, c1 - c0, (a.fresh & 2) && r == 0);
    });
}
template <class T>
void add_backward(const OpArgs<T>& a) {
  signed_sum_backward(a, T(1));
}
template <class T>
void mul_forward(const OpArgs<T>& a) {
  binary_rows(a, [](T x, T y) { return x * y; });
}
template <class T>
void mul_backward(const OpArgs<T>& a) {
  const int32_t C = a.cols;
  const bool row = broadcasts_row(a);
  for_rows(a.rows, C, [&](int32_t r0, int32_t r1) {
    for (int32_t r = r0; r < r1; r++) {
      const T* gr = a.dout + size_t(r) * C;
      const size_t yo = row ? 0 : size_t(r) * C, xo = size_t(r) * C;
      if (a.din[0])
        for (int32_t c = 0; c < C; c++) a.din[0][xo + c] += gr[c] * a.in[1][yo + c];
      if (a.din[1] && !row)
        for (int32_t c = 0; c < C; c++) a.din[1][yo + c] += gr[c] * a.in[0][xo + c];
    }
  });
  if (a.din[1] && row)
    for_columns(C, a.rows, [&](int32_t c0, int32_t c1) {
      for (int32_t r = 0; r < a.rows; r++) {
        const T* gr = a.dout + size_t(r) * C;
        for (int32_t c = c0; c < c1; c++) a.din[1][c] += gr[c] * a.in[0][size_t(r) * C + c];
      }
    });
}
// x - y, broadcast as add; y's gradient is add's negated.
template <class T>
void sub_forward(const OpArgs<T>& a) {
  binary_rows(a, [](T x, T y) { return x - y; });
}
template <class T>
void sub_backward(const OpArgs<T>& a) {
  signed_sum_backward(a, T(-1));
}
// x / y, broadcast as mul: dx = g / y, dy = -g x / y^2.
template <class T>
void div_forward(const OpArgs<T>& a) {
  binary_rows(a, [](T x, T y) { return x / y; });
}
template <class T>
void div_backward(const OpArgs<T>& a) {
  const int32_t C = a.cols;
  const bool row = broadcasts_row(a);
  for_rows(a.rows, C, [&](int32_t r0, int32_t r1) {
    for (int32_t r = r0; r < r1; r++) {
      const T* gr = a.dout + size_t(r) * C;
      const T* x = a.in[0] + size_t(r) * C;
      const T* y = a.in[1] + (row ? 0 : size_t(r) * C);
      if (a.din[0])
        for (int32_t c = 0; c < C; c++) a.din[0][size_t(r) * C + c] += gr[c] / y[c];
      if (a.din[1] && !row)
        for (int32_t c = 0; c < C; c++) a.din[1][size_t(r) * C + c] -= gr[c] * x[c] / (y[c] * y[c]);
    }
  });
  if (a.din[1] && row)
    for_columns(C, a.rows, [&](int32_t c0, int32_t c1) {
      for (int32_t r = 0; r < a.rows; r++) {
        const T* gr = a.dout + size_t(r) * C;
        const T* x = a.in[0] + size_t(r) * C;
        for (int32_t c = c0; c < c1; c++) a.din[1][c] -= gr[c] * x[c] / (a.in[1][c] * a.in[1][c]);
      }
    });
}

// ---- elementwise unary ops: backward from the output where that is cheaper ----
template <class T>
void tanh_forward(const OpArgs<T>& a) {
  for_chunks(numel(a), [&](size_t i0, size_t i1) {
    const T* x = a.in[0];
    T* out = a.out;
#pragma omp simd
    for (size_t i = i0; i < i1; i++) out[i] = tanh_t(x[i]);
  });
}
template <class T>
void tanh_backward(const OpArgs<T>& a) {
  for_chunks(numel(a), [&](size_t i0, size_t i1) {
    for (size_t i = i0; i < i1; i++) a.din[0][i] += a.dout[i] * (1 - a.out[i] * a.out[i]);
  });
}
template <class T>
void relu_forward(const OpArgs<T>& a) {
  for_chunks(numel(a), [&](size_t i0, size_t i1) {
    const T* x = a.in[0];
    T* out = a.out;
#pragma omp simd
    for (size_t i = i0; i < i1; i++) out[i] = relu_of(x[i]);
  });
}
template <class T>
void relu_backward(const OpArgs<T>& a) {
  for_chunks(numel(a), [&](size_t i0, size_t i1) {
    for (size_t i = i0; i < i1; i++) a.din[0][i] += relu_passes(a.out[i]) ? a.dout[i] : T(0);
  });
}
template <class T>  // exact (erf) form, torch's default
void gelu_forward(const OpArgs<T>& a) {
  for_chunks(numel(a), [&](size_t i0, size_t i1) {
    for (size_t i = i0; i < i1; i++)
      a.out[i] = T(0.5) * a.in[0][i] * (1 + std::erf(a.in[0][i] * T(M_SQRT1_2)));
  });
}
template <class T>  // d/dx x Phi(x) = Phi(x) + x phi(x)
void gelu_backward(const OpArgs<T>& a) {
  for_chunks(numel(a), [&](size_t i0, size_t i1) {
    for (size_t i = i0; i < i1; i++) {
      const T v = a.in[0][i];
      const T cdf = T(0.5) * (1 + std::erf(v * T(M_SQRT1_2)));
      const T pdf = std::exp(T(-0.5) * v * v) * T(0.3989422804014327);  // 1/sqrt(2 pi)
      a.din[0][i] += a.dout[i] * (cdf + v * pdf);
    }
  });
}
template <class T>
void exp_forward(const OpArgs<T>& a) {
  for_chunks(numel(a), [&](size_t i0, size_t i1) {
    const T* x = a.in[0];
    T* out = a.out;
#pragma omp simd
    for (size_t i = i0; i < i1; i++) out[i] = exp_t(x[i]);
  });
}
template <class T>
void exp_backward(const OpArgs<T>& a) {
  for_chunks(numel(a), [&](size_t i0, size_t i1) {
    for (size_t i = i0; i < i1; i++) a.din[0][i] += a.dout[i] * a.out[i];
  });
}
template <class T>
void log_forward(const OpArgs<T>& a) {
  for_chunks(numel(a), [&](size_t i0, size_t i1) {
    for (size_t i = i0; i < i1; i++) a.out[i] = std::log(a.in[0][i]);
  });
}
template <class T>
void log_backward(const OpArgs<T>& a) {
  for_chunks(numel(a), [&](size_t i0, size_t i1) {
    for (size_t i = i0; i < i1; i++) a.din[0][i] += a.dout[i] / a.in[0][i];
  });
}

template <class T>  // 1 / (1 + e^-x); from the output, as tanh
void sigmoid_forward(const OpArgs<T>& a) {
  for_chunks(numel(a), [&](size_t i0, size_t i1) {
    const T* x = a.in[0];
    T* out = a.out;
#pragma omp simd
    for (size_t i = i0; i < i1; i++) out[i] = T(1) / (T(1) + exp_t(-x[i]));
  });
}
template <class T>
void sigmoid_backward(const OpArgs<T>& a) {
  for_chunks(numel(a), [&](size_t i0, size_t i1) {
    for (size_t i = i0; i < i1; i++) a.din[0][i] += a.dout[i] * a.out[i] * (1 - a.out[i]);
  });
}

// ---- logsumexp of every row of in0 (N, C): (N, 1), steadied by the row's maximum ----
template <class T>
void logsumexp_forward(const OpArgs<T>& a) {
  const int32_t C = a.in_cols[0];
  for_rows(a.rows, C, [&](int32_t r0, int32_t r1) {
    for (int32_t r = r0; r < r1; r++) {
      const T* x = a.in[0] + size_t(r) * C;
      T most = x[0];
#pragma omp simd reduction(max : most)
      for (int32_t c = 1; c < C; c++) most = most > x[c] ? most : x[c];  // maxps's own form
      // Every term -inf, or one +inf: the maximum is the answer, unless a NaN is (a NaN
      // elsewhere makes the sum below NaN).
      if (std::isinf(most) && std::none_of(x, x + C, [](T v) { return v != v; })) {
        a.out[r] = most;
        continue;
      }
      T total = 0;
#pragma omp simd reduction(+ : total)
      for (int32_t c = 0; c < C; c++) total += exp_t(x[c] - most);
      a.out[r] = most + std::log(total);
    }
  });
}
// d out_r / d x_rc = exp(x_rc - out_r): the row's softmax, from the output.
template <class T>
void logsumexp_backward(const OpArgs<T>& a) {
  const int32_t C = a.in_cols[0];
  for_rows(a.rows, C, [&](int32_t r0, int32_t r1) {
    for (int32_t r = r0; r < r1; r++) {
      const T* x = a.in[0] + size_t(r) * C;
      T* dx = a.din[0] + size_t(r) * C;
      const T g = a.dout[r], out = a.out[r];
#pragma omp simd
      for (int32_t c = 0; c < C; c++) dx[c] += g * exp_t(x[c] - out);
    }
  });
}

// ---- sum_rows: the sum of every row of in0 (N, C): (N, 1) ----
// Short rows (a norm over a few dimensions) add in order, one after another: a vector
// reduction's setup would cost more than the row. Rows of 1, 2, 3, 4 or 8 take a loop of their
// width fixed at compile time (the same adds in the same order), which the compiler unrolls.
inline constexpr int32_t kShortRow = 16;
template <int32_t C, class T>
void sum_short_rows(const T* x, T* out, int32_t cols, int32_t r0, int32_t r1) {
  const int32_t width = C > 0 ? C : cols;
  for (int32_t r = r0; r < r1; r++) {
    T total = 0;
    for (int32_t c = 0; c < width; c++) total += x[size_t(r) * width + c];
    out[r] = total;
  }
}
template <int32_t C, class T>
void spread_short_rows(T* dx, const T* g, int32_t cols, bool fresh, int32_t r0, int32_t r1) {
  const int32_t width = C > 0 ? C : cols;
  for (int32_t r = r0; r < r1; r++)
    for (int32_t c = 0; c < width; c++)
      dx[size_t(r) * width + c] = (fresh ? T(0) : dx[size_t(r) * width + c]) + g[r];
}
template <class F>
void with_row_width(int32_t C, F&& f) {  // f(std::integral_constant<int32_t, C or 0>)
  switch (C) {
    case 1: return f(std::integral_constant<int32_t, 1>{});
    case 2: return f(std::integral_constant<int32_t, 2>{});
    case 3: return f(std::integral_constant<int32_t, 3>{});
    case 4: return f(std::integral_constant<int32_t, 4>{});
    case 8: return f(std::integral_constant<int32_t, 8>{});
    default: return f(std::integral_constant<int32_t, 0>{});
  }
}
template <class T>
void sum_rows_forward(const OpArgs<T>& a) {
  const int32_t C = a.in_cols[0];
  for_rows(a.rows, C, [&](int32_t r0, int32_t r1) {
    if (C < kShortRow)
      return with_row_width(
          C, [&](auto width) { sum_short_rows<width()>(a.in[0], a.out, C, r0, r1); });
    for (int32_t r = r0; r < r1; r++) {
      const T* x = a.in[0] + size_t(r) * C;
      T total = 0;
#pragma omp simd reduction(+ : total)
      for (int32_t c = 0; c < C; c++) total += x[c];
      a.out[r] = total;
    }
  });
}
template <class T>
void sum_rows_backward(const OpArgs<T>& a) {
  const int32_t C = a.in_cols[0];
  for_rows(a.rows, C, [&](int32_t r0, int32_t r1) {
    with_row_width(C < kShortRow ? C : 0, [&](auto width) {
      spread_short_rows<width()>(a.din[0], a.dout, C, a.fresh & 1, r0, r1);
    });
  });
}

// ---- embedding: rows of in0 (V, C) picked by index (N): (N, C) ----
template <class T>
void embedding_forward(const OpArgs<T>& a) {
  for_rows(a.index.size, a.cols, [&](int32_t r0, int32_t r1) {
    for (int32_t i = r0; i < r1; i++)
      std::memcpy(a.out + size_t(i) * a.cols, a.in[0] + size_t(a.index.data[i]) * a.cols,
                  a.cols * sizeof(T));
  });
}
template <class T>
void embedding_backward(const OpArgs<T>& a) {
  for (int32_t i = 0; i < a.index.size; i++)
    axpy(a.din[0] + size_t(a.index.data[i]) * a.cols, T(1), a.dout + size_t(i) * a.cols, a.cols);
}

// ---- sum and mean of every element: (1, 1) ----
template <class T>
size_t in_numel(const OpArgs<T>& a) {
  return size_t(a.in_rows[0]) * a.in_cols[0];
}
template <class T>
void sum_forward(const OpArgs<T>& a) {
  T s = 0;
  for (size_t i = 0; i < in_numel(a); i++) s += a.in[0][i];
  a.out[0] = s;
}
template <class T>
void mean_forward(const OpArgs<T>& a) {
  T s = 0;
  for (size_t i = 0; i < in_numel(a); i++) s += a.in[0][i];
  a.out[0] = s / T(in_numel(a));
}
template <class T>
void sum_backward(const OpArgs<T>& a) {
  for (size_t i = 0; i < in_numel(a); i++) a.din[0][i] += a.dout[0];
}
template <class T>
void mean_backward(const OpArgs<T>& a) {
  const T d = a.dout[0] / T(in_numel(a));
  for (size_t i = 0; i < in_numel(a); i++) a.din[0][i] += d;
}

// ---- layernorm of in0 (N, C), scale in1 (1, C), shift in2 (1, C); aux: N means, N rstds ----
template <class T>
void layernorm_forward_op(const OpArgs<T>& a) {
  for_rows(a.rows, a.cols, [&](int32_t r0, int32_t r1) {
    layernorm_forward(a.out, a.aux, a.in[0], a.in[1], a.in[2], a.rows, a.cols, r0, r1);
  });
}
template <class T>
void layernorm_backward_op(const OpArgs<T>& a) {
  if (parallel_parts(a.rows, row_grain(a.cols)) == 1)  // one pass over the rows, all three
    return layernorm_backward(a.din[0], a.din[1], a.din[2], a.dout, a.aux, a.in[0], a.in[1], a.rows,
                              a.cols, a.fresh, 0, a.rows);
  if (a.din[0])
    for_rows(a.rows, a.cols, [&](int32_t r0, int32_t r1) {
      layernorm_backward<T>(a.din[0], nullptr, nullptr, a.dout, a.aux, a.in[0], a.in[1], a.rows,
                            a.cols, a.fresh & 1, r0, r1);
    });
  if (a.din[1] || a.din[2])
    for_columns(a.cols, a.rows, [&](int32_t c0, int32_t c1) {
      layernorm_backward_params(a.din[1], a.din[2], a.dout, a.aux, a.in[0], a.rows, a.cols, a.fresh,
                                c0, c1);
    });
}
template <class T>
size_t layernorm_aux(const OpArgs<T>& a) {
  return 2 * size_t(a.rows);
}

// ---- softmax of every row ----
template <class T>
void softmax_forward(const OpArgs<T>& a) {
  for_rows(a.rows, a.cols, [&](int32_t r0, int32_t r1) {
    for (int32_t r = r0; r < r1; r++)
      softmax_row(a.out + size_t(r) * a.cols, a.in[0] + size_t(r) * a.cols, a.cols);
  });
}
template <class T>
void softmax_backward(const OpArgs<T>& a) {
  for_rows(a.rows, a.cols, [&](int32_t r0, int32_t r1) {
    for (int32_t r = r0; r < r1; r++) {
      const size_t o = size_t(r) * a.cols;
      softmax_row_backward(a.din[0] + o, a.dout + o, a.out + o, a.cols);
    }
  });
}
// out = x - logsumexp(x) per row (the max taken out first); backward from the output:
// dx = g - softmax(x) sum(g), softmax(x) = exp(out).
template <class T>
void log_softmax_forward(const OpArgs<T>& a) {
  const int32_t C = a.cols;
  for_rows(a.rows, C, [&](int32_t r0, int32_t r1) {
    for (int32_t r = r0; r < r1; r++) {
      const T* x = a.in[0] + size_t(r) * C;
      T* out = a.out + size_t(r) * C;
      T most = x[0];
      for (int32_t c = 1; c < C; c++) most = most > x[c] ? most : x[c];
      T total = 0;
      for (int32_t c = 0; c < C; c++) total += exp_t(x[c] - most);
      const T lse = most + std::log(total);
      for (int32_t c = 0; c < C; c++) out[c] = x[c] - lse;
    }
  });
}
template <class T>
void log_softmax_backward(const OpArgs<T>& a) {
  const int32_t C = a.cols;
  for_rows(a.rows, C, [&](int32_t r0, int32_t r1) {
    for (int32_t r = r0; r < r1; r++) {
      const size_t o = size_t(r) * C;
      T total = 0;
      for (int32_t c = 0; c < C; c++) total += a.dout[o + c];
      for (int32_t c = 0; c < C; c++)
        a.din[0][o + c] += a.dout[o + c] - exp_t(a.out[o + c]) * total;
    }
  });
}

// ---- negative log-likelihood of log-probabilities (N, V) at one target a row: -mean ----
// torch's nll_loss, reduction mean: the rows' terms summed in row order on one thread.
template <class T>
void nll_forward(const OpArgs<T>& a) {
  const int32_t N = a.in_rows[0], V = a.in_cols[0];
  T total = 0;
  for (int32_t r = 0; r < N; r++) total += a.in[0][size_t(r) * V + a.index.data[r]];
  a.out[0] = -total / T(N);
}
template <class T>
void nll_backward(const OpArgs<T>& a) {
  const int32_t N = a.in_rows[0], V = a.in_cols[0];
  const T each = -a.dout[0] / T(N);
  for (int32_t r = 0; r < N; r++) a.din[0][size_t(r) * V + a.index.data[r]] += each;
}
// ---- transpose: out (C, R) = x (R, C)^T ----
// Blocks of kTile x kTile keep both sides' lines in cache; parts take whole blocks of output rows
// (forward) or of input rows (backward), so each element is written once, by one part.
inline constexpr int32_t kTransposeTile = 16;
template <class T>
void transpose_forward(const OpArgs<T>& a) {
  const int32_t R = a.in_rows[0], C = a.in_cols[0], B = kTransposeTile;
  for_rows(a.rows, R, [&](int32_t c0, int32_t c1) {
    for (int32_t r0 = 0; r0 < R; r0 += B)
      for (int32_t c = c0; c < c1; c++)
        for (int32_t r = r0; r < std::min(R, r0 + B); r++)
          a.out[size_t(c) * R + r] = a.in[0][size_t(r) * C + c];
  });
}
template <class T>
void transpose_backward(const OpArgs<T>& a) {
  const int32_t R = a.in_rows[0], C = a.in_cols[0], B = kTransposeTile;
  for_rows(R, C, [&](int32_t r0, int32_t r1) {
    for (int32_t c0 = 0; c0 < C; c0 += B)
      for (int32_t r = r0; r < r1; r++)
        for (int32_t c = c0; c < std::min(C, c0 + B); c++)
          a.din[0][size_t(r) * C + c] += a.dout[size_t(c) * R + r];
  });
}

// ---- causal self-attention of in0 (B*T, 3C) into (B*T, C); arg: B, T, H; aux: (B, H, T, T) ----
// Sequences are independent: threads take whole sequences (b), each its own rows of every buffer.
// A sequence's work is its H heads' (T, T) scores of C / H terms each: T * T * C.
template <class T, class F>
void for_sequences(const OpArgs<T>& a, F&& f) {  // f(b0, b1)
  const int32_t B = a.arg[0], T_ = a.arg[1];
  parallel_for(B, std::max<int64_t>(1, split_thresholds().elems / (int64_t(T_) * T_ * a.cols)),
               [&](int64_t b0, int64_t b1) { f(int32_t(b0), int32_t(b1)); });
}
template <class T>
void attention_forward_op(const OpArgs<T>& a) {
  const int32_t T_ = a.arg[1], H = a.arg[2], C = a.cols;
  for_sequences(a, [&](int32_t b0, int32_t b1) {
    attention_forward_any(a.out + size_t(b0) * T_ * C, a.aux + size_t(b0) * H * T_ * T_,
                          a.in[0] + size_t(b0) * T_ * 3 * C, b1 - b0, T_, H, C / H);
  });
}
template <class T>
void attention_backward_op(const OpArgs<T>& a) {
  if (!a.din[0]) return;
  const int32_t T_ = a.arg[1], H = a.arg[2], C = a.cols;
  for_sequences(a, [&](int32_t b0, int32_t b1) {
    // one (T) row of probability gradients for each part: the part that starts at b0 owns the
    // row at its first sequence's index
    attention_backward_any(a.din[0] + size_t(b0) * T_ * 3 * C, a.scratch + size_t(b0) * T_,
                           a.dout + size_t(b0) * T_ * C, a.aux + size_t(b0) * H * T_ * T_,
                           a.in[0] + size_t(b0) * T_ * 3 * C, b1 - b0, T_, H, C / H);
  });
}
template <class T>
size_t attention_aux(const OpArgs<T>& a) {
  return size_t(a.arg[0]) * a.arg[2] * a.arg[1] * a.arg[1];
}
template <class T>
size_t attention_backward_scratch(const OpArgs<T>& a) {  // a (T) row for each sequence
  return size_t(a.arg[0]) * a.arg[1];
}

// ---- cross-entropy: mean over rows of in0 (N, V) against targets (N): (1, 1); aux: (N, V) ----
// The rows' terms go to scratch, then are summed in row order: the same loss at any threads.
template <class T>
void cross_entropy_forward_op(const OpArgs<T>& a) {
  const int32_t N = a.in_rows[0], V = a.in_cols[0];
  for_rows(N, V, [&](int32_t r0, int32_t r1) {
    cross_entropy_rows(a.scratch, a.aux, a.in[0], a.index.data, V, r0, r1);
  });
  a.out[0] = cross_entropy_loss(a.scratch, N);
}
template <class T>
void cross_entropy_backward_op(const OpArgs<T>& a) {
  const int32_t N = a.in_rows[0], V = a.in_cols[0];
  for_rows(N, V, [&](int32_t r0, int32_t r1) {
    cross_entropy_backward(a.din[0], a.dout[0], a.aux, a.index.data, N, V, a.fresh & 1, r0, r1);
  });
}
template <class T>
size_t cross_entropy_forward_scratch(const OpArgs<T>& a) {  // (N) the rows' terms
  return size_t(a.in_rows[0]);
}
template <class T>
size_t cross_entropy_aux(const OpArgs<T>& a) {
  return in_numel(a);
}

}  // namespace ops
BP_KERNELS_END

}  // namespace bp
