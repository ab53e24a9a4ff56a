// engine/kernels/bf16_test.cc: bfloat16 (engine/kernels/bf16.h) against a scalar model of the x86
// instructions, bit for bit, on each path the processor has: the conversion on hand-picked edges
// (ties, overflow, NaN, denormals) and two million random floats; the products on shapes that
// cover the tiles' row and column edges and odd k, a and b stored transposed or not, with special
// values (denormals in a, b and c, infinities, NaN, -0); and, in tolerance, against the same
// product in double.
//   build/engine_tests --gtest_filter='Bf16*'
#include "engine/kernels/bf16.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "engine/core/at_threads_test.h"

namespace bf16_test {

using bp::bf16::from_float;
using bp::bf16::Path;
using bp::bf16::to_float;

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float float_of(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
float flushed(float x) { return std::fpclassify(x) == FP_SUBNORMAL ? std::copysign(0.f, x) : x; }

// The model of VDPBF16PS's arithmetic, one pair: inputs flushed, the odd term's product added
// and rounded, flushed, then the even term's.
float pair_step(float acc, uint16_t a_even, uint16_t a_odd, uint16_t b_even, uint16_t b_odd) {
  const float s =
      flushed(std::fma(flushed(to_float(a_odd)), flushed(to_float(b_odd)), flushed(acc)));
  return flushed(std::fma(flushed(to_float(a_even)), flushed(to_float(b_even)), s));
}
void model_gemm(float* c, const uint16_t* a, const uint16_t* b, int M, int K, int N) {
  for (int m = 0; m < M; m++)
    for (int n = 0; n < N; n++) {
      float acc = c[m * N + n];
      for (int k = 0; k < K; k += 2) {
        const bool odd = k + 1 < K;
        acc = pair_step(acc, a[m * K + k], odd ? a[m * K + k + 1] : 0, b[k * N + n],
                        odd ? b[(k + 1) * N + n] : 0);
      }
      c[m * N + n] = acc;
    }
}
std::vector<uint16_t> transposed(const std::vector<uint16_t>& x, int rows, int cols) {
  std::vector<uint16_t> t(x.size());
  bp::transpose(t.data(), x.data(), rows, cols);  // (engine/kernels/products.h)
  return t;
}
std::vector<Path> paths() {
  std::vector<Path> p{Path::widened};
  if (bp::bf16::has_dot_bf16()) p.push_back(Path::dot_bf16);
  return p;
}

TEST(Bf16, ConversionRoundsToNearestEvenFlushesDenormalsAndKeepsNaN) {
  const struct {
    uint32_t in;
    uint16_t out;
  } edges[] = {
      {0x3f800000, 0x3f80},  // 1
      {0x3f808000, 0x3f80},  // a tie, even stays
      {0x3f818000, 0x3f82},  // a tie, odd rounds up
      {0x3f808001, 0x3f81},  // above the tie
      {0xbf80ffff, 0xbf81},  // negative, up in magnitude
      {0x7f7fffff, 0x7f80},  // the largest float rounds to infinity
      {0x7f800000, 0x7f80},  // inf
      {0xff800000, 0xff80},  // -inf
      {0x7fa00001, 0x7fe0},  // a signalling NaN, quieted
      {0xffc00000, 0xffc0},  // -NaN
      {0x7f800001, 0x7fc0},  // a NaN whose payload is all below bf16's bits
      {0x00000001, 0x0000},  // the smallest denormal
      {0x807fffff, 0x8000},  // the largest denormal, negative: -0
      {0x00800000, 0x0080},  // the smallest normal
      {0x80000000, 0x8000},  // -0
  };
  for (const auto& e : edges) {
    EXPECT_EQ(from_float(float_of(e.in)), e.out) << std::hex << e.in;
    uint16_t vec = 0;
    bp::bf16::from_floats(&vec, std::vector<float>(1, float_of(e.in)).data(), 1);
    EXPECT_EQ(vec, e.out) << std::hex << e.in;
  }
  for (uint32_t h : {0x3f80u, 0xc2f7u, 0x0080u, 0x7f80u})
    EXPECT_EQ(from_float(to_float(uint16_t(h))), h);  // bf16 -> float -> bf16 is the identity
  // Two million random floats, a seventh of them denormal, the vector path (where there is one)
  // against the scalar one.
  std::mt19937 g(7);
  std::vector<float> in(1 << 21);
  for (size_t i = 0; i < in.size(); i++) in[i] = float_of(i % 7 ? g() : g() & 0x807fffff);
  std::vector<uint16_t> out(in.size());
  bp::bf16::from_floats(out.data(), in.data(), in.size());
  size_t differ = 0;
  for (size_t i = 0; i < in.size(); i++) differ += out[i] != from_float(in[i]);
  EXPECT_EQ(differ, 0u);
  std::printf("  conversion: %zu random floats, %s path: bitwise the scalar rule\n", in.size(),
              bp::bf16::has_dot_bf16() ? "VCVTNEPS2BF16" : "scalar");
}

TEST(Bf16, ProductsAreTheInstructionsArithmeticOnEveryPath) {
  std::mt19937 g(11);
  std::uniform_real_distribution<float> u(-2.f, 2.f);
  // the last two past one block of the widened path's packs: three blocks of k, and two of k by
  // two of columns
  const int shapes[][3] = {{2, 0, 5},      {1, 1, 1},    {1, 2, 1},     {3, 5, 7},    {8, 4, 16},
                           {8, 7, 32},     {9, 9, 33},   {17, 24, 72},  {8, 96, 24},  {13, 31, 47},
                           {64, 64, 64},   {19, 67, 40}, {16, 130, 48}, {9, 300, 40}, {20, 517, 33},
                           {10, 601, 260}, {7, 301, 700}};
  double worst = 0;
  for (const auto& s : shapes) {
    const int M = s[0], K = s[1], N = s[2];
    std::vector<uint16_t> a(size_t(M) * K), b(size_t(K) * N);
    std::vector<float> c0(size_t(M) * N);
    for (auto& x : a) x = from_float(u(g));
    for (auto& x : b) x = from_float(u(g));
    for (auto& x : c0) x = u(g);
    // special values where the shape has room: a denormal, inf and NaN in a, -0 and a denormal in
    // c, a denormal and a huge value in b
    if (a.size() > 3) a[1] = 0x0001, a[2] = 0x7f80, a[3] = 0x7fc0;
    if (c0.size() > 2) c0[0] = -0.f, c0[1] = float_of(0x00000005);
    if (b.size() > 2) b[0] = 0x8003, b[1] = from_float(3e38f);
    std::vector<float> want = c0;
    model_gemm(want.data(), a.data(), b.data(), M, K, N);
    const std::vector<uint16_t> at = transposed(a, M, K), bt = transposed(b, K, N);
    for (Path p : paths())
      for (int t = 0; t < 4; t++) {  // a, b as they are or stored transposed
        const bool ta = t & 1, tb = t & 2;
        std::vector<float> got = c0, scratch(bp::bf16::gemm_scratch_floats(M, K, N, ta, tb, p));
        bp::bf16::gemm(got.data(), {ta ? at.data() : a.data(), ta, tb ? bt.data() : b.data(), tb},
                       M, K, N, scratch.data(), p);
        for (size_t i = 0; i < got.size(); i++)
          ASSERT_EQ(bits_of(got[i]), bits_of(want[i]))
              << M << "x" << K << "x" << N << (ta ? ", a^T" : "") << (tb ? ", b^T" : "") << " on "
              << bp::bf16::path_name(p) << " at " << i << ": " << got[i] << " against the model's "
              << want[i];
        // fresh: c is not read (here NaN) and gets the product added to zeros
        std::vector<float> fresh(c0.size(), std::nanf("")), from_zero(c0.size(), 0.f);
        model_gemm(from_zero.data(), a.data(), b.data(), M, K, N);
        bp::bf16::gemm(fresh.data(), {ta ? at.data() : a.data(), ta, tb ? bt.data() : b.data(), tb},
                       M, K, N, scratch.data(), p, true);
        ASSERT_EQ(std::memcmp(fresh.data(), from_zero.data(), fresh.size() * 4), 0)
            << M << "x" << K << "x" << N << " written fresh on " << bp::bf16::path_name(p);
      }
    // Finite elements against the product in double: within k float32 roundings of the sum of
    // the terms' magnitudes
    for (int m = 0; m < M; m++)
      for (int n = 0; n < N; n++) {
        double exact = c0[m * N + n], magnitude = std::fabs(exact);
        for (int k = 0; k < K; k++) {
          const double t = double(to_float(a[m * K + k])) * to_float(b[k * N + n]);
          exact += t, magnitude += std::fabs(t);
        }
        if (!std::isfinite(exact) || !std::isfinite(want[m * N + n]) || magnitude == 0) continue;
        const double err = std::fabs(want[m * N + n] - exact) / magnitude;
        EXPECT_LE(err, (K + 1) * std::ldexp(1.0, -24) + 1e-37) << M << "x" << K << "x" << N;
        worst = std::max(worst, err);
      }
  }
  // Where the terms and c are tiny: denormal c taken as zero, denormal results flushed. The model
  // without the flushes differs here, so the paths are seen to flush.
  const int M = 3, K = 3, N = 17;
  std::vector<uint16_t> a(M * K), b(K * N);
  std::vector<float> c0(M * N);
  for (auto& x : a) x = from_float(std::ldexp(u(g), -70));
  for (auto& x : b) x = from_float(std::ldexp(u(g), -70));
  for (size_t i = 0; i < c0.size(); i++) c0[i] = i % 2 ? float_of(uint32_t(g()) & 0x807fffff) : 0.f;
  std::vector<float> want = c0;
  model_gemm(want.data(), a.data(), b.data(), M, K, N);
  size_t flushed_here = 0;
  for (size_t i = 0; i < want.size(); i++) flushed_here += bits_of(want[i]) != bits_of(c0[i]);
  EXPECT_GT(flushed_here, want.size() / 4);
  // A build without FMA (x86-64-v2) multiplies and then adds: an underflowing product flushed to
  // -0, plus +0, is +0 where one fused rounding gives -0. There the zeros' signs may differ.
#if defined(__FMA__)
  constexpr bool kSignedZeros = true;
#else
  constexpr bool kSignedZeros = false;
#endif
  for (Path p : paths()) {
    std::vector<float> got = c0, scratch(bp::bf16::gemm_scratch_floats(M, K, N, false, false, p));
    bp::bf16::gemm(got.data(), {a.data(), false, b.data(), false}, M, K, N, scratch.data(), p);
    for (size_t i = 0; i < got.size(); i++)
      if (kSignedZeros || p == Path::dot_bf16 || got[i] != 0 || want[i] != 0)
        ASSERT_EQ(bits_of(got[i]), bits_of(want[i]))
            << "tiny operands on " << bp::bf16::path_name(p);
  }
  std::printf(
      "  products: 15 shapes, a and b transposed or not, bitwise the VDPBF16PS model on %s; worst "
      "error against double "
      "%.2e of the terms' magnitudes\n",
      bp::bf16::has_dot_bf16() ? "both paths" : "the widened path (no AVX512_BF16 here)", worst);
}

// Split over threads by bands of rows, every product is bitwise the one-thread product, on each
// path.
TEST(Bf16, ProductsAreBitwiseAtAnyThreadCount) {
  std::mt19937 g(5);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  // the last with tiny operands, whose products each thread must flush as the first does
  const int shapes[][4] = {{17, 9, 33, 0}, {64, 24, 72, 0}, {24, 300, 40, 0}, {40, 7, 16, -70}};
  int checked = 0;
  for (const auto& s : shapes) {
    const int M = s[0], K = s[1], N = s[2];
    std::vector<uint16_t> a(size_t(M) * K), b(size_t(K) * N);
    for (auto& x : a) x = from_float(std::ldexp(u(g), s[3]));
    for (auto& x : b) x = from_float(std::ldexp(u(g), s[3]));
    std::vector<float> c0(size_t(M) * N);
    for (auto& x : c0) x = std::ldexp(u(g), 2 * s[3]);
    for (Path p : paths()) {
      std::vector<float> one = c0, scratch(bp::bf16::gemm_scratch_floats(M, K, N, false, false, p));
      bp::bf16::gemm(one.data(), {a.data(), false, b.data(), false}, M, K, N, scratch.data(), p);
      for (int n : {2, 3, 4}) {
        AtThreads at(n, Forced::every_split);
        std::vector<float> got = c0, own(bp::bf16::gemm_scratch_floats(M, K, N, false, false, p));
        bp::bf16::gemm(got.data(), {a.data(), false, b.data(), false}, M, K, N, own.data(), p);
        EXPECT_EQ(std::memcmp(got.data(), one.data(), got.size() * sizeof(float)), 0)
            << M << "x" << K << "x" << N << " on " << bp::bf16::path_name(p) << " at " << n
            << " threads";
        checked++;
      }
    }
  }
  std::printf("  %d products at 2, 3 and 4 threads, every one split: bitwise one thread's\n",
              checked);
}

// BP_BF16_PATH: unset is the processor's best path, widened is always there, anything else (or
// avx512_bf16 on a processor without it) one line and exit 2.
TEST(Bf16, PathFromTheEnvironment) {
  const bp::bf16::Path best =
      bp::bf16::has_dot_bf16() ? bp::bf16::Path::dot_bf16 : bp::bf16::Path::widened;
  EXPECT_EQ(bp::bf16::path_from(nullptr), best);
  EXPECT_EQ(bp::bf16::path_from(""), best);
  EXPECT_EQ(bp::bf16::path_from("widened"), bp::bf16::Path::widened);
  if (bp::bf16::has_dot_bf16()) {
    EXPECT_EQ(bp::bf16::path_from("avx512_bf16"), bp::bf16::Path::dot_bf16);
  } else {
    EXPECT_EXIT(bp::bf16::path_from("avx512_bf16"), testing::ExitedWithCode(2), "BP_BF16_PATH");
  }
  EXPECT_EXIT(bp::bf16::path_from("fp16"), testing::ExitedWithCode(2),
              "BP_BF16_PATH: 'fp16' is not a path this processor has \\(widened");
}

}  // namespace bf16_test
