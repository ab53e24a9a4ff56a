// engine/kernels/bf16.h: bfloat16 numbers, and products of bfloat16 operands accumulated in
// float32, the kernels of mixed precision (RAF's AutoCast, torch.autocast's bf16 on a CPU).
//
// The arithmetic is the x86 instructions', exactly, on every path:
// - float to bf16 rounds to nearest even; a denormal becomes a zero of its sign; a NaN stays a
//   NaN, quieted (VCVTNEPS2BF16). bf16 to float is exact.
// - c (M, N) += a (M, K) b (K, N) takes k in pairs, k padded to even with a zero; per pair, the
//   odd term's product is added and rounded, then the even term's (VDPBF16PS). A product of two
//   bf16 is exact in float32, so each step is one fused multiply-add; denormal inputs (c's too)
//   count as zero and denormal results are flushed to zero, as that instruction does.
// Two paths, chosen at run time in one binary: VDPBF16PS where the processor has AVX512_BF16;
// elsewhere the float32 tiled kernel (engine/kernels/products.h) over k in the pairs' order, each
// operand widened to float32 as the kernel packs it, with MXCSR's flush-to-zero and
// denormals-are-zero set. Same bits (engine/kernels/bf16_test.cc holds the scalar model both are
// checked against, on each path the processor has).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "engine/kernels/isa_namespace.h"
#include "engine/kernels/products.h"
#include "engine/runtime/isa.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace bp {
BP_KERNELS_BEGIN
namespace bf16 {

inline float to_float(uint16_t h) {
  const uint32_t u = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline uint16_t from_float(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  // Without branches, so that from_floats's loop is vectorized where VCVTNEPS2BF16 is missing.
  const uint32_t exponent = u & 0x7f800000, mantissa = u & 0x7fffff;
  const uint32_t zero = u >> 16 & 0x8000;                       // zero or denormal: signed 0
  const uint32_t special = u >> 16 | (mantissa ? 0x40 : 0);     // inf; NaN quieted
  const uint32_t rounded = (u + 0x7fff + (u >> 16 & 1)) >> 16;  // to nearest, ties to even
  return uint16_t(exponent == 0 ? zero : exponent == 0x7f800000 ? special : rounded);
}

enum class Path { dot_bf16, widened };
inline const char* path_name(Path p) { return p == Path::dot_bf16 ? "avx512_bf16" : "widened"; }
// AVX512_BF16 where the processor has it and BP_ISA allows AVX-512 (engine/runtime/isa.h).
inline bool has_dot_bf16() { return isa_has_dot_bf16(); }
// The processor's best path; BP_BF16_PATH=widened in the environment takes the widened one on a
// processor with AVX512_BF16 too, so the lab can time it there (dev/notes.md); any other value
// stops the process in one line.
inline Path path_from(const char* name) {
  if (!name || std::strcmp(name, "") == 0) return has_dot_bf16() ? Path::dot_bf16 : Path::widened;
  if (std::strcmp(name, "widened") == 0) return Path::widened;
  if (std::strcmp(name, "avx512_bf16") == 0 && has_dot_bf16()) return Path::dot_bf16;
  std::fprintf(stderr,
               "BP_BF16_PATH: '%s' is not a path this processor has (widened%s) at ISA %s\n", name,
               has_dot_bf16() ? ", avx512_bf16" : "", isa_name(isa()));
  std::exit(2);
}
inline Path best_path() {
  static const Path p = path_from(std::getenv("BP_BF16_PATH"));
  return p;
}

#if defined(__x86_64__)
#define BP_BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))
BP_BF16_TARGET inline void from_floats_dot(uint16_t* out, const float* in, size_t n) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i),
                        (__m256i)_mm512_cvtneps_pbh(_mm512_loadu_ps(in + i)));
  for (; i < n; i++) out[i] = from_float(in[i]);
}
#endif
// out[i] = from_float(in[i]), by VCVTNEPS2BF16 where the processor has it.
inline void from_floats(uint16_t* out, const float* in, size_t n) {
#if defined(__x86_64__)
  if (has_dot_bf16()) return from_floats_dot(out, in, n);
#endif
  for (size_t i = 0; i < n; i++) out[i] = from_float(in[i]);
}

// The pairs' order of k, padded to even: 1, 0, 3, 2, ...; position j of it is k = j ^ 1.
inline int32_t padded_k(int32_t K) { return K + (K & 1); }
// Pairs of k a block takes: two panels of them (16 KB) stay in L1 while a band's tiles use them,
// and b is packed a block at a time (a whole b in pairs was mlp_width 2048's largest buffer).
inline constexpr int32_t kBlockPairs = 128;
// The floats of one packed block of b.
inline size_t packed_block_floats(int32_t K, int32_t N) {
  return size_t(std::min(padded_k(K) / 2, kBlockPairs)) * ((N + 15) / 16 * 16);
}

// a (M, K) is stored (K, M) when trans_a; b (K, N) is stored (N, K) when trans_b.
struct Operands {
  const uint16_t* a;
  bool trans_a;
  const uint16_t* b;
  bool trans_b;
  uint16_t at(const uint16_t* x, bool trans, int32_t rows, int32_t cols, int32_t r,
              int32_t c) const {  // element (r, c) of a (rows, cols) operand
    return trans ? x[size_t(c) * rows + r] : x[size_t(r) * cols + c];
  }
  uint16_t a_at(int32_t M, int32_t K, int32_t m, int32_t k) const {
    return at(a, trans_a, M, K, m, k);
  }
  uint16_t b_at(int32_t K, int32_t N, int32_t k, int32_t n) const {
    return at(b, trans_b, K, N, k, n);
  }
};

namespace detail {
// Bands of c's rows (whole bands of 8) on the pool's threads once the product reaches
// split_thresholds().macs: f(r0, r1, part) for each part; else f(0, M, 0). Each element's sum
// is the same on any band, so the bits do not depend on the split.
inline int row_band_parts(int32_t M, int32_t K, int32_t N) {
  const int64_t bands = (M + 7) / 8;
  if (int64_t(M) * K * N < split_thresholds().macs) return 1;
  return int(std::min<int64_t>(thread_pool().size(), bands));
}
template <class F>
void over_row_bands(int32_t M, int32_t K, int32_t N, F&& f) {
  const int parts = row_band_parts(M, K, N);
  if (parts == 1) return f(0, M, 0);
  const int64_t bands = (M + 7) / 8;
  thread_pool().run(parts, [&](int part, int total) {
    const int64_t b0 = bands * part / total, b1 = bands * (part + 1) / total;
    if (b0 < b1) f(int32_t(b0 * 8), int32_t(std::min<int64_t>(M, b1 * 8)), part);
  });
}
// A row of bf16 widened as it is.
inline void widen(float* out, const uint16_t* x, int32_t n) {
  for (int32_t j = 0; j < n; j++) out[j] = to_float(x[j]);
}
// n elements (n even) from position j0 (even) of a row in the pairs' order: out[j] = x[j0 + j ^ 1].
// A pair is one 32-bit word, its halves swapped as it is widened (vectorized as it is written).
inline void widen_pairs(float* out, const uint16_t* x, int32_t j0, int32_t n) {
  uint32_t* to = reinterpret_cast<uint32_t*>(out);  // float bits
  for (int32_t j = 0; j < n; j += 2) {
    uint32_t pair;
    std::memcpy(&pair, x + j0 + j, 4);
    to[j] = pair & 0xffff0000u, to[j + 1] = pair << 16;
  }
}
// The same for a row of K elements, position j0 on for n positions, zero from K.
inline void widen_pairs_row(float* out, const uint16_t* x, int32_t K, int32_t j0, int32_t n) {
  const int32_t whole = std::clamp((K & ~1) - j0, 0, n);  // positions of whole pairs
  widen_pairs(out, x, j0, whole);
  for (int32_t j = whole; j < n; j++) {
    const int32_t k = (j0 + j) ^ 1;
    out[j] = k < K ? to_float(x[k]) : 0.f;
  }
}
// The widened path: the float32 tiled kernel (engine/kernels/products.h) over blocks of k in the
// pairs' order (position j is k = j ^ 1, zero from K), its operands widened as it packs them: a
// block of b into the panels the kernel reads, a band of a's rows into a row-major slice. Nothing
// is widened whole: the scratch is a pack per thread, and each element of b is widened once per
// band of threads, each of a once per block of columns. Flush-to-zero and denormals-are-zero are
// set around it (each thread's MXCSR, restored after).
struct WidenedBlock {
  int32_t n0, k0, nc, kc, panels, last_cols, last_width;
};
inline WidenedBlock widened_block(int32_t n0, int32_t k0, int32_t N, int32_t Kp) {
  constexpr int32_t NR = kPanel<float>;
  const GemmBlock blk = gemm_block(Kp, N);
  const int32_t nc = std::min(blk.nc, N - n0), kc = std::min(blk.kc, Kp - k0);
  const int32_t panels = (nc + NR - 1) / NR, last_cols = nc - (panels - 1) * NR;
  const int32_t last_width = last_cols % (NR / 4) == 0 ? last_cols
                             : last_cols > NR / 2      ? NR
                                                       : NR / 2;
  return {n0, k0, nc, kc, panels, last_cols, last_width};
}
// Panel p of the block: kc rows of `width` floats, columns past `cols` zero.
inline void pack_widened_b(float* pack, float* rows, const Operands& x, int32_t K, int32_t N,
                           const WidenedBlock& w) {
  constexpr int32_t NR = kPanel<float>;
  for (int32_t p = 0; p < w.panels; p++) {
    const int32_t cols = p + 1 < w.panels ? NR : w.last_cols;
    const int32_t width = p + 1 < w.panels ? NR : w.last_width, n = w.n0 + p * NR;
    float* panel = pack + size_t(p) * w.kc * NR;
    if (!x.trans_b) {
      for (int32_t kk = 0; kk < w.kc; kk++) {
        const int32_t k = (w.k0 + kk) ^ 1;
        float* to = panel + size_t(kk) * width;
        if (k < K) widen(to, x.b + size_t(k) * N + n, cols);
        std::fill(to + (k < K ? cols : 0), to + width, 0.f);
      }
      continue;
    }
    // b stored (N, K): column n + j is a row of it, widened into `rows` and transposed in
    for (int32_t j = 0; j < width; j++) {
      float* to = rows + size_t(j) * w.kc;
      if (j < cols)
        widen_pairs_row(to, x.b + size_t(n + j) * K, K, w.k0, w.kc);
      else
        std::fill_n(to, w.kc, 0.f);
    }
    pack_transposed_block(panel, rows, w.kc, 0, 0, w.kc, 1, width, width);
  }
}
// Rows [m, m + rows) of a over the block: row-major (kc apart) from an a stored (M, K); from one
// stored (K, M), whose rows are along m, k-major (kTileRows apart), each k's rows contiguous.
inline void widen_a_rows(float* out, const Operands& x, int32_t M, int32_t K, int32_t m,
                         int32_t rows, const WidenedBlock& w) {
  if (!x.trans_a) {
    for (int32_t i = 0; i < rows; i++)
      widen_pairs_row(out + size_t(i) * w.kc, x.a + size_t(m + i) * K, K, w.k0, w.kc);
    return;
  }
  for (int32_t kk = 0; kk < w.kc; kk++) {
    const int32_t k = (w.k0 + kk) ^ 1;
    float* to = out + size_t(kk) * kTileRows;
    if (k < K)
      widen(to, x.a + size_t(k) * M + m, rows);
    else
      std::fill_n(to, rows, 0.f);
  }
}
// The floats one band of threads needs: the float kernel's pack, a's rows of a block, and a
// panel's rows of a transposed b.
inline size_t widened_pack_floats(int32_t K, int32_t N) {
  const int32_t Kp = padded_k(K);
  const size_t kc = size_t(gemm_block(Kp, N).kc);
  return gemm_pack_elems_most(Kp, N) + scratch_round(kc * kTileRows) +
         scratch_round(kc * kPanel<float>);
}
inline void gemm_widened(float* c, const Operands& x, int32_t M, int32_t K, int32_t N,
                         float* scratch, bool fresh) {
  const int32_t Kp = padded_k(K);
  const GemmBlock blk = gemm_block(Kp, N);
  over_row_bands(M, K, N, [&](int32_t r0, int32_t r1, int part) {
#if defined(__x86_64__)
    const unsigned saved = _mm_getcsr();
    _mm_setcsr(saved | 0x8040);  // FTZ (bit 15), DAZ (bit 6)
#endif
    float* pack = scratch + size_t(part) * widened_pack_floats(K, N);
    float* apack = pack + scratch_round(size_t(blk.kc) * blk.nc);
    float* arows = pack + gemm_pack_elems_most(Kp, N);
    float* brows = arows + scratch_round(size_t(blk.kc) * kTileRows);
    for (int32_t n0 = 0; n0 < N; n0 += blk.nc)
      for (int32_t k0 = 0; k0 < Kp; k0 += blk.kc) {
        const WidenedBlock w = widened_block(n0, k0, N, Kp);
        pack_widened_b(pack, brows, x, K, N, w);
        for (int32_t m = r0; m < r1; m += kTileRows) {
          const int32_t rows = std::min(kTileRows, r1 - m);
          widen_a_rows(arows, x, M, K, m, rows, w);
          float* cb = c + size_t(m) * N + n0;
          const int32_t rs = x.trans_a ? 1 : w.kc, cs = x.trans_a ? kTileRows : 1;
          if (rows <= kTileRows / 2)
            gemm_band<float, kTileRows / 2>(cb, N, arows, rs, cs, rows, pack, w.kc, w.panels,
                                            w.last_cols, w.last_width, apack, 0, fresh && k0 == 0);
          else
            gemm_band<float, kTileRows>(cb, N, arows, rs, cs, rows, pack, w.kc, w.panels,
                                        w.last_cols, w.last_width, apack, 0, fresh && k0 == 0);
        }
      }
#if defined(__x86_64__)
    _mm_setcsr(saved);
#endif
  });
}

#if defined(__x86_64__)
// Sixteen rows of sixteen dwords transposed: out[t][i] = in[i][t] (three rounds of unpacks and
// lane shuffles).
BP_BF16_TARGET inline void transpose16(__m512i r[16]) {
  __m512i t[16];
  for (int i = 0; i < 8; i++) {
    t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
  }
  __m512i u[16];  // u[4i + e], lane L: column 4L + e of rows 4i..4i+3
  for (int i = 0; i < 4; i++) {
    u[4 * i] = _mm512_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
    u[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
    u[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
    u[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
  }
  for (int e = 0; e < 4; e++) {
    const __m512i x0 = _mm512_shuffle_i32x4(u[e], u[4 + e], 0x44),
                  x1 = _mm512_shuffle_i32x4(u[e], u[4 + e], 0xee),
                  y0 = _mm512_shuffle_i32x4(u[8 + e], u[12 + e], 0x44),
                  y1 = _mm512_shuffle_i32x4(u[8 + e], u[12 + e], 0xee);
    r[e] = _mm512_shuffle_i32x4(x0, y0, 0x88), r[4 + e] = _mm512_shuffle_i32x4(x0, y0, 0xdd);
    r[8 + e] = _mm512_shuffle_i32x4(x1, y1, 0x88), r[12 + e] = _mm512_shuffle_i32x4(x1, y1, 0xdd);
  }
}
// Two rows' elements interleaved into pairs: out[j] = even[j] | odd[j] << 16, n of them (odd
// null: zero).
BP_BF16_TARGET inline void interleave_rows(uint32_t* out, const uint16_t* even, const uint16_t* odd,
                                           int32_t n) {
  int32_t j = 0;
  for (; j + 16 <= n; j += 16) {
    const __m512i lo = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i*)(even + j)));
    const __m512i hi =
        odd ? _mm512_slli_epi32(
                  _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i*)(odd + j))), 16)
            : _mm512_setzero_si512();
    _mm512_storeu_si512(out + j, _mm512_or_si512(lo, hi));
  }
  for (; j < n; j++) out[j] = even[j] | (odd ? uint32_t(odd[j]) << 16 : 0);
}
// Pairs [q0, q1) of b's panels [p0, p1) packed: panel p (16 columns) at (p * (q1 - q0)) * 16, pair
// q at (q - q0) * 16 in it, 16 dwords (b(2q, n), b(2q + 1, n)), zero past N and past K. b stored
// (N, K): a pair is two neighbours of a row, and a full panel is a transpose of sixteen rows'
// dwords, sixteen pairs at a time; b stored (K, N): two rows interleaved. q0 is a multiple of 16.
BP_BF16_TARGET inline void pack_pairs(uint32_t* packed, const Operands& x, int32_t K, int32_t N,
                                      int32_t q0, int32_t q1, int32_t p0, int32_t p1) {
  const int32_t block = q1 - q0;
  for (int32_t p = p0; p < p1; p++) {
    const int32_t n0 = p * 16, cols = std::min(16, N - n0);
    uint32_t* panel = packed + size_t(p) * block * 16 - size_t(q0) * 16;  // indexed by q
    int32_t q = q0;
    if (x.trans_b && cols == 16)
      for (; 2 * (q + 16) <= K && q + 16 <= q1; q += 16) {  // whole pairs, sixteen of them
        __m512i r[16];
        for (int j = 0; j < 16; j++) r[j] = _mm512_loadu_si512(x.b + size_t(n0 + j) * K + 2 * q);
        transpose16(r);
        for (int t = 0; t < 16; t++) _mm512_storeu_si512(panel + size_t(q + t) * 16, r[t]);
      }
    for (; q < q1; q++) {
      uint32_t* to = panel + size_t(q) * 16;
      const bool odd = 2 * q + 1 < K;
      if (x.trans_b) {
        for (int32_t j = 0; j < cols; j++) {
          const uint16_t* pair = x.b + size_t(n0 + j) * K + 2 * q;
          to[j] = pair[0] | (odd ? uint32_t(pair[1]) << 16 : 0);
        }
      } else {
        const uint16_t* even_row = x.b + size_t(2 * q) * N + n0;
        interleave_rows(to, even_row, odd ? even_row + N : nullptr, cols);
      }
      for (int32_t j = cols; j < 16; j++) to[j] = 0;
    }
  }
}
// Where row i's pair q of a is: a + i * row + q * pair (in bf16 elements). a stored (M, K): row
// = K, pair = 2, and an odd K's last pair is half past the row (made with a zero); a stored
// (K, M) is first interleaved into (pairs, M) dwords: row = 2, pair = 2M, zero-padded.
struct PairRows {
  const uint16_t* a;
  size_t row, pair;
  bool half_tail;
};
// MR rows of c by two panels (32 columns; `cols` of them real, each packed from pair q0) over
// pairs [q0, q1); c is read first, or taken as zero when `zero`.
template <int MR>
BP_BF16_TARGET inline void dot_tile(float* c, int32_t ldc, const PairRows& a, int32_t K, int32_t q0,
                                    int32_t q1, const uint32_t* panel0, const uint32_t* panel1,
                                    int32_t cols, bool zero) {
  const __mmask16 m0 = __mmask16(cols >= 16 ? 0xffff : (1u << cols) - 1);
  const __mmask16 m1 = __mmask16(cols >= 32 ? 0xffff : cols <= 16 ? 0 : (1u << (cols - 16)) - 1);
  __m512 acc[MR][2];
  for (int i = 0; i < MR; i++) {
    acc[i][0] = zero ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(m0, c + size_t(i) * ldc);
    acc[i][1] = zero ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(m1, c + size_t(i) * ldc + 16);
  }
  // A lambda does not inherit its function's target: without its own, GCC on a build for a
  // processor without AVX-512 refuses the intrinsics below (inlining ... target mismatch).
  const auto step = [&](int32_t q, auto&& pair_of_row) BP_BF16_TARGET {
    const __m512bh b0 = (__m512bh)_mm512_loadu_si512(panel0 + size_t(q - q0) * 16);
    const __m512bh b1 = (__m512bh)_mm512_loadu_si512(panel1 + size_t(q - q0) * 16);
    for (int i = 0; i < MR; i++) {
      const __m512bh x = (__m512bh)_mm512_set1_epi32(int(pair_of_row(a.a + i * a.row)));
      acc[i][0] = _mm512_dpbf16_ps(acc[i][0], x, b0);
      acc[i][1] = _mm512_dpbf16_ps(acc[i][1], x, b1);
    }
  };
  const int32_t whole = std::min(q1, a.half_tail ? K / 2 : padded_k(K) / 2);
  int32_t q = q0;
  for (; q < whole; q++)
    step(q, [q, &a](const uint16_t* row) {
      uint32_t pair;
      std::memcpy(&pair, row + q * a.pair, 4);
      return pair;
    });
  if (q < q1) step(q, [K](const uint16_t* row) { return uint32_t(row[K - 1]); });
  for (int i = 0; i < MR; i++) {
    _mm512_mask_storeu_ps(c + size_t(i) * ldc, m0, acc[i][0]);
    _mm512_mask_storeu_ps(c + size_t(i) * ldc + 16, m1, acc[i][1]);
  }
}
template <int MR>
BP_BF16_TARGET inline void dot_rows(float* c, const PairRows& a, int32_t K, int32_t N,
                                    const uint32_t* packed, int32_t q0, int32_t q1, bool zero) {
  const int32_t block = q1 - q0, panels = (N + 15) / 16;
  for (int32_t p = 0; p < panels; p += 2) {
    const uint32_t* panel0 = packed + size_t(p) * block * 16;
    // a lone last panel is paired with itself, its second half masked off
    const uint32_t* panel1 = p + 1 < panels ? panel0 + size_t(block) * 16 : panel0;
    dot_tile<MR>(c + p * 16, N, a, K, q0, q1, panel0, panel1, std::min(32, N - p * 16), zero);
  }
}
// Rows [r0, r1) of c over the packed block of pairs [q0, q1).
BP_BF16_TARGET inline void dot_band(float* c, const PairRows& a, int32_t K, int32_t N,
                                    const uint32_t* packed, int32_t q0, int32_t q1, int32_t r0,
                                    int32_t r1, bool zero) {
  const auto from = [&a](int32_t m) {
    return PairRows{a.a + m * a.row, a.row, a.pair, a.half_tail};
  };
  int32_t m = r0;
  for (; m + 8 <= r1; m += 8) dot_rows<8>(c + size_t(m) * N, from(m), K, N, packed, q0, q1, zero);
  for (; m < r1; m++) dot_rows<1>(c + size_t(m) * N, from(m), K, N, packed, q0, q1, zero);
}
BP_BF16_TARGET inline void gemm_dot(float* c, const Operands& x, int32_t M, int32_t K, int32_t N,
                                    float* scratch, bool fresh) {
  uint32_t* packed = reinterpret_cast<uint32_t*>(scratch);
  PairRows a{x.a, size_t(K), 2, (K & 1) != 0};
  if (x.trans_a) {  // a's pairs interleaved from its rows k = 2q and 2q + 1: (pairs, M) dwords
    uint32_t* rows = packed + packed_block_floats(K, N);
    for (int32_t q = 0; q < padded_k(K) / 2; q++)
      interleave_rows(rows + size_t(q) * M, x.a + size_t(2 * q) * M,
                      2 * q + 1 < K ? x.a + size_t(2 * q + 1) * M : nullptr, M);
    a = {reinterpret_cast<const uint16_t*>(rows), 2, 2 * size_t(M), false};
  }
  // k a block at a time: its pairs packed (panels split over the parts), then every band's rows
  const int32_t pairs = padded_k(K) / 2, panels = (N + 15) / 16;
  const int parts = row_band_parts(M, K, N);
  for (int32_t q0 = 0; q0 < pairs; q0 += kBlockPairs) {
    const int32_t q1 = std::min(pairs, q0 + kBlockPairs);
    if (parts == 1)
      pack_pairs(packed, x, K, N, q0, q1, 0, panels);
    else
      thread_pool().run(parts, [&](int part, int total) {
        pack_pairs(packed, x, K, N, q0, q1, int32_t(int64_t(panels) * part / total),
                   int32_t(int64_t(panels) * (part + 1) / total));
      });
    over_row_bands(M, K, N, [&](int32_t r0, int32_t r1, int) {
      dot_band(c, a, K, N, packed, q0, q1, r0, r1, fresh && q0 == 0);
    });
  }
}
#undef BP_BF16_TARGET
#endif
}  // namespace detail

// Scratch (in floats) that gemm needs for M x K x N on path p.
inline size_t gemm_scratch_floats(int32_t M, int32_t K, int32_t N, bool trans_a, bool /*trans_b*/,
                                  Path p) {
  const size_t Kp = size_t(padded_k(K));
  if (p == Path::widened)  // a pack per part
    return size_t(detail::row_band_parts(M, K, N)) * detail::widened_pack_floats(K, N);
  // a block of b's pairs, 16 columns a panel (32 bits each); a transposed, interleaved in pairs
  return packed_block_floats(K, N) + (trans_a ? size_t(M) * Kp / 2 : 0);
}

// c (M, N) += op(a) (M, K) op(b) (K, N), c row-major; a and b bf16 (Operands says how each is
// stored), c float32, on path p (best_path() unless a test names one; dot_bf16 where the
// processor lacks it runs widened). scratch holds gemm_scratch_floats(M, K, N, trans_a, trans_b, p)
// floats, asked at the pool's present size (the widened path keeps a pack per thread). Split over
// the pool's threads by bands of rows (over_row_bands), packed once. fresh: c is not read, and
// gets what adding to a zeroed c gives.
inline void gemm(float* c, const Operands& x, int32_t M, int32_t K, int32_t N, float* scratch,
                 Path p, bool fresh = false) {
  if (M <= 0 || N <= 0) return;
  if (K <= 0) {
    if (fresh) std::memset(c, 0, size_t(M) * N * sizeof(float));
    return;
  }
#if defined(__x86_64__)
  if (p == Path::dot_bf16 && has_dot_bf16()) return detail::gemm_dot(c, x, M, K, N, scratch, fresh);
#endif
  detail::gemm_widened(c, x, M, K, N, scratch, fresh);
}

}  // namespace bf16
BP_KERNELS_END
}  // namespace bp
