// engine/kernels/products.h: the matrix products of the matmul and linear ops, c (M, N) += op(a)
// op(b) over raw row-major buffers: register tiles, BLIS-style blocking and packing, the few-row
// path, transposes, and TiledGemm, the product policy of the `engine` dialect
// (engine/dialects/dialects.h; the libraries' policies are engine/kernels/library.h). Shared by the
// eager tape and the compiled program as every kernel of engine/kernels/kernels.h is.
//
// Tests: engine/core/tensor_test.cc (every path, blocked and packed ones included, against a plain
// product in double and, in float, bit for bit against the in-order chain of fused
// multiply-adds; fresh products on NaN-filled outputs).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>

#if defined(__AVX__)
#include <immintrin.h>
#endif

#include "engine/kernels/isa_namespace.h"
#include "engine/kernels/kernels.h"  // madd
#include "engine/runtime/threads.h"

namespace bp {
BP_KERNELS_BEGIN

// Scratch is carved in pieces of whole cache lines, so each piece starts aligned as an arena's
// would.
inline constexpr size_t kScratchAlign = 16;
inline size_t scratch_round(size_t n) {
  return (n + kScratchAlign - 1) / kScratchAlign * kScratchAlign;
}

// The register tile of the products, from the vector registers the unit targets (the baseline, or
// engine/core/ops_avx512.cc above it; engine/kernels/isa_namespace.h):
// AVX-512 has 32 of 16 floats, AVX2 16 of 8. A tile of MR rows x NR columns keeps MR * NR / lanes
// accumulators, plus the vectors of b's row and a broadcast of a: 8 x 32 floats is 16 of
// AVX-512's 32 registers, but would be 32 of AVX2's 16 and spill every k; there 6 x 16 (12
// accumulators) is the tile (dev/notes.md, "The AVX2 register tile"). The tile changes only which
// sums run side by side: each element of c adds its k terms in the same order, so the bits are
// those of any other tile.
#if defined(BP_KERNEL_AVX512)
inline constexpr int32_t kVectorBytes = 64, kTileRows = 8;
#else
inline constexpr int32_t kVectorBytes = 32, kTileRows = 6;
#endif
template <class T>
inline constexpr int32_t kPanel = 2 * kVectorBytes / int32_t(sizeof(T));  // NR: two vectors

// c (M, N) += a (M, K) @ b (K, N), row-major, c's rows ldc apart and b's ldb. The output is
// computed in tiles of MR rows x NR columns held in registers across the whole k loop: per k,
// two vector loads of b, MR broadcasts of a, 2 MR fused multiply-adds. a(i, k) is
// a[i * rs + k * cs]. fresh: c is uninitialised and the sums start from zero instead of c, the
// same bits as adding to a zeroed c (OpArgs::fresh).
template <class T, int MR, int NR>
inline void gemm_tile(T* c, int32_t ldc, const T* a, int32_t rs, int32_t cs, const T* b,
                      int32_t ldb, int32_t K, bool fresh) {
  T acc[MR][NR];
  for (int i = 0; i < MR; i++)
    for (int j = 0; j < NR; j++) acc[i][j] = fresh ? T(0) : c[size_t(i) * ldc + j];
  for (int32_t k = 0; k < K; k++) {
    const T* bk = b + size_t(k) * ldb;
    for (int i = 0; i < MR; i++) {
      const T av = a[size_t(i) * rs + size_t(k) * cs];
#pragma omp simd
      for (int j = 0; j < NR; j++) acc[i][j] = madd(av, bk[j], acc[i][j]);
    }
  }
  for (int i = 0; i < MR; i++)
    for (int j = 0; j < NR; j++) c[size_t(i) * ldc + j] = acc[i][j];
}
#if defined(BP_KERNEL_AVX2)
// The main tile of float products, kTileRows rows of two vectors (AVX-512's 8 x 32, AVX2's 6 x
// 16), its accumulators named (l0 ... l7 and h0 ... h7; the rows past kTileRows are never used
// and cost nothing): GCC keeps arrays of them (the generic tile's) in registers through the k
// loop but moves them through the stack on the way in and out, which the weight gradients
// (K = 64) pay every 64 steps. The lambdas that name the rows' work are always inlined, or GCC
// keeps one a call with its accumulators passed through memory. With AVX-512 the tile itself is
// always inlined; with AVX2 GCC chooses, and calls it from the bands (dev/notes.md, "Few rows,
// panel by panel; the tile's accumulators named" and "AVX2 products reworked").
// The same fused multiply-adds in the same order: the bits are the generic tile's.
// PackB: b is read where it is (rows ldb apart, kPackAheadRows of them asked for ahead) and each
// row written to `pack` (2 vectors apart) on the way: the first band over a block packs it (gemm).
// Ahead: while it computes, the tile asks for `ahead`'s first ahead_rows rows (ahead_ld apart, two
// vectors each) into L2, one a step: the panel a later tile packs (gemm_few_rows).
#if defined(BP_KERNEL_AVX512)
struct FloatVector {
  using V = __m512;
  static constexpr int32_t lanes = 16, registers = 32;
  static V zero() { return _mm512_setzero_ps(); }
  static V load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, V v) { _mm512_storeu_ps(p, v); }
  static V broadcast(float x) { return _mm512_set1_ps(x); }
  static V fmadd(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
};
#else
struct FloatVector {
  using V = __m256;
  static constexpr int32_t lanes = 8, registers = 16;
  static V zero() { return _mm256_setzero_ps(); }
  static V load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, V v) { _mm256_storeu_ps(p, v); }
  static V broadcast(float x) { return _mm256_set1_ps(x); }
  static V fmadd(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
};
#endif
static_assert(kPanel<float> == 2 * FloatVector::lanes, "a float panel is the tile's two vectors");
inline constexpr int32_t kPackAheadRows = 16;
#if defined(BP_KERNEL_AVX512)
#define BP_FLOAT_TILE_INLINE __attribute__((always_inline)) inline
#else
#define BP_FLOAT_TILE_INLINE inline
#endif
template <bool PackB, bool Ahead = false>
BP_FLOAT_TILE_INLINE void gemm_tile_float(float* c, int32_t ldc, const float* a, int32_t rs,
                                          int32_t cs, const float* b, int32_t ldb, int32_t K,
                                          bool fresh, float* pack, const float* ahead = nullptr,
                                          int32_t ahead_ld = 0, int32_t ahead_rows = 0) {
  using F = FloatVector;
  using V = F::V;
  constexpr int32_t MR = kTileRows, L = F::lanes;
  static_assert(MR == 6 || MR == 8, "the named rows below are 6 or 8");
  V l0, l1, l2, l3, l4, l5, l6, l7, h0, h1, h2, h3, h4, h5, h6, h7;
  const auto rows = [&](auto&& f) __attribute__((always_inline)) {
    f(l0, h0, 0), f(l1, h1, 1), f(l2, h2, 2), f(l3, h3, 3), f(l4, h4, 4), f(l5, h5, 5);
    if constexpr (MR == 8) f(l6, h6, 6), f(l7, h7, 7);
  };
  rows([&](V & l, V & h, int i) __attribute__((always_inline)) {
    l = fresh ? F::zero() : F::load(c + size_t(i) * ldc);
    h = fresh ? F::zero() : F::load(c + size_t(i) * ldc + L);
  });
  for (int32_t k = 0; k < K; k++) {
    const float* bk = b + size_t(k) * ldb;
    if constexpr (PackB)
      if (k + kPackAheadRows < K)
        for (int32_t j = 0; j < 2 * L; j += 64 / int32_t(sizeof(float)))
          _mm_prefetch(reinterpret_cast<const char*>(bk + size_t(kPackAheadRows) * ldb + j),
                       _MM_HINT_T0);
    if constexpr (Ahead)
      if (k < ahead_rows)
        for (int32_t j = 0; j < 2 * L; j += 64 / int32_t(sizeof(float)))
          _mm_prefetch(reinterpret_cast<const char*>(ahead + size_t(k) * ahead_ld + j),
                       _MM_HINT_T1);
    const V b0 = F::load(bk), b1 = F::load(bk + L);
    if constexpr (PackB) {
      F::store(pack + size_t(k) * 2 * L, b0);
      F::store(pack + size_t(k) * 2 * L + L, b1);
    }
    const float* ak = a + size_t(k) * cs;
    rows([&](V & l, V & h, int i) __attribute__((always_inline)) {
      const V av = F::broadcast(ak[size_t(i) * rs]);
      l = F::fmadd(av, b0, l);
      h = F::fmadd(av, b1, h);
    });
  }
  rows([&](V & l, V & h, int i) __attribute__((always_inline)) {
    F::store(c + size_t(i) * ldc, l);
    F::store(c + size_t(i) * ldc + L, h);
  });
}
#undef BP_FLOAT_TILE_INLINE
template <>
inline void gemm_tile<float, kTileRows, 2 * FloatVector::lanes>(float* c, int32_t ldc,
                                                                const float* a, int32_t rs,
                                                                int32_t cs, const float* b,
                                                                int32_t ldb, int32_t K,
                                                                bool fresh) {
  gemm_tile_float<false>(c, ldc, a, rs, cs, b, ldb, K, fresh, nullptr);
}
#endif
// A tile at c's edge, rows x cols of it real: the same full tile on a copy, a and b padded with
// zeros (packed), so the k loop is the one above and only the copy in and out is cut.
template <class T, int MR, int NR>
inline void gemm_edge_tile(T* c, int32_t ldc, const T* a, int32_t rs, int32_t cs, const T* b,
                           int32_t ldb, int32_t K, int32_t rows, int32_t cols, bool fresh) {
  T part[MR * NR] = {};
  for (int32_t i = 0; i < rows && !fresh; i++)
    for (int32_t j = 0; j < cols; j++) part[i * NR + j] = c[size_t(i) * ldc + j];
  gemm_tile<T, MR, NR>(part, NR, a, rs, cs, b, ldb, K, fresh);
  for (int32_t i = 0; i < rows; i++)
    for (int32_t j = 0; j < cols; j++) c[size_t(i) * ldc + j] = part[i * NR + j];
}
// A tile whose columns all exist, rows of its MR real: in place when the band is whole.
template <class T, int MR, int NR>
inline void gemm_cut_tile(T* c, int32_t ldc, const T* a, int32_t rs, int32_t cs, const T* b,
                          int32_t ldb, int32_t K, int32_t rows, bool fresh) {
  if (rows == MR)
    gemm_tile<T, MR, NR>(c, ldc, a, rs, cs, b, ldb, K, fresh);
  else
    gemm_edge_tile<T, MR, NR>(c, ldc, a, rs, cs, b, ldb, K, rows, NR, fresh);
}
// The products of fewer than kPackMinRows rows read a and b in place, a panel of NR columns at a
// time (then NR / 2, NR / 4, one). kTileRows rows keep 2 kTileRows independent accumulator chains
// in flight, enough to hide the FMA latency even on the 24-wide matrices of mini_gpt; the last
// rows go by 4, by 2 (a full panel's four chains still cover the latency, where single rows
// took almost twice as long on M = 10), then one.
template <class T, int NR>
inline void gemm_panel(T* c, int32_t ldc, const T* a, int32_t rs, int32_t cs, const T* b,
                       int32_t ldb, int32_t M, int32_t K, bool fresh) {
  int32_t m = 0;
  for (; m + kTileRows <= M; m += kTileRows)
    gemm_tile<T, kTileRows, NR>(c + size_t(m) * ldc, ldc, a + size_t(m) * rs, rs, cs, b, ldb, K,
                                fresh);
  for (; m + 4 <= M; m += 4)
    gemm_tile<T, 4, NR>(c + size_t(m) * ldc, ldc, a + size_t(m) * rs, rs, cs, b, ldb, K, fresh);
  for (; m + 2 <= M; m += 2)
    gemm_tile<T, 2, NR>(c + size_t(m) * ldc, ldc, a + size_t(m) * rs, rs, cs, b, ldb, K, fresh);
  for (; m < M; m++)
    gemm_tile<T, 1, NR>(c + size_t(m) * ldc, ldc, a + size_t(m) * rs, rs, cs, b, ldb, K, fresh);
}

#if defined(__AVX__)
// out's 8 x 8 block = in's 8 x 8 block transposed, in registers: rows interleaved by pairs, then
// by fours, then the 128-bit halves exchanged (24 shuffles for 64 floats, where the scalar loop
// moved one float per load and store). in_rows < 8: only that many rows of in exist, and out's
// columns past them are zeros (a panel's padding; pack_transposed_block).
inline void transpose8x8(float* out, int32_t ldo, const float* in, int32_t ldi, int in_rows = 8) {
  __m256 r[8], t[8];
  for (int i = 0; i < 8; i++)
    r[i] = i < in_rows ? _mm256_loadu_ps(in + size_t(i) * ldi) : _mm256_setzero_ps();
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 8; i += 4)
    for (int j = 0; j < 2; j++) {
      r[i + j] = _mm256_shuffle_ps(t[i + j], t[i + j + 2], _MM_SHUFFLE(1, 0, 1, 0));
      r[i + j + 2] = _mm256_shuffle_ps(t[i + j], t[i + j + 2], _MM_SHUFFLE(3, 2, 3, 2));
    }
  // r[0], r[2], r[1], r[3]: columns 0-3 of rows 0-3 in their low halves, columns 4-7 in their
  // high halves; r[4..7] the same of rows 4-7
  constexpr int order[4] = {0, 2, 1, 3};
  for (int j = 0; j < 4; j++) {
    _mm256_storeu_ps(out + size_t(j) * ldo,
                     _mm256_permute2f128_ps(r[order[j]], r[4 + order[j]], 0x20));
    _mm256_storeu_ps(out + size_t(j + 4) * ldo,
                     _mm256_permute2f128_ps(r[order[j]], r[4 + order[j]], 0x31));
  }
}
#endif
// out (C, R) = in (R, C)^T, in 16 x 16 blocks so that both sides move a cache line at a time;
// within them floats go 8 x 8 in registers, the edges (and doubles) one by one.
template <class T>
inline void transpose(T* out, const T* in, int32_t R, int32_t C) {
  constexpr int32_t kB = 16;
  for (int32_t r0 = 0; r0 < R; r0 += kB)
    for (int32_t c0 = 0; c0 < C; c0 += kB)
      for (int32_t r8 = r0; r8 < std::min(R, r0 + kB); r8 += 8)
        for (int32_t c8 = c0; c8 < std::min(C, c0 + kB); c8 += 8) {
          const int32_t r1 = std::min(R, r8 + 8), c1 = std::min(C, c8 + 8);
#if defined(__AVX__)
          if constexpr (std::is_same_v<T, float>)
            if (r1 - r8 == 8 && c1 - c8 == 8) {
              transpose8x8(out + size_t(c8) * R + r8, R, in + size_t(r8) * C + c8, C);
              continue;
            }
#endif
          for (int32_t r = r8; r < r1; r++)
            for (int32_t c = c8; c < c1; c++) out[size_t(c) * R + r] = in[size_t(r) * C + c];
        }
}

// c (M, N) += op(a) b with a and b read where they are, a panel of columns at a time and no
// scratch: gemm's path below kPackMinRows rows, for any M.
template <class T>
inline void gemm_in_place(T* c, int32_t ldc, const T* a, int32_t rs, int32_t cs, const T* b,
                          int32_t ldb, int32_t M, int32_t K, int32_t N, bool fresh) {
  constexpr int32_t NR = kPanel<T>;
  int32_t n = 0;
  for (; n + NR <= N; n += NR) gemm_panel<T, NR>(c + n, ldc, a, rs, cs, b + n, ldb, M, K, fresh);
  for (; n + NR / 2 <= N; n += NR / 2)
    gemm_panel<T, NR / 2>(c + n, ldc, a, rs, cs, b + n, ldb, M, K, fresh);
  for (; n + NR / 4 <= N; n += NR / 4)
    gemm_panel<T, NR / 4>(c + n, ldc, a, rs, cs, b + n, ldb, M, K, fresh);
  for (; n < N; n++) gemm_panel<T, 1>(c + n, ldc, a, rs, cs, b + n, ldb, M, K, fresh);
}

// b as the policies that read it only as (K, N) take it (LIBXSMM's, the generated code): itself,
// or, stored (N, K), its transpose copied into scratch (K * N elements).
template <class T>
inline const T* b_as_rows(const T* b, bool trans_b, int32_t N, int32_t K, T* scratch) {
  if (!trans_b) return b;
  transpose(scratch, b, N, K);
  return scratch;
}

// Packed products (M >= kPackMinRows), blocked as in BLIS (Van Zee and van de Geijn 2015): b is
// taken a block of kc rows x nc columns at a time, at most kPackBlockElems (half of a 1 MB L2),
// and copied into panels of NR columns, kc rows each, contiguous: a panel then costs no TLB entry
// per row and its lines do not crowd the same few L1 sets (b's rows are N floats apart: a page at
// N = 1024). Within a block, each band of MR rows of c runs across every panel, so c streams
// row by row (the weight gradients, K = the batch, have a 2048 x 2048 c, which walked down its
// columns spent its time loading c's tiles), and the block is read from b a few KB of each row at
// a time (dev/notes.md, "Blocked and packed products").
// When all of b fits one block it is one block: c is loaded and stored once.
// The last panel, when it is not whole vectors wide, is padded with zero columns to NR, or to
// NR / 2 when that covers it (N = 10 runs one 16-wide tile, not ten one-column ones); whole
// vectors (N = 24: 16 + 8) run tiles of their width in place, without the edge tile's copy,
// which costs as much as the arithmetic when K is a handful (mini_gpt's 24-wide products). A band
// of a is packed too ([kc][MR], zero rows past M) when its k-th elements are a row of transposed a
// (rs = 1: kc lines M floats apart, one L1 set at M = 1024) or when it is the last, partial band; a
// band of whole rows is read in place, MR streams. Blocking and packing move data only: every
// element of c adds its k terms in the same order, so the bits are those of the unblocked loop.
inline constexpr int32_t kPackMinRows = 16;
inline constexpr size_t kPackBlockElems = size_t(128) << 10;
inline constexpr int32_t kBlockDepth = 256;
// Where the block is copied in a pass of its own (doubles, a build without FMA, or the last panel
// when it is not whole), its rows are copied a few KB each, every one on other pages, where the
// prefetchers start over; each is asked for two rows ahead while the current one is copied
// (two measured faster than eight).
inline constexpr int32_t kPrefetchRows = 2;
// All of b in one block, not transposed, its last panel whole vectors, under this many rows of
// a: b is read in place, not packed. Few bands do not repay the copy, and a block that small
// stays in L2 all the same; from 256 rows on the copy pays.
// With AVX2 the 16-wide panels of a wide b read in place are one cache line a row, N floats
// apart (4 KB at N = 1024: one L1 set, a page a row), and the first band's packing as it computes
// costs less than that: a b of kInPlaceBelowColumns or more columns is packed (dev/notes.md, "AVX2
// products reworked"). AVX-512's 32-wide panels keep the rule without it.
inline constexpr int32_t kInPlaceBelowRows = 256;
inline constexpr int32_t kInPlaceBelowColumns =
#if defined(BP_KERNEL_AVX512)
    std::numeric_limits<int32_t>::max();
#else
    128;
#endif
template <class T>
inline constexpr bool kFusedPack =
#if defined(BP_KERNEL_AVX2)
    std::is_same_v<T, float>;  // the named float tile packs (its panel: static_assert above)
#else
    false;
#endif
inline int32_t round_up(int32_t n, int32_t to) { return (n + to - 1) / to * to; }
// The block of b: kc rows x nc columns (nc a multiple of float's panel).
struct GemmBlock {
  int32_t kc, nc;
};
inline GemmBlock gemm_block(int32_t K, int32_t N) {
  const int32_t padded = round_up(N, kPanel<float>);
  if (size_t(K) * padded <= kPackBlockElems) return {K, padded};
  const int32_t kc = std::min(K, kBlockDepth);
  const int32_t nc = int32_t(kPackBlockElems / size_t(kc)) / kPanel<float> * kPanel<float>;
  return {kc, std::min(padded, std::max(nc, kPanel<float>))};
}
// Few rows of c against a b too big for one block (dx = g w: 64 rows of g, a 2048 x 2048 w from
// memory), panel by panel: every band of c over one panel of b before the next panel. The blocks
// above serve many bands, each reading the block from L2; with few bands the block's loading is
// the cost: the band that packs it waits on memory for a whole block while doing a band's share
// of its arithmetic (an eighth at 64 rows). Here the first band packs one panel (kc x NR floats)
// as it computes, the others reuse it, and while they compute they ask for the next panel's rows
// (after a block's last panel, the next block's first), a share each, so that b streams from
// memory under the arithmetic. a's kc columns of every row stay in L2 across the panels. The rows
// past the last whole band (64 = 10 x 6 + 4 with AVX2's tile) run tiles of 4, 2 and 1 rows over
// the packed panel. Floats with the named tile; each element of c still adds its k terms in
// order. 512 deep was the fastest of 128 to 1024 (dev/notes.md, "Few rows, panel by panel").
inline constexpr int32_t kFewRowsMax = 128, kFewRowsDepth = 512;
inline bool gemm_takes_few_rows(int32_t M, int32_t K, int32_t N, int32_t cs) {
  return kFusedPack<float> && cs == 1 && M >= 2 * kTileRows && M <= kFewRowsMax &&
         N % kPanel<float> == 0 && size_t(K) * N > kPackBlockElems;
}
#if defined(BP_KERNEL_AVX2)
inline void gemm_few_rows(float* c, const float* a, int32_t rs, const float* b, int32_t M,
                          int32_t K, int32_t N, float* pack, bool fresh, int32_t ldc, int32_t ldb) {
  constexpr int32_t NR = kPanel<float>;
  const int32_t bands = M / kTileRows, panels = N / NR, tail = bands * kTileRows;
  for (int32_t k0 = 0; k0 < K; k0 += kFewRowsDepth) {
    const int32_t kc = std::min(kFewRowsDepth, K - k0);
    const bool first = fresh && k0 == 0;
    for (int32_t p = 0; p < panels; p++) {
      const float* rows = b + size_t(k0) * ldb + size_t(p) * NR;  // the panel, where it is in b
      const bool last = p + 1 == panels;
      const float* next = last ? b + size_t(k0 + kc) * ldb : rows + NR;
      const int32_t next_rows = last ? std::min(kFewRowsDepth, K - k0 - kc) : kc;  // 0: no next
      const int32_t share = (next_rows + bands - 2) / (bands - 1);
      gemm_tile_float<true>(c + size_t(p) * NR, ldc, a + k0, rs, 1, rows, ldb, kc, first, pack);
      for (int32_t band = 1; band < bands; band++) {
        const int32_t r0 = std::min(next_rows, (band - 1) * share);
        gemm_tile_float<false, true>(c + size_t(band) * kTileRows * ldc + size_t(p) * NR, ldc,
                                     a + size_t(band) * kTileRows * rs + k0, rs, 1, pack, NR, kc,
                                     first, nullptr, next + size_t(r0) * ldb, ldb,
                                     std::min(share, next_rows - r0));
      }
      if (tail < M)  // the rows past the last whole band: tiles of 4, 2, 1 rows over the pack
        gemm_panel<float, NR>(c + size_t(tail) * ldc + size_t(p) * NR, ldc,
                              a + size_t(tail) * rs + k0, rs, 1, pack, NR, M - tail, kc, first);
    }
  }
}
#endif

// Scratch is counted in elements of either type, so the rule is float's, the wider panel.
inline size_t gemm_pack_elems(int32_t M, int32_t K, int32_t N) {
  if (M < kPackMinRows) return 0;
  const GemmBlock blk = gemm_block(K, N);
  size_t packed = size_t(blk.kc) * blk.nc;
  if (gemm_takes_few_rows(M, K, N, 1))  // (a's strides unknown here: room for either way)
    packed = std::max(packed, size_t(std::min(K, kFewRowsDepth)) * kPanel<float>);
  return scratch_round(packed) + scratch_round(size_t(blk.kc) * 8);
}
// The most gemm_pack_elems(M, K, N) is for any M: a pack for a band of rows not yet known.
inline size_t gemm_pack_elems_most(int32_t K, int32_t N) {
  const GemmBlock blk = gemm_block(K, N);
  const size_t packed =
      std::max(size_t(blk.kc) * blk.nc, size_t(std::min(K, kFewRowsDepth)) * kPanel<float>);
  return scratch_round(packed) + scratch_round(size_t(blk.kc) * 8);
}

// One band of MR rows of c (rows of them real) over a block of b: `panels` panels, kc deep, the
// last `last_cols` wide. b is the packed block (the last panel packed `last_width` wide, by the
// rule in gemm), or b's own rows ldb_in_place apart when that is not 0. b_rows: the block's own
// rows (ldb_rows apart), for the band that packs its whole panels as it computes them (gemm).
template <class T, int MR>
inline void gemm_band(T* c, int32_t ldc, const T* a, int32_t rs, int32_t cs, int32_t rows,
                      const T* b, int32_t kc, int32_t panels, int32_t last_cols, int32_t last_width,
                      T* apack, int32_t ldb_in_place, bool fresh, const T* b_rows = nullptr,
                      int32_t ldb_rows = 0) {
  constexpr int32_t NR = kPanel<T>;
  if (rows < MR || (rs == 1 && cs != MR)) {  // (rs 1, cs MR: packed already)
    for (int32_t k = 0; k < kc; k++)
      for (int32_t i = 0; i < MR; i++)
        apack[size_t(k) * MR + i] = i < rows ? a[size_t(i) * rs + size_t(k) * cs] : T(0);
    a = apack, rs = 1, cs = MR;
  }
  for (int32_t p = 0; p < panels; p++) {
    const int32_t cols = p + 1 < panels ? NR : last_cols;
    T* ct = c + size_t(p) * NR;
    const T* panel = ldb_in_place ? b + size_t(p) * NR : b + size_t(p) * kc * NR;
    const int32_t width = p + 1 < panels ? NR : last_width;
    const int32_t ldb = ldb_in_place ? ldb_in_place : width;
#if defined(BP_KERNEL_AVX2)
    if constexpr (kFusedPack<T> && MR == kTileRows)
      if (b_rows && cols == NR) {
        gemm_tile_float<true>(ct, ldc, a, rs, cs, b_rows + size_t(p) * NR, ldb_rows, kc, fresh,
                              const_cast<T*>(panel));
        continue;
      }
#endif
    if (cols == NR) {
      gemm_cut_tile<T, MR, NR>(ct, ldc, a, rs, cs, panel, ldb, kc, rows, fresh);
    } else if (width == cols) {  // whole vectors: tiles of NR / 2 and NR / 4, no padding
      const int32_t j = cols >= NR / 2 ? NR / 2 : 0;
      if (j) gemm_cut_tile<T, MR, NR / 2>(ct, ldc, a, rs, cs, panel, ldb, kc, rows, fresh);
      if (cols > j)
        gemm_cut_tile<T, MR, NR / 4>(ct + j, ldc, a, rs, cs, panel + j, ldb, kc, rows, fresh);
    } else if (width == NR) {  // padded with zeros (never in place: gemm packs such a block)
      gemm_edge_tile<T, MR, NR>(ct, ldc, a, rs, cs, panel, ldb, kc, rows, cols, fresh);
    } else {
      gemm_edge_tile<T, MR, NR / 2>(ct, ldc, a, rs, cs, panel, ldb, kc, rows, cols, fresh);
    }
  }
}

// The block's panels from a b stored transposed, (N, K) with rows K apart: each panel's 8 x 8
// pieces are transposed in registers on the way (floats with AVX; the rest, and the last few k
// when kc is not a multiple of 8, one element at a time), so b^T is packed without a transposed
// copy of it first. The padded columns of the last panel come from the same transposes, with
// zero rows in place of the missing ones (copied one element at a time, they had taken a fifth
// of mlp_width 2048's 64 x 10 x 2048 forward).
template <class T>
inline void pack_transposed_block(T* pack, const T* bt, int32_t K, int32_t n0, int32_t k0,
                                  int32_t kc, int32_t panels, int32_t last_cols,
                                  int32_t last_width) {
  constexpr int32_t NR = kPanel<T>;
  for (int32_t p = 0; p < panels; p++) {
    const int32_t width = p + 1 < panels ? NR : last_width, cols = p + 1 < panels ? NR : last_cols;
    T* panel = pack + size_t(p) * kc * NR;
    const T* src = bt + size_t(n0 + p * NR) * K + k0;  // row j of src is column j of the panel
    for (int32_t j = 0; j < width; j += 8)
      for (int32_t k = 0; k < kc; k += 8) {
#if defined(__AVX__)
        if constexpr (std::is_same_v<T, float>)
          if (j + 8 <= width && k + 8 <= kc) {
            transpose8x8(panel + size_t(k) * width + j, width, src + size_t(j) * K + k, K,
                         std::min(8, cols - j));
            continue;
          }
#endif
        for (int32_t jj = j; jj < std::min(width, j + 8); jj++)
          for (int32_t kk = k; kk < std::min(kc, k + 8); kk++)
            panel[size_t(kk) * width + jj] = jj < cols ? src[size_t(jj) * K + kk] : T(0);
      }
  }
}

// c (M, N) += op(a) (M, K) @ b (K, N); op(a)(i, k) = a[i * rs + k * cs]. pack holds
// gemm_pack_elems(M, K, N) elements (null when that is 0). b_trans: b is stored (N, K), which only
// products that pack (M >= kPackMinRows) take. fresh: c is uninitialised (gemm_tile), for the
// first block of k; the later ones add to it. c's rows are ldc apart and b's ldb (not b_trans:
// its rows are K apart), N when 0: a part of a wider product (gemm_parallel).
template <class T>
inline void gemm(T* c, const T* a, int32_t rs, int32_t cs, const T* b, int32_t M, int32_t K,
                 int32_t N, T* pack, bool b_trans = false, bool fresh = false, int32_t ldc = 0,
                 int32_t ldb = 0) {
  constexpr int32_t NR = kPanel<T>;
  if (!ldc) ldc = N;
  if (!ldb) ldb = N;
#if defined(BP_KERNEL_AVX2)
  if constexpr (std::is_same_v<T, float>)
    if (!b_trans && gemm_takes_few_rows(M, K, N, cs))
      return gemm_few_rows(c, a, rs, b, M, K, N, pack, fresh, ldc, ldb);
#endif
  if (M >= kPackMinRows) {
    const GemmBlock blk = gemm_block(K, N);
    T* apack = pack + scratch_round(size_t(blk.kc) * blk.nc);
    for (int32_t n0 = 0; n0 < N; n0 += blk.nc)
      for (int32_t k0 = 0; k0 < K; k0 += blk.kc) {
        const int32_t nc = std::min(blk.nc, N - n0), kc = std::min(blk.kc, K - k0);
        const int32_t panels = (nc + NR - 1) / NR, last_cols = nc - (panels - 1) * NR;
        const int32_t last_width = last_cols % (NR / 4) == 0 ? last_cols
                                   : last_cols > NR / 2      ? NR
                                                             : NR / 2;
        const bool in_place = !b_trans && kc == K && nc == N && M < kInPlaceBelowRows &&
                              ldb < kInPlaceBelowColumns && last_cols % (NR / 4) == 0;
        // The first band packs the block's whole panels as it computes them (the named float
        // tile): its loads of b's rows overlap the multiply-adds, where a pass of its own waited
        // on them. The last panel, when it is not whole, is packed first as before.
        // M >= kPackMinRows: the first band is whole.
        const bool fused = kFusedPack<T> && !in_place && !b_trans;
        if (in_place) {
          // read where it is
        } else if (b_trans)
          pack_transposed_block(pack, b, K, n0, k0, kc, panels, last_cols, last_width);
        else if (!fused || last_cols != NR)
          for (int32_t k = 0; k < kc; k++) {  // row k0 + k of the block, into every panel
            const T* row = b + size_t(k0 + k) * ldb + n0;
            if (k + kPrefetchRows < kc)  // what this pass copies: the last panel alone if fused
              for (int32_t j = fused ? (panels - 1) * NR : 0; j < nc; j += 64 / int32_t(sizeof(T)))
                __builtin_prefetch(row + size_t(kPrefetchRows) * ldb + j);
            for (int32_t p = 0; p + 1 < panels && !fused; p++)
              std::memcpy(pack + (size_t(p) * kc + k) * NR, row + size_t(p) * NR, NR * sizeof(T));
            T* last = pack + size_t(panels - 1) * kc * NR + size_t(k) * last_width;
            for (int32_t j = 0; j < last_width; j++)
              last[j] = j < last_cols ? row[size_t(panels - 1) * NR + j] : T(0);
          }
        for (int32_t m = 0; m < M; m += kTileRows) {
          T* cb = c + size_t(m) * ldc + n0;
          const T* ab = a + size_t(m) * rs + size_t(k0) * cs;
          const int32_t rows = std::min(kTileRows, M - m);
          const T* bb = in_place ? b : pack;
          const int32_t ldb_in_place = in_place ? ldb : 0;
          if (rows <= kTileRows / 2)
            gemm_band<T, kTileRows / 2>(cb, ldc, ab, rs, cs, rows, bb, kc, panels, last_cols,
                                        last_width, apack, ldb_in_place, fresh && k0 == 0);
          else
            gemm_band<T, kTileRows>(cb, ldc, ab, rs, cs, rows, bb, kc, panels, last_cols,
                                    last_width, apack, ldb_in_place, fresh && k0 == 0,
                                    fused && m == 0 ? b + size_t(k0) * ldb + n0 : nullptr, ldb);
        }
      }
    return;
  }
  gemm_in_place(c, ldc, a, rs, cs, b, ldb, M, K, N, fresh);
}
// ---- the products over the pool's threads (engine/runtime/threads.h) ----
// A product of at least split_thresholds().macs multiply-adds is split, one part per thread: by
// bands of rows when each part gets at least split_thresholds().rows (each part packs b's blocks
// for itself, which that many rows repay), else by panels of columns (each part streams its own
// columns of b: the few-rows products of a wide b). A part is the same gemm on a corner of c, and
// every element of c still adds its k terms in order, so the bits do not depend on the split. Each
// part has its own pack.
struct GemmSplit {
  bool by_rows;
  int parts;
};
inline GemmSplit gemm_split_of(int32_t M, int32_t K, int32_t N) {
  const int threads = thread_pool().size();
  const SplitThresholds& at = split_thresholds();
  if (threads == 1 || int64_t(M) * K * N < at.macs) return {true, 1};
  // (never below kPackMinRows a part, whole tiles each: a b stored transposed is read only by the
  // packing path)
  if (M / threads >= std::max(at.rows, kPackMinRows) + kTileRows) return {true, threads};
  return {false, std::min(threads, (N + kPanel<float> - 1) / kPanel<float>)};
}
// Part p's rows (whole tiles) or columns (whole panels): [first, second).
inline std::pair<int32_t, int32_t> gemm_part(GemmSplit s, int p, int32_t M, int32_t N) {
  const int32_t unit = s.by_rows ? kTileRows : kPanel<float>, extent = s.by_rows ? M : N;
  const int64_t units = (extent + unit - 1) / unit;
  return {int32_t(std::min<int64_t>(extent, units * p / s.parts * unit)),
          int32_t(std::min<int64_t>(extent, units * (p + 1) / s.parts * unit))};
}
inline size_t gemm_part_pack_elems(GemmSplit s, int p, int32_t M, int32_t K, int32_t N) {
  const auto [first, end] = gemm_part(s, p, M, N);
  if (first >= end) return 0;
  return s.by_rows ? gemm_pack_elems(end - first, K, N) : gemm_pack_elems(M, K, end - first);
}
inline size_t gemm_split_pack_elems(int32_t M, int32_t K, int32_t N) {
  const GemmSplit s = gemm_split_of(M, K, N);
  if (s.parts == 1) return gemm_pack_elems(M, K, N);
  size_t total = 0;
  for (int p = 0; p < s.parts; p++) total += gemm_part_pack_elems(s, p, M, K, N);
  return total;
}
// gemm, its parts on the pool; pack holds gemm_split_pack_elems(M, K, N).
template <class T>
inline void gemm_split(T* c, const T* a, int32_t rs, int32_t cs, const T* b, int32_t M, int32_t K,
                       int32_t N, T* pack, bool b_trans, bool fresh) {
  const GemmSplit s = gemm_split_of(M, K, N);
  if (s.parts == 1) return gemm(c, a, rs, cs, b, M, K, N, pack, b_trans, fresh);
  thread_pool().run(s.parts, [&](int p, int) {
    const auto [first, end] = gemm_part(s, p, M, N);
    if (first >= end) return;
    T* own = pack;
    for (int q = 0; q < p; q++) own += gemm_part_pack_elems(s, q, M, K, N);
    if (s.by_rows)
      gemm(c + size_t(first) * N, a + size_t(first) * rs, rs, cs, b, end - first, K, N, own,
           b_trans, fresh);
    else
      gemm(c + first, a, rs, cs, b_trans ? b + size_t(first) * K : b + first, M, K, end - first,
           own, b_trans, fresh, N, N);
  });
}

// A transposed b (N, K) is either copied transposed, or c^T (N, M) += b (N, K) @ op(a)^T (K, M)
// is computed instead, whichever copies less. When gemm packs (M >= kPackMinRows), the copy is
// its packing itself, from b's rows (b_trans), not a transposed copy then packed.
inline bool matmul_copies_b(int32_t M, int32_t N, int32_t K) {
  return size_t(N) * K <= size_t(M) * (K + N);
}
// The scratch matmul_accumulate needs for these sizes (elements): one transposed copy, or two,
// then gemm's packed panel.
inline size_t matmul_scratch_elems(int32_t M, int32_t N, int32_t K, bool trans_a, bool trans_b) {
  if (!trans_b) return gemm_split_pack_elems(M, K, N);
  if (matmul_copies_b(M, N, K))
    return M >= kPackMinRows ? gemm_split_pack_elems(M, K, N)
                             : scratch_round(size_t(K) * N) + gemm_split_pack_elems(M, K, N);
  const bool copies_a = !trans_a && N < kPackMinRows;  // else packed from a's rows, or a is a^T
  return (copies_a ? scratch_round(size_t(K) * M) : 0) + scratch_round(size_t(N) * M) +
         gemm_split_pack_elems(N, K, M);
}

// c (M, N) += op(a) op(b), op(a) (M, K), op(b) (K, N); trans_a means a is stored (K, M), trans_b
// that b is stored (N, K). Transposed copies, when needed, go to `scratch`, which holds
// matmul_scratch_elems(M, N, K, trans_a, trans_b) elements, gemm's packed panel last. Everything
// goes to gemm above. fresh: c is uninitialised, and gets what adding to a zeroed c gives.
// The libraries' products are other dialects (engine/kernels/library.h), which the compiled mode
// may choose per shape; the eager engine runs this one.
template <class T>
inline void matmul_accumulate(T* c, const T* a, bool trans_a, const T* b, bool trans_b, int32_t M,
                              int32_t N, int32_t K, T* scratch, bool fresh = false) {
  // op(a)(i, k) is a[i * rs + k * cs]: a transposed a is only other strides, never a copy.
  const int32_t rs = trans_a ? 1 : K, cs = trans_a ? M : 1;
  // With trans_b: b copied transposed (by gemm's packing when it packs), or c^T (above).
  if (!trans_b) {
    gemm_split(c, a, rs, cs, b, M, K, N, scratch, false, fresh);
  } else if (matmul_copies_b(M, N, K) && M >= kPackMinRows) {
    gemm_split(c, a, rs, cs, b, M, K, N, scratch, true, fresh);
  } else if (matmul_copies_b(M, N, K)) {
    T* bt = scratch;  // (K, N)
    transpose(bt, b, N, K);
    gemm_split(c, a, rs, cs, bt, M, K, N, scratch + scratch_round(size_t(K) * N), false, fresh);
  } else {
    // op(a)^T (K, M) is a itself when a is stored transposed; else gemm packs it from a's rows
    // (b_trans) when it packs, and only a product of fewer rows copies a transposed first.
    const T* a_t = a;
    T* c_t = scratch;  // (N, M)
    const bool copies_a = !trans_a && N < kPackMinRows;
    if (copies_a) {
      T* at = scratch;  // (K, M), then c^T after it
      transpose(at, a, M, K);
      a_t = at;
      c_t = scratch + scratch_round(size_t(K) * M);
    }
    if (!fresh) transpose(c_t, c, M, N);
    gemm_split(c_t, b, K, 1, a_t, N, K, M, c_t + scratch_round(size_t(N) * M),
               !trans_a && !copies_a, fresh);
    transpose(c, c_t, N, M);
  }
}

// A product kernel as the matmul and linear ops call it: c (M, N) += op(a) op(b) (c uninitialised
// and written when fresh, OpArgs::fresh), and the scratch it needs. The ops are templates over such
// a policy (engine/core/ops.h), so every matmul dialect (engine/dialects/dialects.h) runs the ops'
// own code around its products; this one is the engine's.
struct TiledGemm {
  static constexpr bool in_build = true;
  static constexpr bool library = false;
  static constexpr bool side_by_side = true;  // a backward's two products on two threads
  template <class T>
  static void run(T* c, const T* a, bool trans_a, const T* b, bool trans_b, int32_t M, int32_t N,
                  int32_t K, T* scratch, bool fresh) {
    matmul_accumulate(c, a, trans_a, b, trans_b, M, N, K, scratch, fresh);
  }
  template <class T>
  static bool available(int32_t, int32_t, int32_t, bool, bool) {
    return true;
  }
  static size_t scratch_elems(int32_t M, int32_t N, int32_t K, bool trans_a, bool trans_b) {
    return matmul_scratch_elems(M, N, K, trans_a, trans_b);
  }
};

BP_KERNELS_END
}  // namespace bp
