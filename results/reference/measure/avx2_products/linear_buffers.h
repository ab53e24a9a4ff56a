// linear_buffers.h: the buffers of a linear op's three products for the measuring programs here
// (flushed.cc, row_vs_products.cc, fma_beside.cc): x (M, K), w (N, K), y and dy (M, N), dx
// (M, K), dw (N, K) on whole cache lines, filled with uniform noise, and one scratch the size the
// largest of the three products asks.
#pragma once
#include <algorithm>
#include <cstdlib>
#include "engine/products.h"

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
