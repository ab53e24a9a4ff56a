// one_product.cc: the engine's product c (M, N) += op(a) op(b) for one shape, timed over `reps`
// calls: the median. Operands 2 MB aligned; `huge` 1 asks for huge pages; FRESH=1 in the
// environment writes c fresh, as a compiled step does.
//   build/dev/one_product M N K trans_a trans_b reps [huge]   (cmake -DBP_DEV=ON; make test builds
//   it)
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "engine/kernels/products.h"
using namespace bp;
static float* alloc(size_t n, bool huge) {
  size_t bytes = (n * 4 + (2 << 20) - 1) / (2 << 20) * (2 << 20);
  float* p = (float*)std::aligned_alloc(2 << 20, bytes);
  if (huge) madvise(p, bytes, MADV_HUGEPAGE);
  return p;
}
int main(int argc, char** argv) {
  if (argc < 7) {
    std::fprintf(stderr, "usage: one_product M N K trans_a trans_b reps [huge]\n");
    return 2;
  }
  int M = atoi(argv[1]), N = atoi(argv[2]), K = atoi(argv[3]);
  bool ta = atoi(argv[4]), tb = atoi(argv[5]);
  int reps = atoi(argv[6]);
  bool huge = argc > 7 && atoi(argv[7]);
  float *a = alloc(size_t(M) * K, huge), *b = alloc(size_t(K) * N, huge),
        *c = alloc(size_t(M) * N, huge);
  for (size_t i = 0; i < size_t(M) * K; i++) a[i] = float(rand()) / RAND_MAX - 0.5f;
  for (size_t i = 0; i < size_t(K) * N; i++) b[i] = float(rand()) / RAND_MAX - 0.5f;
  size_t se = matmul_scratch_elems(M, N, K, ta, tb) + 64;
  float* s = alloc(se, huge);
  std::vector<double> t;
  for (int r = 0; r < reps; r++) {
    std::fill(c, c + size_t(M) * N, 0.f);
    auto t0 = std::chrono::steady_clock::now();
    matmul_accumulate(c, a, ta, b, tb, M, N, K, s, getenv("FRESH") != nullptr);
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  double med = t[t.size() / 2];
  printf("%d %d %d ta%d tb%d huge%d: %.1f us  %.1f GFLOP/s  (min %.1f us)\n", M, N, K, ta, tb, huge,
         med * 1e6, 2.0 * M * N * K / med * 1e-9, t[0] * 1e6);
}
