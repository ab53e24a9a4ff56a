// engine/dialects/kernels_reference.h: the reference dialect, a plain kernel for every hot op.
//
// Each is the textbook loop: libm's exp, tanh and erf, sums accumulated in double, no blocking,
// no fusion beyond what the op itself is. They are the dialect any other is checked against
// (engine/dialects/dialects_test.cc) and the floor that `--dialect=auto` must beat; they run the
// same OpArgs, aux layout and backward reads as the engine's own kernels (engine/core/ops.h), so a
// node can run either. Double for T = float (long double for T = double) keeps their rounding apart
// from the fast kernels', which is what a reference should be. Tests:
// engine/dialects/dialects_test.cc (finite differences in double, and every dialect against these).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "engine/core/ops.h"

namespace bp::reference {

template <class T>
using Acc = std::conditional_t<std::is_same_v<T, float>, double, long double>;

// c (M, N) += op(a) op(b), one dot product per element.
struct Gemm {
  static constexpr bool in_build = true;
  static constexpr bool library = false;
  template <class T>
  static void run(T* c, const T* a, bool trans_a, const T* b, bool trans_b, int32_t M, int32_t N,
                  int32_t K, T*, bool fresh) {
    for (int32_t i = 0; i < M; i++)
      for (int32_t j = 0; j < N; j++) {
        Acc<T> s = fresh ? Acc<T>(0) : Acc<T>(c[size_t(i) * N + j]);
        for (int32_t k = 0; k < K; k++) {
          const T x = trans_a ? a[size_t(k) * M + i] : a[size_t(i) * K + k];
          const T y = trans_b ? b[size_t(j) * K + k] : b[size_t(k) * N + j];
          s += Acc<T>(x) * y;
        }
        c[size_t(i) * N + j] = T(s);
      }
  }
  template <class T>
  static bool available(int32_t, int32_t, int32_t, bool, bool) {
    return true;
  }
  static size_t scratch_elems(int32_t, int32_t, int32_t, bool, bool) { return 0; }
};

// ---- elementwise ----
template <class T>
void add_forward(const OpArgs<T>& a) {
  const bool row = ops::broadcasts_row(a);
  for (int32_t r = 0; r < a.rows; r++)
    for (int32_t c = 0; c < a.cols; c++)
      a.out[size_t(r) * a.cols + c] =
          a.in[0][size_t(r) * a.cols + c] + a.in[1][(row ? 0 : size_t(r) * a.cols) + c];
}
template <class T>
void add_backward(const OpArgs<T>& a) {
  const bool row = ops::broadcasts_row(a);
  if (a.din[1] && row)  // the broadcast row's gradient: a column sum, in double
    for (int32_t c = 0; c < a.cols; c++) {
      Acc<T> s = a.din[1][c];
      for (int32_t r = 0; r < a.rows; r++) s += a.dout[size_t(r) * a.cols + c];
      a.din[1][c] = T(s);
    }
  for (size_t i = 0; i < ops::numel(a); i++) {
    if (a.din[0]) a.din[0][i] += a.dout[i];
    if (a.din[1] && !row) a.din[1][i] += a.dout[i];
  }
}
template <class T>
void mul_forward(const OpArgs<T>& a) {
  const bool row = ops::broadcasts_row(a);
  for (int32_t r = 0; r < a.rows; r++)
    for (int32_t c = 0; c < a.cols; c++)
      a.out[size_t(r) * a.cols + c] =
          a.in[0][size_t(r) * a.cols + c] * a.in[1][(row ? 0 : size_t(r) * a.cols) + c];
}
template <class T>
void mul_backward(const OpArgs<T>& a) {
  const bool row = ops::broadcasts_row(a);
  for (int32_t c = 0; c < a.cols; c++) {
    Acc<T> s = 0;  // the broadcast row's gradient, summed over rows
    for (int32_t r = 0; r < a.rows; r++) {
      const size_t i = size_t(r) * a.cols + c, y = (row ? 0 : size_t(r) * a.cols) + c;
      if (a.din[0]) a.din[0][i] += a.dout[i] * a.in[1][y];
      if (a.din[1] && !row) a.din[1][i] += a.dout[i] * a.in[0][i];
      if (row) s += Acc<T>(a.dout[i]) * a.in[0][i];
    }
    if (a.din[1] && row) a.din[1][c] = T(a.din[1][c] + s);
  }
}
template <class T>
void tanh_forward(const OpArgs<T>& a) {
  for (size_t i = 0; i < ops::numel(a); i++) a.out[i] = std::tanh(a.in[0][i]);
}
template <class T>
void relu_forward(const OpArgs<T>& a) {
  for (size_t i = 0; i < ops::numel(a); i++)  // torch's: NaN and -0 kept
    a.out[i] = std::isnan(a.in[0][i]) || a.in[0][i] >= 0 ? a.in[0][i] : T(0);
}
template <class T>
void exp_forward(const OpArgs<T>& a) {
  for (size_t i = 0; i < ops::numel(a); i++) a.out[i] = std::exp(a.in[0][i]);
}
template <class T>
void gelu_forward(const OpArgs<T>& a) {
  for (size_t i = 0; i < ops::numel(a); i++) {
    const Acc<T> x = a.in[0][i];
    a.out[i] = T(x * (1 + std::erf(x / std::sqrt(Acc<T>(2)))) / 2);
  }
}
template <class T>
void gelu_backward(const OpArgs<T>& a) {
  const Acc<T> inv_sqrt_2pi = 1 / std::sqrt(2 * Acc<T>(M_PI));
  for (size_t i = 0; i < ops::numel(a); i++) {
    const Acc<T> x = a.in[0][i];
    const Acc<T> d =
        (1 + std::erf(x / std::sqrt(Acc<T>(2)))) / 2 + x * std::exp(-x * x / 2) * inv_sqrt_2pi;
    a.din[0][i] = T(a.din[0][i] + a.dout[i] * d);
  }
}
// tanh', relu', exp' from the output; log from the input: each is one product, as in ops.h.

// ---- softmax of every row ----
template <class T>
void softmax_rows(T* out, const T* in, int32_t rows, int32_t cols) {
  for (int32_t r = 0; r < rows; r++) {
    const T* x = in + size_t(r) * cols;
    T m = x[0];
    for (int32_t c = 1; c < cols; c++) m = x[c] > m ? x[c] : m;
    Acc<T> total = 0;
    for (int32_t c = 0; c < cols; c++) total += std::exp(Acc<T>(x[c]) - m);
    for (int32_t c = 0; c < cols; c++)
      out[size_t(r) * cols + c] = T(std::exp(Acc<T>(x[c]) - m) / total);
  }
}
template <class T>
void softmax_forward(const OpArgs<T>& a) {
  softmax_rows(a.out, a.in[0], a.rows, a.cols);
}
template <class T>
void softmax_backward(const OpArgs<T>& a) {
  for (int32_t r = 0; r < a.rows; r++) {
    const size_t o = size_t(r) * a.cols;
    Acc<T> dot = 0;
    for (int32_t c = 0; c < a.cols; c++) dot += Acc<T>(a.dout[o + c]) * a.out[o + c];
    for (int32_t c = 0; c < a.cols; c++)
      a.din[0][o + c] = T(a.din[0][o + c] + a.out[o + c] * (a.dout[o + c] - dot));
  }
}

// ---- cross-entropy: aux keeps the softmax of every row ----
template <class T>
void cross_entropy_forward(const OpArgs<T>& a) {
  const int32_t N = a.in_rows[0], V = a.in_cols[0];
  softmax_rows(a.aux, a.in[0], N, V);
  Acc<T> loss = 0;
  for (int32_t r = 0; r < N; r++) {  // log-sum-exp - target logit, never log of a tiny p
    const T* x = a.in[0] + size_t(r) * V;
    T m = x[0];
    for (int32_t c = 1; c < V; c++) m = x[c] > m ? x[c] : m;
    Acc<T> total = 0;
    for (int32_t c = 0; c < V; c++) total += std::exp(Acc<T>(x[c]) - m);
    loss += m + std::log(total) - x[a.index.data[r]];
  }
  a.out[0] = T(loss / N);
}
template <class T>
void cross_entropy_backward(const OpArgs<T>& a) {
  const int32_t N = a.in_rows[0], V = a.in_cols[0];
  const Acc<T> d = Acc<T>(a.dout[0]) / N;
  for (int32_t r = 0; r < N; r++)
    for (int32_t c = 0; c < V; c++) {
      const size_t i = size_t(r) * V + c;
      a.din[0][i] = T(a.din[0][i] + d * (Acc<T>(a.aux[i]) - (c == a.index.data[r] ? 1 : 0)));
    }
}

// ---- layernorm: aux keeps the N means, then the N reciprocal standard deviations ----
template <class T>
void layernorm_forward(const OpArgs<T>& a) {
  const int32_t N = a.rows, C = a.cols;
  for (int32_t r = 0; r < N; r++) {
    const T* x = a.in[0] + size_t(r) * C;
    Acc<T> m = 0, v = 0;
    for (int32_t c = 0; c < C; c++) m += x[c];
    m /= C;
    for (int32_t c = 0; c < C; c++) v += (x[c] - m) * (x[c] - m);
    const Acc<T> rstd = 1 / std::sqrt(v / C + Acc<T>(1e-5));
    for (int32_t c = 0; c < C; c++)
      a.out[size_t(r) * C + c] = T((x[c] - m) * rstd * a.in[1][c] + a.in[2][c]);
    a.aux[r] = T(m), a.aux[N + r] = T(rstd);
  }
}
template <class T>
void layernorm_backward(const OpArgs<T>& a) {
  const int32_t N = a.rows, C = a.cols;
  for (int32_t r = 0; r < N; r++) {
    const Acc<T> m = a.aux[r], rstd = a.aux[N + r];
    const T *x = a.in[0] + size_t(r) * C, *g = a.dout + size_t(r) * C;
    Acc<T> sum_dnorm = 0, sum_dnorm_norm = 0;
    for (int32_t c = 0; c < C; c++) {
      const Acc<T> norm = (x[c] - m) * rstd, dnorm = Acc<T>(g[c]) * a.in[1][c];
      sum_dnorm += dnorm, sum_dnorm_norm += dnorm * norm;
      if (a.din[1]) a.din[1][c] = T(a.din[1][c] + g[c] * norm);
      if (a.din[2]) a.din[2][c] += g[c];
    }
    if (a.din[0])
      for (int32_t c = 0; c < C; c++) {
        const Acc<T> norm = (x[c] - m) * rstd;
        a.din[0][size_t(r) * C + c] =
            T(a.din[0][size_t(r) * C + c] +
              rstd * (Acc<T>(g[c]) * a.in[1][c] - sum_dnorm / C - norm * sum_dnorm_norm / C));
      }
  }
}

// ---- causal self-attention, unfused: scores, masked softmax, weighted sum, per head ----
// Same layout as ops.h: in0 (B*T, 3C) queries | keys | values; aux (B, H, T, T) the weights,
// zero above the diagonal.
template <class T>
void attention_forward(const OpArgs<T>& a) {
  const int32_t B = a.arg[0], T_ = a.arg[1], H = a.arg[2], C = a.cols, hs = C / H;
  const Acc<T> scale = 1 / std::sqrt(Acc<T>(hs));
  const T* qkv = a.in[0];
  for (int32_t b = 0; b < B; b++)
    for (int32_t h = 0; h < H; h++)
      for (int32_t t = 0; t < T_; t++) {
        T* p = a.aux + ((size_t(b) * H + h) * T_ + t) * T_;
        const T* q = qkv + size_t(b * T_ + t) * 3 * C + h * hs;
        Acc<T> m = -INFINITY, total = 0;
        for (int32_t s = 0; s < T_; s++) p[s] = 0;
        for (int32_t s = 0; s <= t; s++) {
          Acc<T> dot = 0;
          const T* k = qkv + size_t(b * T_ + s) * 3 * C + C + h * hs;
          for (int32_t i = 0; i < hs; i++) dot += Acc<T>(q[i]) * k[i];
          p[s] = T(dot * scale);
          m = std::max(m, Acc<T>(p[s]));
        }
        for (int32_t s = 0; s <= t; s++) total += std::exp(Acc<T>(p[s]) - m);
        for (int32_t s = 0; s <= t; s++) p[s] = T(std::exp(Acc<T>(p[s]) - m) / total);
        for (int32_t i = 0; i < hs; i++) {
          Acc<T> o = 0;
          for (int32_t s = 0; s <= t; s++)
            o += Acc<T>(p[s]) * qkv[size_t(b * T_ + s) * 3 * C + 2 * C + h * hs + i];
          a.out[size_t(b * T_ + t) * C + h * hs + i] = T(o);
        }
      }
}
// dv_s += p_ts dout_t; dp_ts = dout_t . v_s; dscore_ts = p_ts (dp_ts - sum_r p_tr dp_tr);
// dq_t += scale sum_s dscore_ts k_s; dk_s += scale dscore_ts q_t. scratch: one row of dp (T).
template <class T>
void attention_backward(const OpArgs<T>& a) {
  if (!a.din[0]) return;
  const int32_t B = a.arg[0], T_ = a.arg[1], H = a.arg[2], C = a.cols, hs = C / H;
  const Acc<T> scale = 1 / std::sqrt(Acc<T>(hs));
  const T* qkv = a.in[0];
  T* dqkv = a.din[0];
  T* dp = a.scratch;
  auto at = [&](int32_t b, int32_t t, int32_t part, int32_t h) {
    return size_t(b * T_ + t) * 3 * C + part * C + h * hs;
  };
  for (int32_t b = 0; b < B; b++)
    for (int32_t h = 0; h < H; h++)
      for (int32_t t = 0; t < T_; t++) {
        const T* p = a.aux + ((size_t(b) * H + h) * T_ + t) * T_;
        const T* g = a.dout + size_t(b * T_ + t) * C + h * hs;
        Acc<T> weighted = 0;
        for (int32_t s = 0; s <= t; s++) {
          Acc<T> d = 0;
          for (int32_t i = 0; i < hs; i++) {
            d += Acc<T>(g[i]) * qkv[at(b, s, 2, h) + i];
            dqkv[at(b, s, 2, h) + i] += p[s] * g[i];
          }
          dp[s] = T(d);
          weighted += Acc<T>(p[s]) * d;
        }
        for (int32_t s = 0; s <= t; s++) {
          const Acc<T> dscore = p[s] * (dp[s] - weighted) * scale;
          for (int32_t i = 0; i < hs; i++) {
            dqkv[at(b, t, 0, h) + i] =
                T(dqkv[at(b, t, 0, h) + i] + dscore * qkv[at(b, s, 1, h) + i]);
            dqkv[at(b, s, 1, h) + i] =
                T(dqkv[at(b, s, 1, h) + i] + dscore * qkv[at(b, t, 0, h) + i]);
          }
        }
      }
}

}  // namespace bp::reference
