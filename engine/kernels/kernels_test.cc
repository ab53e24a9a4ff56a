// engine/kernels/kernels_test.cc: the float32 kernels that the finite-difference tests (in
// double, engine/core/tensor_test.cc) do not run: exp and tanh swept against libm and at their
// edges, every path of the matrix products against a plain product in double and, in float, bit
// for bit against the in-order chain of fused multiply-adds, and attention over lanes (positions
// or keys) against the position-by-position kernel.
//   build/engine_tests --gtest_filter='Kernels*'     (or ctest -R Kernels)
#include "engine/kernels/kernels.h"

#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "engine/dialects/kernels_reference.h"
#include "engine/kernels/products.h"

namespace {

// ---- the float32 kernels, which the finite-difference tests (in double) do not run ----

// Every 4099th float in range against libm in double: |got - exact| <= bound * max(|exact|,
// FLT_MIN), i.e. relative for normal results and a few denormal ulps below FLT_MIN. Measured
// worst over every 97th float: exp 1.01e-7, tanh 1.88e-7 (float epsilon is 1.19e-7).
template <class F, class Exact>
double sweep(F f, Exact exact, float lo, float hi, float* worst_at) {
  double worst = 0;
  for (uint64_t bits = 0; bits <= 0xFFFFFFFFull; bits += 4099) {
    const uint32_t b = uint32_t(bits);
    float x;
    std::memcpy(&x, &b, sizeof x);
    if (!(x >= lo && x <= hi)) continue;
    const double want = exact(double(x));
    const double err = std::fabs(double(f(x)) - want) / std::max(std::fabs(want), double(FLT_MIN));
    if (!(err <= worst)) worst = err, *worst_at = x;
  }
  return worst;
}

TEST(Kernels, ExpMatchesLibmAcrossItsRange) {
  float at = 0;
  const double worst = sweep([](float x) { return bp::exp_f32(x); },
                             [](double x) { return std::exp(x); }, -110.f, 88.72f, &at);
  std::printf("  exp_f32 on [-110, 88.72]: max error %.3g at %g (bound 2.5e-7)\n", worst, at);
  EXPECT_LE(worst, 2.5e-7);
}

TEST(Kernels, TanhMatchesLibmAcrossItsRange) {
  float at = 0;
  const double worst = sweep([](float x) { return bp::tanh_f32(x); },
                             [](double x) { return std::tanh(x); }, -20.f, 20.f, &at);
  std::printf("  tanh_f32 on [-20, 20]: max error %.3g at %g (bound 4e-7)\n", worst, at);
  EXPECT_LE(worst, 4e-7);
}

// exp overflows to inf and underflows through the denormals to 0, as libm's expf does; it is not
// clamped (it once returned 3.7e38 for exp(100) and 1.2e-38 for exp(-100)).
TEST(Kernels, ExpEdges) {
  EXPECT_EQ(bp::exp_f32(100.f), INFINITY);
  EXPECT_EQ(bp::exp_f32(89.f), INFINITY);
  EXPECT_EQ(bp::exp_f32(INFINITY), INFINITY);
  EXPECT_TRUE(std::isfinite(bp::exp_f32(88.72f)));
  EXPECT_FLOAT_EQ(bp::exp_f32(-100.f), std::exp(-100.f));  // 3.78e-44, a denormal
  EXPECT_LT(bp::exp_f32(-100.f), FLT_MIN);
  EXPECT_EQ(bp::exp_f32(-104.f), 0.f);
  EXPECT_EQ(bp::exp_f32(-INFINITY), 0.f);
  EXPECT_TRUE(std::isnan(bp::exp_f32(NAN)));
  EXPECT_EQ(bp::tanh_f32(30.f), 1.f);
  EXPECT_EQ(bp::tanh_f32(-30.f), -1.f);
  EXPECT_EQ(bp::tanh_f32(-1e-30f), -1e-30f);
}

// matmul_accumulate's paths on shapes the op cases are too small for: b transposed by a copy or
// through c^T, and gemm's packed blocks (M >= kPackMinRows; b in one block or several), in double
// against the reference dialect's one-dot-product-per-element loop
// (engine/dialects/kernels_reference.h).
TEST(Kernels, MatmulPathsMatchAPlainProductOnLargeShapes) {
  struct Shape {
    int32_t M, N, K;
  };
  for (const Shape& s : {Shape{33, 70, 65}, Shape{16, 32, 5}, Shape{32, 2048, 64}, Shape{7, 96, 9},
                         Shape{17, 500, 300}, Shape{64, 10, 40}})
    for (const bool ta : {false, true})
      for (const bool tb : {false, true}) {
        const std::vector<double> a = values(size_t(s.M) * s.K, -1, 1, 3),
                                  b = values(size_t(s.K) * s.N, -1, 1, 4),
                                  c0 = values(size_t(s.M) * s.N, -1, 1, 5);
        std::vector<double> got = c0, want = c0;
        std::vector<double> scratch(bp::matmul_scratch_elems(s.M, s.N, s.K, ta, tb) + 1);
        bp::matmul_accumulate(got.data(), a.data(), ta, b.data(), tb, s.M, s.N, s.K,
                              scratch.data());
        bp::reference::Gemm::run(want.data(), a.data(), ta, b.data(), tb, s.M, s.N, s.K,
                                 (double*)nullptr, false);
        double worst = 0;
        for (size_t i = 0; i < got.size(); i++)
          worst = std::max(worst, std::fabs(got[i] - want[i]));
        EXPECT_LE(worst, 1e-12) << s.M << "x" << s.N << "x" << s.K << " ta " << ta << " tb " << tb;
        std::printf("  matmul (%d, %d, %d) trans_a %d trans_b %d: max |diff| %.1e, scratch %zu\n",
                    s.M, s.N, s.K, ta, tb, worst, scratch.size() - 1);
      }
}

// Every path of the products (in place or packed, by a pass of its own or by the first band as it
// computes, the last panel whole or not; one block of b or several, kc = 256 deep; few rows panel
// by panel, kc = 512 deep, in one block or several, rows past the last whole band or none;
// edge tiles cut in rows, in columns, to a half-width panel; a transposed; b transposed through a
// copy, packed from its rows in one block or several, or through c^T) computes each element of c as
// the in-order chain of fused multiply-adds over k, bit for bit: blocking and packing move data
// only, and madd states the fusion that GCC's contraction had left out of the one-column tiles. So
// no choice of path, tile or block changes a result, and the compiled mode's recomputation and the
// eager engine agree bitwise. A fresh product (OpArgs::fresh: c uninitialised, here NaN) gives the
// bits of one added to a zeroed c, and reads nothing of c.
#if defined(__FMA__)
TEST(Kernels, MatmulIsTheInOrderFusedChainOnEveryPath) {
  struct Shape {
    int32_t M, N, K;
  };
  size_t checked = 0;
  for (const Shape& s :
       {Shape{13, 100, 64}, Shape{37, 1000, 64}, Shape{64, 10, 300}, Shape{21, 70, 33},
        Shape{17, 500, 300}, Shape{8, 33, 7}, Shape{20, 88, 8}, Shape{200, 90, 1500},
        Shape{24, 512, 300}, Shape{300, 64, 32}, Shape{16, 320, 1100}, Shape{21, 160, 1000}})
    for (const bool ta : {false, true})
      for (const bool tb : {false, true}) {
        const std::vector<double> a64 = values(size_t(s.M) * s.K, -1, 1, 6),
                                  b64 = values(size_t(s.K) * s.N, -1, 1, 7),
                                  c64 = values(size_t(s.M) * s.N, -1, 1, 8);
        const std::vector<float> a(a64.begin(), a64.end()), b(b64.begin(), b64.end());
        std::vector<float> got(c64.begin(), c64.end()), want = got;
        std::vector<float> scratch(bp::matmul_scratch_elems(s.M, s.N, s.K, ta, tb) + 1);
        bp::matmul_accumulate(got.data(), a.data(), ta, b.data(), tb, s.M, s.N, s.K,
                              scratch.data());
        for (int32_t i = 0; i < s.M; i++)
          for (int32_t j = 0; j < s.N; j++) {
            float acc = want[size_t(i) * s.N + j];
            for (int32_t k = 0; k < s.K; k++)
              acc = std::fma(ta ? a[size_t(k) * s.M + i] : a[size_t(i) * s.K + k],
                             tb ? b[size_t(j) * s.K + k] : b[size_t(k) * s.N + j], acc);
            want[size_t(i) * s.N + j] = acc;
          }
        std::vector<float> fresh(got.size(), NAN), zeroed(got.size(), 0.0f);
        bp::matmul_accumulate(fresh.data(), a.data(), ta, b.data(), tb, s.M, s.N, s.K,
                              scratch.data(), true);
        bp::matmul_accumulate(zeroed.data(), a.data(), ta, b.data(), tb, s.M, s.N, s.K,
                              scratch.data());
        size_t differ = 0, fresh_differ = 0;
        for (size_t i = 0; i < got.size(); i++) {
          differ += std::memcmp(&got[i], &want[i], sizeof(float)) != 0;
          fresh_differ += std::memcmp(&fresh[i], &zeroed[i], sizeof(float)) != 0;
        }
        EXPECT_EQ(differ, 0u) << s.M << "x" << s.N << "x" << s.K << " ta " << ta << " tb " << tb;
        EXPECT_EQ(fresh_differ, 0u)
            << "fresh " << s.M << "x" << s.N << "x" << s.K << " ta " << ta << " tb " << tb;
        checked += got.size();
      }
  std::printf("  %zu elements of c, each its in-order fused chain bit for bit, fresh or not\n",
              checked);
}
#endif

// Attention over positions as lanes (short sequences, heads of 4 and 8) and over keys as lanes
// (17 to 128 positions, heads of 16 to 64) against the position-by-position kernels, forward
// (outputs and probabilities) and backward (gradients added to nonzero ones), in float and
// double, the sequence shorter than the lanes or filling them. The same terms; the lanes fuse
// each multiply-add (madd), where GCC leaves some of the other kernels' unfused, and the key
// lanes sum a score's head in order where the other kernel's vectorized loop sums it in
// strides, so they differ by roundings only (the
// finite-difference and libtorch checks cover both paths: engine/core/op_cases_test.h).
template <class F>
void attention_lanes_against_positions(double tolerance) {
  struct Shape {
    int32_t B, T, H, hs;
  };
  size_t checked = 0;
  double worst = 0;
  for (const Shape& s :
       {Shape{2, 1, 3, 4}, Shape{2, 5, 3, 4}, Shape{2, 8, 6, 4}, Shape{2, 8, 2, 8},
        Shape{1, 13, 2, 4}, Shape{3, 16, 2, 8}, Shape{1, 9, 1, 8}, Shape{2, 17, 2, 16},
        Shape{1, 64, 3, 32}, Shape{1, 47, 1, 64}, Shape{2, 128, 1, 32}, Shape{1, 100, 2, 16}}) {
    const int32_t C = s.H * s.hs, rows = s.B * s.T;
    const std::vector<double> qkv64 = values(size_t(rows) * 3 * C, -2, 2, 11),
                              dout64 = values(size_t(rows) * C, -1, 1, 12),
                              d64 = values(size_t(rows) * 3 * C, -1, 1, 13);
    const std::vector<F> qkv(qkv64.begin(), qkv64.end()), dout(dout64.begin(), dout64.end());
    const size_t np = size_t(s.B) * s.H * s.T * s.T;
    std::vector<F> out(size_t(rows) * C), probs(np), want_out(out.size()), want_probs(np, F(0));
    bp::attention_forward_any(out.data(), probs.data(), qkv.data(), s.B, s.T, s.H, s.hs);
    auto by_position = [&](auto hs_constant) {
      constexpr int HS = decltype(hs_constant)::value;
      std::vector<F> dqkv(d64.begin(), d64.end()), dp(s.T);
      bp::attention_forward<F, HS>(want_out.data(), want_probs.data(), qkv.data(), s.B, s.T, s.H,
                                   s.hs);
      bp::attention_backward<F, HS>(dqkv.data(), dp.data(), dout.data(), want_probs.data(),
                                    qkv.data(), s.B, s.T, s.H, s.hs);
      return dqkv;
    };
    const std::vector<F> want_dqkv = s.hs == 4    ? by_position(std::integral_constant<int, 4>{})
                                     : s.hs == 8  ? by_position(std::integral_constant<int, 8>{})
                                     : s.hs == 16 ? by_position(std::integral_constant<int, 16>{})
                                     : s.hs == 32 ? by_position(std::integral_constant<int, 32>{})
                                                  : by_position(std::integral_constant<int, 64>{});
    std::vector<F> dqkv(d64.begin(), d64.end());
    bp::attention_backward_any(dqkv.data(), (F*)nullptr, dout.data(), probs.data(), qkv.data(), s.B,
                               s.T, s.H, s.hs);
    double diff = 0;  // |difference| / (|value| + 1), worst over every output
    auto compare = [&](const std::vector<F>& got, const std::vector<F>& want) {
      for (size_t i = 0; i < got.size(); i++)
        diff = worse(diff,
                     std::abs(double(got[i]) - double(want[i])) / (std::abs(double(want[i])) + 1));
    };
    compare(out, want_out), compare(probs, want_probs), compare(dqkv, want_dqkv);
    EXPECT_LE(diff, tolerance) << "B " << s.B << " T " << s.T << " H " << s.H << " hs " << s.hs;
    worst = worse(worst, diff);
    checked += out.size() + np + dqkv.size();
  }
  std::printf(
      "  %zu values (%s): max |lanes - by position| / (|by position| + 1) %.1e (tolerance %.0e)\n",
      checked, sizeof(F) == 4 ? "float" : "double", worst, tolerance);
}
TEST(Kernels, AttentionOverLanesMatchesThePositionByPositionKernel) {
  attention_lanes_against_positions<float>(1e-6);
  attention_lanes_against_positions<double>(1e-15);
}

}  // namespace
