// engine/kernels/kernels.h: the arithmetic of the tensor ops, over raw row-major buffers.
//
// Each op's forward sits beside its backward, with mirrored arguments (outputs first, sizes last);
// a backward adds (+=) into the gradients it is given. Nothing here knows about graphs, handles or
// shapes' validity: engine/core/tensor.h checks every operand and calls these. Kept apart so that
// every way of running a step (the eager tape, the compiled program) shares one copy of each
// kernel: these are the `engine` dialect (engine/dialects/dialects.h). T is float for benchmarks
// and double for the finite-difference tests.
//
// The matrix products, the largest of these kernels, are engine/kernels/products.h.
//
// Tests: engine/core/tensor_test.cc (every op against finite differences in double; exp and tanh
// swept against libm; attention over lanes against attention by position).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#if defined(__AVX__)
#include <immintrin.h>
#endif

#include "engine/kernels/adamw_step.h"
#include "engine/kernels/isa_namespace.h"

namespace bp {
BP_KERNELS_BEGIN

// ---- exp and tanh that GCC vectorises (libm's are scalar calls) ----
// Used for float; double keeps libm, so the finite-difference tests (in double) check the
// derivative code against libm's values, and engine/core/tensor_test.cc sweeps these against libm.
//
// exp: x = n ln2 + r with |r| <= ln2/2 (Cody-Waite: ln2 split into a part exact in float and a
// remainder), exp(r) by its Taylor series to r^7 (truncation < 6e-9 relative, under float's
// epsilon), times 2^n. 2^n is applied as two factors 2^(n/2) and 2^(n - n/2), each a normal float,
// so the product overflows to inf above ln(FLT_MAX) and rounds once into the denormals and then
// to 0 below ln(2^-149), as libm's expf does. Selects, not branches: the loops stay vectorised.
__attribute__((always_inline)) inline float exp_f32(float x) {
  const float xc = std::min(std::max(x, -110.0f), 90.0f);  // n within [-159, 130]: both factors
  const float n = std::floor(xc * 1.44269504f + 0.5f);     // stay normal floats
  const float r = (xc - n * 0.693359375f) - n * -2.12194440e-4f;
  const float p =
      1 +
      r * (1 + r * (0.5f + r * (1 / 6.f +
                                r * (1 / 24.f + r * (1 / 120.f + r * (1 / 720.f + r / 5040.f))))));
  const int32_t n_half = int32_t(n) / 2, n_rest = int32_t(n) - n_half;
  const int32_t bits_half = (n_half + 127) << 23, bits_rest = (n_rest + 127) << 23;
  float scale_half, scale_rest;
  std::memcpy(&scale_half, &bits_half, sizeof(float));
  std::memcpy(&scale_rest, &bits_rest, sizeof(float));
  const float y = p * scale_half * scale_rest;
  return x == x ? y : x;  // NaN in, NaN out (the clamp above turned it into a number)
}
// tanh(x) = 1 - 2 / (exp(2x) + 1), odd. Near 0 that subtraction cancels (its relative error
// grows like eps/|x|: 15 ulp at 1/16), so |x| < 1/2 uses the Taylor series to x^15 (the next term
// is below 1e-8 relative there). exp(2x) = inf for large x gives exactly 1.
__attribute__((always_inline)) inline float tanh_f32(float x) {
  const float ax = std::fabs(x);
  const float big = 1 - 2 / (exp_f32(2 * ax) + 1);
  const float x2 = x * x;
  const float small =
      ax * (1 + x2 * (-1 / 3.f +
                      x2 * (2 / 15.f + x2 * (-17 / 315.f +
                                             x2 * (62 / 2835.f +
                                                   x2 * (-1382 / 155925.f +
                                                         x2 * (21844 / 6081075.f +
                                                               x2 * (-929569 / 638512875.f))))))));
  const float t = ax < 0.5f ? small : big;
  return x < 0 ? -t : t;
}
// Always inlined: a call in a `#pragma omp simd` loop keeps it scalar (softmax_row called exp_t
// once per element; GCC had not inlined it there).
template <class T>
[[gnu::always_inline]] inline T exp_t(T x) {
  if constexpr (std::is_same_v<T, float>)
    return exp_f32(x);
  else
    return std::exp(x);
}
template <class T>
[[gnu::always_inline]] inline T tanh_t(T x) {
  if constexpr (std::is_same_v<T, float>)
    return tanh_f32(x);
  else
    return std::tanh(x);
}

// a * b + c. With FMA hardware one fused operation, stated here rather than left to GCC's
// contraction (-ffp-contract=fast fuses a product into the sum that consumes it, but not always:
// the one-column tiles of the products were left unfused). The rounding is then fixed by the
// text: the products' every element is the in-order chain of fused multiply-adds whatever the
// path, tile or block (engine/core/tensor_test.cc), and the compiled mode's generated code
// (engine/compiled/scalar_jit.h) repeats the scalar rules instruction for instruction.
template <class T>
[[gnu::always_inline]] inline T madd(T a, T b, T c) {
#if defined(__FMA__)
  return std::fma(a, b, c);
#else
  return a * b + c;
#endif
}

// y += a x; fresh: y is uninitialised, and gets what adding to zero gives (OpArgs::fresh).
template <class T>
inline void axpy(T* y, T a, const T* x, int32_t n, bool fresh = false) {
  if (fresh) {
#pragma omp simd
    for (int32_t i = 0; i < n; i++) y[i] = T(0) + a * x[i];
    return;
  }
#pragma omp simd
  for (int32_t i = 0; i < n; i++) y[i] += a * x[i];
}

// ---- softmax and cross-entropy ----

// out (n) = softmax(in (n)), max-subtracted so no exp overflows. Returns the sum of exp(in - max),
// from which a log-sum-exp is max + log(sum).
template <class T>
inline T softmax_row(T* out, const T* in, int32_t n, T* max_out = nullptr) {
  T maxv = in[0], total = 0;
  for (int32_t i = 1; i < n; i++) maxv = std::max(maxv, in[i]);
#pragma omp simd reduction(+ : total)
  for (int32_t i = 0; i < n; i++) total += (out[i] = exp_t(in[i] - maxv));
  const T inv = T(1) / total;
  for (int32_t i = 0; i < n; i++) out[i] *= inv;
  if (max_out) *max_out = maxv;
  return total;
}
// dx (n) += y * (dy - sum(dy * y)), y the softmax output.
template <class T>
inline void softmax_row_backward(T* dx, const T* dy, const T* y, int32_t n) {
  T dot = 0;
  for (int32_t c = 0; c < n; c++) dot += dy[c] * y[c];
  for (int32_t c = 0; c < n; c++) dx[c] += y[c] * (dy[c] - dot);
}

// Mean over rows of logits (N, V) of -log softmax(row)[target], computed as
// log-sum-exp(row) - row[target] so that a target far below the row's maximum costs what it should
// (logits [100, 0], target 1: 100) instead of -log of an underflowed probability. probs (N, V)
// keeps the softmax for the backward.
// Rows [r0, r1): each row's term of the loss into terms[r]; the loss is their mean, summed in
// row order (cross_entropy_loss).
template <class T>
inline void cross_entropy_rows(T* terms, T* probs, const T* logits, const int32_t* targets,
                               int32_t V, int32_t r0, int32_t r1) {
  for (int32_t r = r0; r < r1; r++) {
    const T* row = logits + size_t(r) * V;
    T maxv;
    const T total = softmax_row(probs + size_t(r) * V, row, V, &maxv);
    terms[r] = maxv + std::log(total) - row[targets[r]];
  }
}
template <class T>
inline T cross_entropy_loss(const T* terms, int32_t N) {
  T loss = 0;
  for (int32_t r = 0; r < N; r++) loss += terms[r];
  return loss / T(N);
}
// dlogits (N, V) += dloss / N * (probs - onehot(target)); fresh: written, not added to.
template <class T>
inline void cross_entropy_backward(T* dlogits, T dloss, const T* probs, const int32_t* targets,
                                   int32_t N, int32_t V, bool fresh = false, int32_t r0 = 0,
                                   int32_t r1 = -1) {
  const T d = dloss / T(N);
  for (int32_t r = r0; r < (r1 < 0 ? N : r1); r++) {
    const T* p = probs + size_t(r) * V;
    T* gx = dlogits + size_t(r) * V;
    axpy(gx, d, p, V, fresh);
    gx[targets[r]] -= d;
  }
}

// ---- layernorm (torch.nn.LayerNorm: biased variance, eps 1e-5) ----

// out (N, C) = (x - mean) * rstd * gamma + beta per row; stats (2N) keeps the N means, then the N
// reciprocal standard deviations, for the backward. Rows [r0, r1) (all when r1 < 0).
template <class T>
inline void layernorm_forward(T* out, T* stats, const T* x, const T* gamma, const T* beta,
                              int32_t N, int32_t C, int32_t r0 = 0, int32_t r1 = -1) {
  for (int32_t r = r0; r < (r1 < 0 ? N : r1); r++) {
    const T* row = x + size_t(r) * C;
    T m = 0, v = 0;
    for (int32_t c = 0; c < C; c++) m += row[c];
    m /= C;
    for (int32_t c = 0; c < C; c++) v += (row[c] - m) * (row[c] - m);
    const T rstd = T(1) / std::sqrt(v / C + T(1e-5));
    T* o = out + size_t(r) * C;
    for (int32_t c = 0; c < C; c++) o[c] = (row[c] - m) * rstd * gamma[c] + beta[c];
    stats[r] = m, stats[N + r] = rstd;
  }
}
// dx = rstd * (dnorm - mean(dnorm) - norm * mean(dnorm * norm)), dnorm = dout * gamma;
// dgamma += dout * norm; dbeta += dout. A null gradient pointer is skipped. fresh, bit k: the
// k-th gradient (dx, dgamma, dbeta) is written, not added to (OpArgs::fresh); dgamma and dbeta by
// the first row. Rows [r0, r1): when threads split the rows, each part takes dx alone, and
// dgamma and dbeta, sums down the rows, go column by column after (layernorm_backward_params).
template <class T>
inline void layernorm_backward(T* dx, T* dgamma, T* dbeta, const T* dout, const T* stats,
                               const T* x, const T* gamma, int32_t N, int32_t C, uint8_t fresh,
                               int32_t r0, int32_t r1) {
  const bool dx_fresh = fresh & 1;
  for (int32_t r = r0; r < r1; r++) {
    const T m = stats[r], rstd = stats[N + r];
    const T *xr = x + size_t(r) * C, *gr = dout + size_t(r) * C;
    const bool dgamma_fresh = (fresh & 2) && r == 0, dbeta_fresh = (fresh & 4) && r == 0;
    T mean_dnorm = 0, mean_dnorm_norm = 0;
    for (int32_t c = 0; c < C; c++) {
      const T norm = (xr[c] - m) * rstd, dnorm = gr[c] * gamma[c];
      mean_dnorm += dnorm, mean_dnorm_norm += dnorm * norm;
      if (dgamma) dgamma[c] = (dgamma_fresh ? T(0) : dgamma[c]) + gr[c] * norm;
      if (dbeta) dbeta[c] = (dbeta_fresh ? T(0) : dbeta[c]) + gr[c];
    }
    mean_dnorm /= C, mean_dnorm_norm /= C;
    if (dx)
      for (int32_t c = 0; c < C; c++) {
        const T norm = (xr[c] - m) * rstd;
        T& d = dx[size_t(r) * C + c];
        d = (dx_fresh ? T(0) : d) + rstd * (gr[c] * gamma[c] - mean_dnorm - norm * mean_dnorm_norm);
      }
  }
}
// dgamma and dbeta alone, columns [c0, c1), each summed in row order as above.
template <class T>
inline void layernorm_backward_params(T* dgamma, T* dbeta, const T* dout, const T* stats,
                                      const T* x, int32_t N, int32_t C, uint8_t fresh, int32_t c0,
                                      int32_t c1) {
  for (int32_t r = 0; r < N; r++) {
    const T m = stats[r], rstd = stats[N + r];
    const T *xr = x + size_t(r) * C, *gr = dout + size_t(r) * C;
    const bool dgamma_fresh = (fresh & 2) && r == 0, dbeta_fresh = (fresh & 4) && r == 0;
    for (int32_t c = c0; c < c1; c++) {
      const T norm = (xr[c] - m) * rstd;
      if (dgamma) dgamma[c] = (dgamma_fresh ? T(0) : dgamma[c]) + gr[c] * norm;
      if (dbeta) dbeta[c] = (dbeta_fresh ? T(0) : dbeta[c]) + gr[c];
    }
  }
}

// ---- causal multi-head self-attention, fused ----
// qkv (B*T, 3C): queries, keys, values side by side, each split into H heads of hs = C/H.
// out (B*T, C): for each head and position t, the average of v over positions s <= t weighted by
// softmax(q_t . k_s / sqrt(hs)). Vaswani et al. 2017, eq. 1; the causal mask as in GPT (Radford
// et al. 2018). probs (B, H, T, T) keeps the weights for the backward. HS > 0 compiles a head size
// as a constant, so its loops unroll into registers; HS = 0 takes hs at run time (<= kMaxHeadSize).
inline constexpr int32_t kMaxHeadSize = 256;

template <class T, int HS>
inline void attention_forward(T* __restrict out, T* __restrict probs, const T* __restrict qkv,
                              int32_t B, int32_t T_, int32_t H, int32_t runtime_hs) {
  const int32_t hs = HS > 0 ? HS : runtime_hs, C = H * hs, C3 = 3 * C;
  const T scale = T(1) / std::sqrt(T(hs));
  for (int32_t b = 0; b < B; b++)
    for (int32_t h = 0; h < H; h++)
      for (int32_t t = 0; t < T_; t++) {
        const T* __restrict q = qkv + size_t(b * T_ + t) * C3 + h * hs;
        T* __restrict p = probs + ((size_t(b) * H + h) * T_ + t) * T_;
        T maxv = -INFINITY;
        for (int32_t s = 0; s <= t; s++) {
          const T* __restrict k = qkv + size_t(b * T_ + s) * C3 + C + h * hs;
          T dot = 0;
          for (int32_t i = 0; i < hs; i++) dot += q[i] * k[i];
          p[s] = dot * scale;
          maxv = std::max(maxv, p[s]);
        }
        T total = 0;
        for (int32_t s = 0; s <= t; s++) total += (p[s] = exp_t(p[s] - maxv));
        const T inv = T(1) / total;
        T acc[HS > 0 ? HS : kMaxHeadSize];  // this head's output row, across s
        for (int32_t i = 0; i < hs; i++) acc[i] = 0;
        for (int32_t s = 0; s <= t; s++) {
          p[s] *= inv;
          const T* __restrict v = qkv + size_t(b * T_ + s) * C3 + 2 * C + h * hs;
          for (int32_t i = 0; i < hs; i++) acc[i] += p[s] * v[i];
        }
        std::memcpy(out + size_t(b * T_ + t) * C + h * hs, acc, hs * sizeof(T));
      }
}
// Softmax attention's chain rule, position by position (as in llm.c's attention_backward):
// dv_s += p_ts dout_t; dp_ts = dout_t . v_s; dpre_ts = p_ts (dp_ts - sum_r p_tr dp_tr);
// dq_t += scale sum_s dpre_ts k_s; dk_s += scale dpre_ts q_t. dp (T) is scratch.
template <class T, int HS>
inline void attention_backward(T* __restrict dqkv, T* __restrict dp, const T* __restrict dout,
                               const T* __restrict probs, const T* __restrict qkv, int32_t B,
                               int32_t T_, int32_t H, int32_t runtime_hs) {
  const int32_t hs = HS > 0 ? HS : runtime_hs, C = H * hs, C3 = 3 * C;
  const T scale = T(1) / std::sqrt(T(hs));
  for (int32_t b = 0; b < B; b++)
    for (int32_t h = 0; h < H; h++)
      for (int32_t t = 0; t < T_; t++) {
        const T* __restrict p = probs + ((size_t(b) * H + h) * T_ + t) * T_;
        const T* __restrict d_out = dout + size_t(b * T_ + t) * C + h * hs;
        const size_t qo = size_t(b * T_ + t) * C3 + h * hs;
        T weighted = 0;
        for (int32_t s = 0; s <= t; s++) {
          const size_t vo = size_t(b * T_ + s) * C3 + 2 * C + h * hs;
          T d = 0;
          for (int32_t i = 0; i < hs; i++) {
            d += d_out[i] * qkv[vo + i];
            dqkv[vo + i] += p[s] * d_out[i];
          }
          dp[s] = d;
          weighted += p[s] * d;
        }
        T dq[HS > 0 ? HS : kMaxHeadSize];  // the query's gradient, across s
        for (int32_t i = 0; i < hs; i++) dq[i] = 0;
        for (int32_t s = 0; s <= t; s++) {
          const T dpre = p[s] * (dp[s] - weighted) * scale;
          const size_t ko = size_t(b * T_ + s) * C3 + C + h * hs;
          for (int32_t i = 0; i < hs; i++) {
            dq[i] += dpre * qkv[ko + i];
            dqkv[ko + i] += dpre * qkv[qo + i];
          }
        }
        for (int32_t i = 0; i < hs; i++) dqkv[qo + i] += dq[i];
      }
}
// Short sequences of small heads (mini_gpt: 8 positions, heads of 4): a query at a time, the
// loops above are 4 elements long over at most 8 keys, scalar code with an exp per score (a
// third of mini_gpt's step at batch 8, perf). Here one head of one sequence is computed
// at once, its positions the L lanes of every loop: queries t for the scores, the softmax, the
// output and the query's gradient; keys s for the keys' and values' gradients. Each sum adds
// the same terms in the same order as above (a masked term, s > t, adds an exact zero), each
// multiply-add fused (madd): with madd in the kernels above too the results were their bits,
// but there it serialised their vectorised loops over heads of 32 (a slower mini_gpt_wide), so
// those keep GCC's choice and the two differ by roundings (engine/kernels/kernels_test.cc).
// probs rows are written whole, zero past the diagonal, for the backward's masked terms
// (dev/notes.md, "Few rows, panel by panel; the tile's accumulators named; attention over lanes").
template <class T, int HS, int L>
inline void attention_forward_lanes(T* __restrict out, T* __restrict probs, const T* __restrict qkv,
                                    int32_t B, int32_t T_, int32_t H) {
  const int32_t C = H * HS, C3 = 3 * C;
  const T scale = T(1) / std::sqrt(T(HS));
  for (int32_t b = 0; b < B; b++)
    for (int32_t h = 0; h < H; h++) {
      const T* __restrict q0 = qkv + size_t(b) * T_ * C3 + h * HS;         // k at + C, v at + 2 C
      T q[HS][L] = {}, sc[L][L], maxv[L], total[L] = {}, acc[HS][L] = {};  // sc[s][t]: key, query
      for (int32_t t = 0; t < T_; t++)
        for (int i = 0; i < HS; i++) q[i][t] = q0[size_t(t) * C3 + i];
      for (int t = 0; t < L; t++) maxv[t] = -INFINITY;
      for (int32_t s = 0; s < T_; s++) {
        const T* __restrict k = q0 + size_t(s) * C3 + C;
#pragma omp simd
        for (int t = 0; t < L; t++) {
          T dot = 0;
          for (int i = 0; i < HS; i++) dot = madd(q[i][t], k[i], dot);
          sc[s][t] = dot * scale;
          maxv[t] = s <= t ? std::max(maxv[t], sc[s][t]) : maxv[t];
        }
      }
      for (int32_t s = 0; s < T_; s++)
#pragma omp simd
        for (int t = 0; t < L; t++)
          total[t] += (sc[s][t] = s <= t ? exp_t(sc[s][t] - maxv[t]) : T(0));
      for (int32_t s = 0; s < T_; s++) {
        const T* __restrict v = q0 + size_t(s) * C3 + 2 * C;
#pragma omp simd
        for (int t = 0; t < L; t++) {
          sc[s][t] *= T(1) / total[t];
          for (int i = 0; i < HS; i++) acc[i][t] = madd(sc[s][t], v[i], acc[i][t]);
        }
      }
      T* __restrict p = probs + (size_t(b) * H + h) * T_ * T_;
      for (int32_t t = 0; t < T_; t++) {
        for (int i = 0; i < HS; i++) out[size_t(b * T_ + t) * C + h * HS + i] = acc[i][t];
        for (int32_t s = 0; s < T_; s++) p[size_t(t) * T_ + s] = sc[s][t];
      }
    }
}
template <class T, int HS, int L>
inline void attention_backward_lanes(T* __restrict dqkv, const T* __restrict dout,
                                     const T* __restrict probs, const T* __restrict qkv, int32_t B,
                                     int32_t T_, int32_t H) {
  const int32_t C = H * HS, C3 = 3 * C;
  const T scale = T(1) / std::sqrt(T(HS));
  for (int32_t b = 0; b < B; b++)
    for (int32_t h = 0; h < H; h++) {
      const size_t q0 = size_t(b) * T_ * C3 + h * HS;  // k at + C, v at + 2 C
      const T* __restrict p = probs + (size_t(b) * H + h) * T_ * T_;
      // lanes t: the output's gradient, p and dp by key s; pt and dpre_t by query t, lanes s
      T g[HS][L] = {}, ps[L][L] = {}, pt[L][L] = {}, dp[L][L], dpre_t[L][L] = {}, weighted[L] = {};
      T dq[HS][L] = {}, dk[HS][L] = {}, dv[HS][L] = {};
      for (int32_t t = 0; t < T_; t++) {
        for (int i = 0; i < HS; i++) g[i][t] = dout[size_t(b * T_ + t) * C + h * HS + i];
        for (int32_t s = 0; s < T_; s++) ps[s][t] = pt[t][s] = p[size_t(t) * T_ + s];
      }
      for (int32_t s = 0; s < T_; s++) {
        const T* __restrict v = qkv + q0 + size_t(s) * C3 + 2 * C;
#pragma omp simd
        for (int t = 0; t < L; t++) {
          T d = 0;
          for (int i = 0; i < HS; i++) d = madd(g[i][t], v[i], d);
          dp[s][t] = d;
          weighted[t] = madd(ps[s][t], d, weighted[t]);
        }
      }
      for (int32_t s = 0; s < T_; s++) {
        const T* __restrict k = qkv + q0 + size_t(s) * C3 + C;
#pragma omp simd
        for (int t = 0; t < L; t++) {
          const T dpre = ps[s][t] * (dp[s][t] - weighted[t]) * scale;
          dpre_t[t][s] = dpre;
          for (int i = 0; i < HS; i++) dq[i][t] = madd(dpre, k[i], dq[i][t]);
        }
      }
      for (int32_t s = 0; s < T_; s++)
        for (int i = 0; i < HS; i++) {
          dk[i][s] = dqkv[q0 + size_t(s) * C3 + C + i];
          dv[i][s] = dqkv[q0 + size_t(s) * C3 + 2 * C + i];
        }
      for (int32_t t = 0; t < T_; t++) {
        const T* __restrict q = qkv + q0 + size_t(t) * C3;
#pragma omp simd
        for (int s = 0; s < L; s++)
          for (int i = 0; i < HS; i++) {
            dv[i][s] = madd(pt[t][s], g[i][t], dv[i][s]);
            dk[i][s] = madd(dpre_t[t][s], q[i], dk[i][s]);
          }
      }
      for (int32_t s = 0; s < T_; s++)
        for (int i = 0; i < HS; i++) {
          dqkv[q0 + size_t(s) * C3 + i] += dq[i][s];
          dqkv[q0 + size_t(s) * C3 + C + i] = dk[i][s];
          dqkv[q0 + size_t(s) * C3 + 2 * C + i] = dv[i][s];
        }
    }
}
// Longer sequences of wider heads (mini_gpt_wide: 64 positions, heads of 32): a query at a time,
// its keys the lanes. Position by position, every score and every dp_ts is a dot product over the
// head, a horizontal sum per key; here a head's keys (forward) or values (backward) are
// transposed once into kt (HS, L), so W keys' scores are one vector, a chain of HS fused
// multiply-adds (the same chain for every key, whichever lanes it lands in). Sums over keys
// (softmax's total, the output, dq) and the per-key updates of dk and dv vectorize over the head
// as before. Same terms as the position-by-position kernels, other roundings
// (engine/kernels/kernels_test.cc).
template <class T>
inline constexpr int kKeyLanes = 64 / sizeof(T);  // keys a vector holds at AVX-512 width
template <class T, int HS, int L>
inline void transpose_head(T (&kt)[HS][L], const T* __restrict rows, int32_t T_, int32_t C3) {
  constexpr int W = kKeyLanes<T>;
  const int32_t padded = (T_ + W - 1) / W * W;
  for (int32_t s = 0; s < T_; s++)
    for (int i = 0; i < HS; i++) kt[i][s] = rows[size_t(s) * C3 + i];
  for (int i = 0; i < HS; i++)  // the last vector's keys past the sequence: zero, never used
    for (int32_t s = T_; s < padded; s++) kt[i][s] = T(0);
}
// d[s] = sum_i x[i] kt[i][s] for s < n, in vectors of W keys.
template <class T, int HS, int L>
[[gnu::always_inline]] inline void dots_over_keys(T* __restrict d, const T* __restrict x,
                                                  const T (&kt)[HS][L], int32_t n) {
  constexpr int W = kKeyLanes<T>;
  for (int32_t s0 = 0; s0 < n; s0 += W)
#pragma omp simd  // over keys, each lane's chain in a register (a chain over an array was kept
                  // in memory, a store and a load per multiply-add)
    for (int w = 0; w < W; w++) {
      T acc = 0;
      for (int i = 0; i < HS; i++) acc = madd(x[i], kt[i][s0 + w], acc);
      d[s0 + w] = acc;
    }
}
template <class T, int HS, int L>
inline void attention_forward_key_lanes(T* __restrict out, T* __restrict probs,
                                        const T* __restrict qkv, int32_t B, int32_t T_, int32_t H) {
  const int32_t C = H * HS, C3 = 3 * C;
  const T scale = T(1) / std::sqrt(T(HS));
  alignas(64) T kt[HS][L];
  alignas(64) T sc[L];
  for (int32_t b = 0; b < B; b++)
    for (int32_t h = 0; h < H; h++) {
      const T* __restrict base = qkv + size_t(b) * T_ * C3 + h * HS;  // k at + C, v at + 2 C
      transpose_head(kt, base + C, T_, C3);
      for (int32_t t = 0; t < T_; t++) {
        const int32_t n = t + 1;
        dots_over_keys(sc, base + size_t(t) * C3, kt, n);
        T maxv = -INFINITY;
        for (int32_t s = 0; s < n; s++) maxv = std::max(maxv, sc[s] *= scale);
        T total = 0;
#pragma omp simd reduction(+ : total)
        for (int32_t s = 0; s < n; s++) total += (sc[s] = exp_t(sc[s] - maxv));
        const T inv = T(1) / total;
        T* __restrict p = probs + ((size_t(b) * H + h) * T_ + t) * T_;
        T acc[HS] = {};
        for (int32_t s = 0; s < n; s++) {
          const T ps = p[s] = sc[s] * inv;
          const T* __restrict v = base + size_t(s) * C3 + 2 * C;
#pragma omp simd
          for (int i = 0; i < HS; i++) acc[i] = madd(ps, v[i], acc[i]);
        }
        std::memcpy(out + size_t(b * T_ + t) * C + h * HS, acc, HS * sizeof(T));
      }
    }
}
template <class T, int HS, int L>
inline void attention_backward_key_lanes(T* __restrict dqkv, const T* __restrict dout,
                                         const T* __restrict probs, const T* __restrict qkv,
                                         int32_t B, int32_t T_, int32_t H) {
  const int32_t C = H * HS, C3 = 3 * C;
  const T scale = T(1) / std::sqrt(T(HS));
  alignas(64) T vt[HS][L];
  alignas(64) T dp[L];
  for (int32_t b = 0; b < B; b++)
    for (int32_t h = 0; h < H; h++) {
      const size_t base = size_t(b) * T_ * C3 + h * HS;  // k at + C, v at + 2 C
      transpose_head(vt, qkv + base + 2 * C, T_, C3);
      for (int32_t t = 0; t < T_; t++) {
        const int32_t n = t + 1;
        const T* __restrict p = probs + ((size_t(b) * H + h) * T_ + t) * T_;
        const T* __restrict g = dout + size_t(b * T_ + t) * C + h * HS;
        const T* __restrict q = qkv + base + size_t(t) * C3;
        dots_over_keys(dp, g, vt, n);  // dp_ts = dout_t . v_s
        T weighted = 0;
#pragma omp simd reduction(+ : weighted)
        for (int32_t s = 0; s < n; s++) weighted += p[s] * dp[s];
        T dq[HS] = {};
        for (int32_t s = 0; s < n; s++) {
          const T dpre = p[s] * (dp[s] - weighted) * scale, ps = p[s];
          const T* __restrict k = qkv + base + size_t(s) * C3 + C;
          T* __restrict dk = dqkv + base + size_t(s) * C3 + C;
          T* __restrict dv = dk + C;
#pragma omp simd
          for (int i = 0; i < HS; i++) {
            dv[i] = madd(ps, g[i], dv[i]);
            dq[i] = madd(dpre, k[i], dq[i]);
            dk[i] = madd(dpre, q[i], dk[i]);
          }
        }
        T* __restrict dqt = dqkv + base + size_t(t) * C3;
        for (int i = 0; i < HS; i++) dqt[i] += dq[i];
      }
    }
}
// Short sequences of heads of 4 and 8 over lanes; sequences of 17 to 128 positions of heads of
// 16, 32 and 64 with their keys as lanes; otherwise a query at a time, the head sizes the models
// use compiled as constants, any other taking the run-time path.
template <class T>
inline void attention_forward_any(T* out, T* probs, const T* qkv, int32_t B, int32_t T_, int32_t H,
                                  int32_t hs) {
  if (T_ <= 8 && hs == 4) return attention_forward_lanes<T, 4, 8>(out, probs, qkv, B, T_, H);
  if (T_ <= 16 && hs == 4) return attention_forward_lanes<T, 4, 16>(out, probs, qkv, B, T_, H);
  if (T_ <= 8 && hs == 8) return attention_forward_lanes<T, 8, 8>(out, probs, qkv, B, T_, H);
  if (T_ <= 16 && hs == 8) return attention_forward_lanes<T, 8, 16>(out, probs, qkv, B, T_, H);
  if (T_ > 16 && T_ <= 128) switch (hs) {
      case 16: return attention_forward_key_lanes<T, 16, 128>(out, probs, qkv, B, T_, H);
      case 32: return attention_forward_key_lanes<T, 32, 128>(out, probs, qkv, B, T_, H);
      case 64: return attention_forward_key_lanes<T, 64, 128>(out, probs, qkv, B, T_, H);
    }
  switch (hs) {
    case 4: return attention_forward<T, 4>(out, probs, qkv, B, T_, H, hs);
    case 8: return attention_forward<T, 8>(out, probs, qkv, B, T_, H, hs);
    case 16: return attention_forward<T, 16>(out, probs, qkv, B, T_, H, hs);
    case 32: return attention_forward<T, 32>(out, probs, qkv, B, T_, H, hs);
    case 64: return attention_forward<T, 64>(out, probs, qkv, B, T_, H, hs);
    default: return attention_forward<T, 0>(out, probs, qkv, B, T_, H, hs);
  }
}
template <class T>
inline void attention_backward_any(T* dqkv, T* dp, const T* dout, const T* probs, const T* qkv,
                                   int32_t B, int32_t T_, int32_t H, int32_t hs) {
  if (T_ <= 8 && hs == 4)
    return attention_backward_lanes<T, 4, 8>(dqkv, dout, probs, qkv, B, T_, H);
  if (T_ <= 16 && hs == 4)
    return attention_backward_lanes<T, 4, 16>(dqkv, dout, probs, qkv, B, T_, H);
  if (T_ <= 8 && hs == 8)
    return attention_backward_lanes<T, 8, 8>(dqkv, dout, probs, qkv, B, T_, H);
  if (T_ <= 16 && hs == 8)
    return attention_backward_lanes<T, 8, 16>(dqkv, dout, probs, qkv, B, T_, H);
  if (T_ > 16 && T_ <= 128) switch (hs) {
      case 16: return attention_backward_key_lanes<T, 16, 128>(dqkv, dout, probs, qkv, B, T_, H);
      case 32: return attention_backward_key_lanes<T, 32, 128>(dqkv, dout, probs, qkv, B, T_, H);
      case 64: return attention_backward_key_lanes<T, 64, 128>(dqkv, dout, probs, qkv, B, T_, H);
    }
  switch (hs) {
    case 4: return attention_backward<T, 4>(dqkv, dp, dout, probs, qkv, B, T_, H, hs);
    case 8: return attention_backward<T, 8>(dqkv, dp, dout, probs, qkv, B, T_, H, hs);
    case 16: return attention_backward<T, 16>(dqkv, dp, dout, probs, qkv, B, T_, H, hs);
    case 32: return attention_backward<T, 32>(dqkv, dp, dout, probs, qkv, B, T_, H, hs);
    case 64: return attention_backward<T, 64>(dqkv, dp, dout, probs, qkv, B, T_, H, hs);
    default: return attention_backward<T, 0>(dqkv, dp, dout, probs, qkv, B, T_, H, hs);
  }
}

// ---- optimizers, in place over n elements of the flat buffers (engine/core/optimizer.h) ----

// Whether every gradient is finite: a sum of g * 0, NaN for NaN and Inf and zero otherwise, with
// no branch. Four vectors of sums, not one: one is bound by the add's latency, at half the
// speed (dev/notes.md, "A sync-free optimizer: check first, update in place").
template <class T>
inline bool all_finite(const T* g, size_t n) {
  constexpr size_t kLanes = 128 / sizeof(T);
  T lanes[kLanes] = {}, rest = 0;
  size_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
#pragma omp simd
    for (size_t l = 0; l < kLanes; l++) lanes[l] += g[j + l] * T(0);
  for (; j < n; j++) rest += g[j] * T(0);
  for (size_t l = 0; l < kLanes; l++) rest += lanes[l];
  return rest == T(0);
}

template <class T>
inline void sgd_update(T* p, const T* g, T lr, size_t n) {
#pragma omp simd
  for (size_t j = 0; j < n; j++) p[j] -= lr * g[j];
}

// Loshchilov & Hutter 2019 (decoupled weight decay), with torch.optim.AdamW's bias correction and
// eps placement, so that every backend takes the same step from the same gradients. The scalars
// depend on the step count only: adamw_coefficients computes them once per step. AdamWStep is
// engine/kernels/adamw_step.h's, one type for every instruction-set unit.
template <class T>
inline AdamWStep<T> adamw_coefficients(double lr, double beta1, double beta2, double eps,
                                       double weight_decay, int64_t t) {
  const double c1 = 1 - std::pow(beta1, t), c2 = 1 - std::pow(beta2, t);
  return {T(beta1), T(beta2), T(eps), T(1 - lr * weight_decay), T(lr / c1), T(1 / std::sqrt(c2))};
}
template <class T>
inline void adamw_update(T* p, const T* g, T* m, T* v, const AdamWStep<T>& k, size_t n) {
  const T b1 = k.beta1, b2 = k.beta2, eps = k.eps, decay = k.decay, step = k.step, rc2 = k.rc2;
#pragma omp simd
  for (size_t j = 0; j < n; j++) {
    const T gj = g[j];
    m[j] = b1 * m[j] + (1 - b1) * gj;
    v[j] = b2 * v[j] + (1 - b2) * gj * gj;
    p[j] = p[j] * decay - step * m[j] / (std::sqrt(v[j]) * rc2 + eps);
  }
}

BP_KERNELS_END
}  // namespace bp
