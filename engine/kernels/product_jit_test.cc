// engine/kernels/product_jit_test.cc: the generated products (engine/kernels/product_jit.h) on
// every instruction set the processor has: bit for bit the tiled kernel's products, and within a
// tolerance of a product in double, on shapes that cover every tiling (one to four vectors a
// block, row groups of r + 1 and r, the column edge masked or whole, k inline or looped with a
// remainder), a transposed or not, fresh or not; operands that end at an unreadable page, so that
// a read or write past the last column or row faults; and a system that refuses executable pages.
//   build/engine_tests --gtest_filter='ProductJit*'
#include "engine/kernels/product_jit.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "engine/core/at_threads_test.h"
#include "engine/core/op_cases_test.h"  // values

namespace {

using bp::product_jit::Isa;

// n floats that end where an unreadable page starts.
class Fenced {
 public:
  explicit Fenced(size_t n) {
    const size_t page = size_t(sysconf(_SC_PAGESIZE));
    bytes_ = (n * sizeof(float) + page - 1) / page * page + page;
    base_ = static_cast<uint8_t*>(
        mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    mprotect(base_ + bytes_ - page, page, PROT_NONE);
    data_ = reinterpret_cast<float*>(base_ + bytes_ - page) - n;
  }
  ~Fenced() { munmap(base_, bytes_); }
  float* data() { return data_; }

 private:
  uint8_t* base_;
  size_t bytes_;
  float* data_;
};

std::vector<Isa> isas_here() {
  std::vector<Isa> here;
  for (Isa i : {Isa::avx2, Isa::avx512})
    if (bp::product_jit::processor_isa() >= i) here.push_back(i);
  return here;
}

struct ProductCase {
  int32_t M, N, K;
};
std::vector<ProductCase> product_cases() {
  std::vector<ProductCase> all = {{1, 1, 1},     {8, 24, 24},  {8, 72, 24},   {24, 8, 72},
                                  {72, 24, 8},   {8, 96, 24},  {96, 24, 8},   {1, 65, 24},
                                  {16, 17, 33},  {31, 64, 18}, {64, 10, 300}, {100, 7, 17},
                                  {256, 72, 24}, {9, 130, 5},  {5, 512, 3},   {33, 48, 16},
                                  {17, 129, 19}, {2, 3, 100},  {300, 40, 333}};
  uint64_t x = 0x9e3779b97f4a7c15ull;  // and some drawn at random, the same every run
  for (int i = 0; i < 40; i++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    all.push_back({int32_t(1 + x % 40), int32_t(1 + (x >> 8) % 150), int32_t(1 + (x >> 20) % 45)});
  }
  return all;
}

TEST(ProductJit, EveryShapeIsTheTiledKernelsBitsOnEveryIsa) {
  const std::vector<Isa> isas = isas_here();
  if (isas.empty()) GTEST_SKIP() << "neither AVX2 with FMA nor AVX-512F: no generated products";
  size_t checked = 0;
  double worst = 0;
  for (Isa isa : isas) {
    bp::product_jit::isa_wanted() = isa;
    for (const ProductCase& s : product_cases())
      for (const bool ta : {false, true})
        for (const bool tb : {false, true})
          for (const bool fresh : {false, true}) {
            ASSERT_TRUE(bp::GeneratedGemm::available<float>(s.M, s.N, s.K, ta, tb))
                << s.M << "x" << s.N << "x" << s.K;
            const size_t mk = size_t(s.M) * s.K, kn = size_t(s.K) * s.N, mn = size_t(s.M) * s.N;
            const std::vector<double> a64 = values(mk, -1, 1, 21), b64 = values(kn, -1, 1, 22),
                                      c64 = values(mn, -1, 1, 23);
            Fenced a(mk), b(kn), c(mn);
            std::copy(a64.begin(), a64.end(), a.data());
            std::copy(b64.begin(), b64.end(), b.data());
            for (size_t i = 0; i < mn; i++) c.data()[i] = fresh ? NAN : float(c64[i]);
            std::vector<float> want(c64.begin(), c64.end());
            if (fresh) std::fill(want.begin(), want.end(), 0.0f);
            std::vector<float> scratch(
                std::max(bp::matmul_scratch_elems(s.M, s.N, s.K, ta, tb),
                         bp::GeneratedGemm::scratch_elems(s.M, s.N, s.K, ta, tb)) +
                1);
            bp::GeneratedGemm::run(c.data(), a.data(), ta, b.data(), tb, s.M, s.N, s.K,
                                   scratch.data(), fresh);
            bp::matmul_accumulate(want.data(), a.data(), ta, b.data(), tb, s.M, s.N, s.K,
                                  scratch.data());
            size_t differ = 0;
            for (size_t i = 0; i < mn; i++) {
              differ += std::memcmp(&c.data()[i], &want[i], sizeof(float)) != 0;
              double exact = fresh ? 0 : double(float(c64[i]));
              const size_t r = i / s.N, col = i % s.N;
              for (int32_t k = 0; k < s.K; k++)
                exact += double(a.data()[ta ? size_t(k) * s.M + r : r * s.K + k]) *
                         double(b.data()[tb ? col * s.K + k : size_t(k) * s.N + col]);
              worst = std::max(worst, std::fabs(double(c.data()[i]) - exact) / (s.K + 1));
            }
            EXPECT_EQ(differ, 0u) << bp::product_jit::isa_name(isa) << " " << s.M << "x" << s.N
                                  << "x" << s.K << " ta " << ta << " tb " << tb << " fresh "
                                  << fresh;
            checked += mn;
          }
  }
  bp::product_jit::isa_wanted() = Isa::none;
  std::printf(
      "  %zu elements of c on %zu instruction sets, each the tiled kernel's bits; max |c - c in "
      "double| / (K + 1) %.1e (tolerance 1e-6); %zu kernels, %zu bytes of code\n",
      checked, isas.size(), worst, bp::product_jit::registry().kernels(),
      bp::product_jit::registry().code_bytes());
  EXPECT_LE(worst, 1e-6);
}

// Split over two threads by bands of rows (every product split, as the tiled kernel splits it),
// each band its own kernel, a transposed read from its own column: the same bits.
TEST(ProductJit, SplitByRowsOverThreadsIsTheSameBits) {
  if (isas_here().empty()) GTEST_SKIP() << "no generated products on this processor";
  const AtThreads two(2, Forced::every_split);
  size_t checked = 0;
  for (const ProductCase& s : {ProductCase{64, 40, 17}, ProductCase{100, 7, 17},
                               ProductCase{256, 72, 24}, ProductCase{49, 130, 9}})
    for (const bool ta : {false, true})
      for (const bool fresh : {false, true}) {
        ASSERT_TRUE(bp::gemm_split_of(s.M, s.K, s.N).by_rows);
        ASSERT_GT(bp::gemm_split_of(s.M, s.K, s.N).parts, 1);
        ASSERT_TRUE(bp::GeneratedGemm::available<float>(s.M, s.N, s.K, ta, false));
        const std::vector<double> a64 = values(size_t(s.M) * s.K, -1, 1, 41),
                                  b64 = values(size_t(s.K) * s.N, -1, 1, 42),
                                  c64 = values(size_t(s.M) * s.N, -1, 1, 43);
        const std::vector<float> a(a64.begin(), a64.end()), b(b64.begin(), b64.end());
        std::vector<float> got(c64.begin(), c64.end()), want = got;
        if (fresh) std::fill(got.begin(), got.end(), NAN), std::fill(want.begin(), want.end(), 0.f);
        std::vector<float> scratch(bp::matmul_scratch_elems(s.M, s.N, s.K, ta, false) + 1);
        bp::GeneratedGemm::run(got.data(), a.data(), ta, b.data(), false, s.M, s.N, s.K,
                               scratch.data(), fresh);
        bp::matmul_accumulate(want.data(), a.data(), ta, b.data(), false, s.M, s.N, s.K,
                              scratch.data());
        EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0)
            << s.M << "x" << s.N << "x" << s.K << " ta " << ta << " fresh " << fresh;
        checked += got.size();
      }
  std::printf("  %zu elements of c over 2 threads, each the tiled kernel's bits\n", checked);
}

// linear's forward as one kernel, its bias and relu in the tiles, against the op's own code over
// the tiled kernel (the bias copied in, the product, the relu pass): the same bits, a NaN and
// products that round to -0 among the inputs, on every instruction set.
TEST(ProductJit, LinearsForwardWithItsBiasAndReluInTheTilesIsTheOpsBits) {
  const std::vector<Isa> isas = isas_here();
  if (isas.empty()) GTEST_SKIP() << "no generated products on this processor";
  size_t checked = 0;
  for (Isa isa : isas) {
    bp::product_jit::isa_wanted() = isa;
    for (const ProductCase& s : {ProductCase{8, 72, 24}, ProductCase{8, 24, 96},
                                 ProductCase{37, 10, 19}, ProductCase{1, 65, 3}})
      for (const bool relu : {false, true}) {
        const int32_t N = s.M, OC = s.N, C = s.K;
        const std::vector<double> x64 = values(size_t(N) * C, -1, 1, 51),
                                  w64 = values(size_t(OC) * C, -1, 1, 52),
                                  b64 = values(size_t(OC), -1, 1, 53);
        std::vector<float> x(x64.begin(), x64.end()), w(w64.begin(), w64.end()),
            bias(b64.begin(), b64.end());
        x[0] = NAN;  // row 0: NaN everywhere
        if (N > 1) std::fill(x.begin() + C, x.begin() + 2 * C, 0.f), bias[0] = -0.f;  // -0
        bp::OpArgs<float> a;
        a.rows = N, a.cols = OC, a.arg[0] = relu;
        a.in_rows[0] = N, a.in_cols[0] = C, a.in_rows[1] = OC, a.in_cols[1] = C;
        a.in_rows[2] = 1, a.in_cols[2] = OC;
        a.in[0] = x.data(), a.in[1] = w.data(), a.in[2] = bias.data();
        std::vector<float> scratch(bp::matmul_scratch_elems(N, OC, C, false, true) + C * OC + 16);
        a.scratch = scratch.data();
        std::vector<float> got(size_t(N) * OC, 7.f), want(got.size(), 7.f);
        a.out = want.data();
        bp::ops::linear_forward<float, bp::TiledGemm>(a);
        a.out = got.data();
        ASSERT_TRUE(bp::GeneratedGemm::linear_forward(a.out, a.in[0], a.in[1], a.in[2], N, OC, C,
                                                      relu, a.scratch));
        EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0)
            << bp::product_jit::isa_name(isa) << " " << N << "x" << OC << "x" << C << " relu "
            << relu;
        checked += got.size();
      }
  }
  bp::product_jit::isa_wanted() = Isa::none;
  std::printf("  %zu outputs of linear, bias and relu in the tiles, each the op's own bits\n",
              checked);
}

// What the dialect takes: small float products (2^22 multiply-adds, 512 columns), float only.
TEST(ProductJit, TakesSmallFloatProductsOnly) {
  if (isas_here().empty()) GTEST_SKIP() << "no generated products on this processor";
  EXPECT_TRUE(bp::GeneratedGemm::available<float>(8, 24, 24, false, true));
  EXPECT_FALSE(bp::GeneratedGemm::available<double>(8, 24, 24, false, true));
  EXPECT_FALSE(bp::GeneratedGemm::available<float>(8, 513, 24, false, false));
  EXPECT_FALSE(bp::GeneratedGemm::available<float>(2048, 384, 128, false, true));  // 10^8
  EXPECT_FALSE(bp::GeneratedGemm::available<float>(0, 24, 24, false, false));
}

// A system that will not make written pages executable: one line, the dialect unavailable, and
// a product asked for anyway (a plan that named the dialect) gets the tiled kernel's bits.
TEST(ProductJit, RefusedPagesLeaveTheTiledKernel) {
  auto& r = bp::product_jit::registry();
  r.refuse_for_tests(true);
  EXPECT_FALSE(bp::GeneratedGemm::available<float>(11, 37, 13, false, false));
  const std::vector<double> a64 = values(11 * 13, -1, 1, 31), b64 = values(13 * 37, -1, 1, 32);
  const std::vector<float> a(a64.begin(), a64.end()), b(b64.begin(), b64.end());
  std::vector<float> got(11 * 37, 0.5f), want = got;
  bp::GeneratedGemm::run(got.data(), a.data(), false, b.data(), false, 11, 37, 13, (float*)nullptr,
                         false);
  bp::matmul_accumulate(want.data(), a.data(), false, b.data(), false, 11, 37, 13, (float*)nullptr);
  r.refuse_for_tests(false);
  EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0);
  if (!isas_here().empty()) {
    EXPECT_TRUE(bp::GeneratedGemm::available<float>(11, 37, 13, false, false));
  }
}

}  // namespace
