// linear_buffers.h: a linear op for the measuring programs here (op_sequence.cc, flushed.cc,
// row_vs_products.cc, fma_beside.cc, dialects_in_turn.cc). LinearBuffers: its three products'
// buffers, x (M, K), w (N, K), y and dy (M, N), dx (M, K), dw (N, K) on whole cache lines, filled
// with uniform noise, and one scratch the size the largest of the three products asks.
// linear_shape: the op's OpArgs shapes, out (M, N) = x (M, K) w^T (N, K) + bias (1, N), as the
// kernel rows run it (KernelBench allocates the buffers).
#pragma once
#include <algorithm>
#include <cstdlib>

#include "engine/core/ops.h"
#include "engine/kernels/products.h"

inline float* random_floats(size_t n) {
  float* p = static_cast<float*>(std::aligned_alloc(64, (n * 4 + 63) / 64 * 64));
  for (size_t i = 0; i < n; i++) p[i] = float(rand()) / RAND_MAX - 0.5f;
  return p;
}

struct LinearBuffers {
  float *x, *w, *y, *dy, *dx, *dw, *scratch;
  LinearBuffers(int M, int N, int K)
      : x(random_floats(size_t(M) * K)),
        w(random_floats(size_t(N) * K)),
        y(random_floats(size_t(M) * N)),
        dy(random_floats(size_t(M) * N)),
        dx(random_floats(size_t(M) * K)),
        dw(random_floats(size_t(N) * K)),
        scratch(random_floats(std::max({bp::matmul_scratch_elems(M, N, K, false, true),
                                        bp::matmul_scratch_elems(M, K, N, false, false),
                                        bp::matmul_scratch_elems(N, K, M, true, false)}) +
                              16)) {}
};

inline bp::OpArgs<float> linear_shape(int M, int N, int K, bool relu) {
  bp::OpArgs<float> shape;
  shape.rows = M, shape.cols = N, shape.arg[0] = relu;
  shape.in_rows[0] = M, shape.in_cols[0] = K;
  shape.in_rows[1] = N, shape.in_cols[1] = K;
  shape.in_rows[2] = 1, shape.in_cols[2] = N;
  return shape;
}
