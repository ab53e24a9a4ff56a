// passes.cc: what an exact skip of a non-finite step costs the AdamW pass, by design. Over n
// floats per buffer, in turn for `rounds` rounds, the median microseconds per pass of:
//   in_place          the update alone, in place (no check: the old engine)
//   check_then_place  engine/core/optimizer.h: all_finite over the gradients, then in place
//   check_one_sum     the same with one vector of sums in the check (latency-bound)
//   deferred          out of place into a second set of buffers, checked in the same loop,
//                     committed by a swap (deferred commit, what the update inside the backward
//                     would need)
//   deferred_stream   the same with non-temporal stores (no read for ownership)
//   build/dev/optimizer_passes 85000 30      (cmake -DBP_DEV=ON; make test builds it)
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <utility>
#include <vector>

#include "engine/kernels/kernels.h"

using Clock = std::chrono::steady_clock;
using bp::AdamWStep;

static bool check_one_sum(const float* g, size_t n) {
  float s = 0;
#pragma omp simd reduction(+ : s)
  for (size_t j = 0; j < n; j++) s += g[j] * 0.0f;
  return s == 0;
}
static bool deferred(const float* p, const float* g, const float* m, const float* v, float* p2,
                     float* m2, float* v2, const AdamWStep<float>& k, size_t n) {
  float bad = 0;
#pragma omp simd reduction(+ : bad)
  for (size_t j = 0; j < n; j++) {
    const float gj = g[j];
    const float mj = k.beta1 * m[j] + (1 - k.beta1) * gj;
    const float vj = k.beta2 * v[j] + (1 - k.beta2) * gj * gj;
    m2[j] = mj, v2[j] = vj;
    p2[j] = p[j] * k.decay - k.step * mj / (std::sqrt(vj) * k.rc2 + k.eps);
    bad += gj * 0.0f;
  }
  return bad == 0;
}
// AVX2 and FMA whatever the build's baseline (CMakeLists.txt: x86-64-v2 on a processor without
// them, where this pass cannot run: main says so).
__attribute__((target("avx2,fma"))) static bool deferred_stream(const float* p, const float* g,
                                                                const float* m, const float* v,
                                                                float* p2, float* m2, float* v2,
                                                                const AdamWStep<float>& k,
                                                                size_t n) {
  const __m256 b1 = _mm256_set1_ps(k.beta1), b2 = _mm256_set1_ps(k.beta2),
               c1 = _mm256_set1_ps(1 - k.beta1), c2 = _mm256_set1_ps(1 - k.beta2),
               eps = _mm256_set1_ps(k.eps), decay = _mm256_set1_ps(k.decay),
               step = _mm256_set1_ps(k.step), rc2 = _mm256_set1_ps(k.rc2);
  __m256 bad = _mm256_setzero_ps();
  for (size_t j = 0; j < n; j += 8) {  // n a multiple of 8, buffers 32-byte aligned
    const __m256 gj = _mm256_load_ps(g + j);
    const __m256 mj = _mm256_fmadd_ps(b1, _mm256_load_ps(m + j), _mm256_mul_ps(c1, gj));
    const __m256 vj =
        _mm256_fmadd_ps(b2, _mm256_load_ps(v + j), _mm256_mul_ps(_mm256_mul_ps(c2, gj), gj));
    _mm256_stream_ps(m2 + j, mj), _mm256_stream_ps(v2 + j, vj);
    const __m256 den = _mm256_fmadd_ps(_mm256_sqrt_ps(vj), rc2, eps);
    _mm256_stream_ps(p2 + j, _mm256_sub_ps(_mm256_mul_ps(_mm256_load_ps(p + j), decay),
                                           _mm256_div_ps(_mm256_mul_ps(step, mj), den)));
    bad = _mm256_fmadd_ps(gj, _mm256_setzero_ps(), bad);
  }
  float lanes[8];
  _mm256_storeu_ps(lanes, bad);
  float s = 0;
  for (float x : lanes) s += x;
  return s == 0;
}

int main(int argc, char** argv) {
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma"))
    return std::fprintf(stderr, "passes: its loops are AVX2 and FMA, which this processor lacks\n"),
           2;
  const size_t n = argc > 1 ? size_t(std::atol(argv[1])) / 16 * 16 : 85000 / 16 * 16;
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 30;
  if (n < 16 || rounds < 1) {
    std::fprintf(stderr, "usage: optimizer_passes FLOATS(>=16) ROUNDS(>=1)\n");
    return 2;
  }
  float* b[7];
  for (float*& x : b) {
    x = static_cast<float*>(std::aligned_alloc(64, n * sizeof(float)));
    for (size_t i = 0; i < n; i++) x[i] = 0.001f * float(i % 97);
  }
  const AdamWStep<float> k = bp::adamw_coefficients<float>(1e-3, 0.9, 0.999, 1e-8, 0.01, 3);
  const char* names[] = {"in_place", "check_then_place", "check_one_sum", "deferred",
                         "deferred_stream"};
  constexpr int kDesigns = 5;
  std::vector<double> us[kDesigns];
  const int reps = int(std::max<size_t>(1, size_t(2e7) / n));
  bool ok = true;
  for (int r = 0; r < rounds; r++)
    for (int d = 0; d < kDesigns; d++) {
      const auto t0 = Clock::now();
      for (int i = 0; i < reps; i++) {
        if (d == 0) bp::adamw_update(b[0], b[1], b[2], b[3], k, n);
        if (d == 1 && (ok &= bp::all_finite(b[1], n)))
          bp::adamw_update(b[0], b[1], b[2], b[3], k, n);
        if (d == 2 && (ok &= check_one_sum(b[1], n)))
          bp::adamw_update(b[0], b[1], b[2], b[3], k, n);
        if (d >= 3) {
          ok &=
              (d == 3 ? deferred : deferred_stream)(b[0], b[1], b[2], b[3], b[4], b[5], b[6], k, n);
          std::swap(b[0], b[4]), std::swap(b[2], b[5]), std::swap(b[3], b[6]);
        }
      }
      us[d].push_back(std::chrono::duration<double>(Clock::now() - t0).count() / reps * 1e6);
    }
  std::printf("AdamW over %zu floats, median of %d rounds in turn (gradients finite: %s)\n", n,
              rounds, ok ? "yes" : "NO");
  double base = 0;
  for (int d = 0; d < kDesigns; d++) {
    std::sort(us[d].begin(), us[d].end());
    const double med = us[d][us[d].size() / 2];
    if (d == 0) base = med;
    std::printf("  %-17s %10.2f us  %5.2fx in_place  %6.1f GB/s of 28 B per element\n", names[d],
                med, med / base, 28.0 * double(n) / med / 1e3);
  }
}
