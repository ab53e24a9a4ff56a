// fma_beside.cc: is the products' spread the kernel's or the machine's? Each round runs the
// register-only FMA loop (12 chains of AVX2 fused multiply-adds, as the kernel rows' peak row)
// and then the engine's forward product x w^T, and prints both rates; then their medians, and the
// product's median over the rounds whose FMA loop ran within 3% of its own median.
//   build/dev/fma_beside 64 1024 1024 240     (cmake -DBP_DEV=ON; make test builds it)
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "linear_buffers.h"
#include "timing.h"
using Clock = std::chrono::steady_clock;
// AVX2 and FMA whatever the build's baseline (x86-64-v2 on a processor without them: main says so).
__attribute__((noinline, target("avx2,fma"))) float fma_loop(long n) {
  __m256 a[12];
  for (int i = 0; i < 12; i++) a[i] = _mm256_set1_ps(i * 1e-3f);
  const __m256 m = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
  for (long r = 0; r < n; r++)
    for (int i = 0; i < 12; i++) a[i] = _mm256_fmadd_ps(a[i], m, b);
  float s = 0;
  for (int i = 0; i < 12; i++) s += a[i][0];
  return s;
}
int main(int argc, char** argv) {
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma"))
    return std::fprintf(stderr,
                        "fma_beside: its loops are AVX2 and FMA, which this processor lacks\n"),
           2;
  if (argc != 5) return std::fprintf(stderr, "usage: fma_beside M N K rounds\n"), 2;
  const int M = atoi(argv[1]), N = atoi(argv[2]), K = atoi(argv[3]), rounds = atoi(argv[4]);
  LinearBuffers buffers(M, N, K);
  auto [x, w, y, dy, dx, dw, scratch] = buffers;
  const long n = 100000;  // about 2 ms, as long as the 64 x 1024 x 1024 product
  std::vector<double> fma, product;
  float sink = 0;
  for (int r = 0; r < rounds; r++) {
    const auto t0 = Clock::now();
    sink += fma_loop(n);
    const auto t1 = Clock::now();
    bp::matmul_accumulate(y, x, false, w, true, M, N, K, scratch, false);
    const auto t2 = Clock::now();
    fma.push_back(n * 12 * 16 / std::chrono::duration<double>(t1 - t0).count() * 1e-9);
    product.push_back(2.0 * M * N * K / std::chrono::duration<double>(t2 - t1).count() * 1e-9);
    std::printf("%3.0f/%2.0f%c", fma.back(), product.back(), r % 12 == 11 ? '\n' : ' ');
  }
  const double fma_median = median(fma);
  std::vector<double> steady, sorted = product;
  for (size_t i = 0; i < fma.size(); i++)
    if (fma[i] >= 0.97 * fma_median) steady.push_back(product[i]);
  std::sort(sorted.begin(), sorted.end());
  std::printf(
      "\nGFLOP/s, FMA loop / product: medians %.1f / %.1f; product p10 %.1f p90 %.1f; "
      "over the %zu rounds whose FMA loop ran within 3%% of its median: %.1f (%g)\n",
      fma_median, median(product), sorted[sorted.size() / 10], sorted[sorted.size() * 9 / 10],
      steady.size(), median(steady), double(sink));
}
