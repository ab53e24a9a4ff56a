// workloads/gradbench.h: GradBench's evals (github gradbench/gradbench, evals/<eval>/README.md) as
// scalar graphs, each written once for every ScalarBackend.
//
// Each eval computes what GradBench's `manual` tool computes (its cpp/gradbench/evals/<eval>.hpp),
// the same arithmetic in the same order, so that a scalar tool's tape is the one GradBench's C++
// tools record (less their additions of 0 and multiplications by 1).
// ode and det are cmpad's (github bradbell/cmpad) as GradBench has them. An eval is three parts:
//  - Input: its numbers, with GradBench's shapes; `input(size)` draws them from our seeded
//    generator (workloads/data.h), and the GradBench tool (gradbench/) reads GradBench's own;
//  - Graph<B>: the differentiated inputs made parameters of B, in the order GradBench lists the
//    gradient, and `objective(be)`, the function on B;
//  - the facts of a scalar workload (workloads/workload.h); its timed step (EvalRun) is
//    GradBench's gradient: build the graph, forward, backward, read every gradient, reset.
// The maximum that steadies a log-sum-exp is read as a plain number: the result does not depend
// on it (its gradient is exactly zero), so no backend needs a max op.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "workloads/backend.h"
#include "workloads/data.h"
#include "workloads/workload.h"

namespace bp {

// Double on every side, the same operations in the same order: backends agree to rounding.
inline constexpr Tolerance kEvalTolerance{1e-9, 1.0};

// Our generator's streams, one per eval (GradBench seeds numpy with 31337 for each).
inline constexpr uint64_t kEvalSeed = 31337;
inline std::vector<double> uniform_doubles(SplitMix64& rng, size_t n) {
  std::vector<double> v(n);
  for (double& x : v) x = rng.uniform();
  return v;
}
// Close to a standard normal with arithmetic only (the sum of 12 uniforms, less 6), so that a
// Python backend draws the same bits without relying on a libm.
inline std::vector<double> normal_doubles(SplitMix64& rng, size_t n) {
  std::vector<double> v(n);
  for (double& x : v) {
    double sum = 0;
    for (int i = 0; i < 12; i++) sum += rng.uniform();
    x = sum - 6;
  }
  return v;
}

// One step of an eval on backend B: GradBench's gradient function.
template <class W, ScalarBackend B>
struct EvalRun {
  using S = typename B::Scalar;
  typename W::template Graph<B> graph;
  EvalRun(B& be, int64_t size) : graph(be, W::input(size)) {}
  int64_t num_grads() const { return int64_t(graph.params.size()); }
  double step(B& be, std::span<double> grads) {
    return finish_step(be, graph.objective(be), grads, std::span<const S>(graph.params));
  }
};

// One gradient of eval W at `size` on backend B, in GradBench's order (the tests' and the lab's
// reference for the same work done elsewhere).
template <class W, ScalarBackend B>
std::vector<double> eval_gradient(int64_t size) {
  B be;
  EvalRun<W, B> run(be, size);
  std::vector<double> grads(size_t(run.num_grads()));
  run.step(be, grads);
  return grads;
}

template <class B>
std::vector<typename B::Scalar> params_of(B& be, std::span<const double> values) {
  std::vector<typename B::Scalar> p;
  p.reserve(values.size());
  for (double v : values) p.push_back(be.param(v));
  return p;
}

// log(sum(exp(x))), x of n elements: GradBench's `lse`.
struct Lse {
  static constexpr std::string_view name = "lse";
  static constexpr std::string_view family = "GradBench evals";
  static constexpr std::string_view times =
      "GradBench's lse gradient: log(sum(exp(x))) of n inputs, backward, read all n gradients";
  static constexpr Sizes sizes{"elements", {2500, 40000}, 1, 100'000'000};
  static constexpr Tolerance tolerance = kEvalTolerance;
  static constexpr int num_grads = kGradsPerSize;
  static constexpr KnownAnswer known = no_known_answer;

  struct Input {
    std::vector<double> x;
  };
  static Input input(int64_t n) {
    SplitMix64 rng{kEvalSeed};
    return {uniform_doubles(rng, size_t(n))};
  }
  template <ScalarBackend B>
  struct Graph {
    std::vector<typename B::Scalar> params;  // x
    double shift;                            // max(x)
    Graph(B& be, const Input& in)
        : params(params_of(be, in.x)), shift(*std::max_element(in.x.begin(), in.x.end())) {
      if (in.x.empty()) throw std::invalid_argument("lse: x is empty");
    }
    typename B::Scalar objective(B& be) const {
      typename B::Scalar s = be.exp(params[0] - shift);
      for (size_t i = 1; i < params.size(); i++) s = s + be.exp(params[i] - shift);
      return be.log(s) + shift;
    }
  };
  template <ScalarBackend B>
  using Run = EvalRun<Lse, B>;
};

// Linear least squares: 1/2 sum_i (sign(t_i) - sum_j x_j t_i^j)^2 over n points t_i evenly from
// -1 to 1, for m = 128 coefficients x (GradBench's default m): GradBench's `llsq`.
struct Llsq {
  static constexpr std::string_view name = "llsq";
  static constexpr std::string_view family = "GradBench evals";
  static constexpr std::string_view times =
      "GradBench's llsq gradient: least squares of 128 coefficients over n points, backward, read "
      "all 128 gradients";
  static constexpr Sizes sizes{"points", {64, 1024}, 2, 10'000'000};
  static constexpr Tolerance tolerance = kEvalTolerance;
  static constexpr int num_grads = kGradsPerSize;
  static constexpr KnownAnswer known = no_known_answer;
  static constexpr int64_t kCoefficients = 128;

  struct Input {
    std::vector<double> x;
    int64_t n;
  };
  static Input input(int64_t n) {
    SplitMix64 rng{kEvalSeed + 1};
    return {uniform_doubles(rng, kCoefficients), n};
  }
  template <ScalarBackend B>
  struct Graph {
    std::vector<typename B::Scalar> params;  // x
    int64_t n;
    Graph(B& be, const Input& in) : params(params_of(be, in.x)), n(in.n) {
      if (in.x.empty() || in.n < 2)
        throw std::invalid_argument("llsq: needs x of at least 1 and n of at least 2, got " +
                                    std::to_string(in.x.size()) + " and " + std::to_string(in.n));
    }
    typename B::Scalar objective(B&) const {
      using S = typename B::Scalar;
      std::vector<S> squares;
      for (int64_t i = 0; i < n; i++) {
        const double t = -1 + double(i) * 2 / double(n - 1);
        const double sign = double((0 < t) - (t < 0));
        S inner = sign - params[0];  // x_0 * t^0
        double power = t;
        for (size_t j = 1; j < params.size(); j++) {
          inner = inner - params[j] * power;
          power *= t;
        }
        squares.push_back(inner * inner);
      }
      S sum = squares[0];
      for (size_t i = 1; i < squares.size(); i++) sum = sum + squares[i];
      return sum / 2.0;
    }
  };
  template <ScalarBackend B>
  using Run = EvalRun<Llsq, B>;
};

// The first `count` bytes of a text, for lstm's sequence.
inline std::string read_text(const std::string& path, int64_t count) {
  std::ifstream f(path, std::ios::binary);
  std::string text(size_t(count), '\0');
  if (!f.read(text.data(), count))
    throw std::runtime_error("lstm: " + path + " holds fewer than " + std::to_string(count) +
                             " bytes");
  return text;
}

// ADBench's D-LSTM: 2 layers (GradBench's smallest default) of diagonal LSTM cells over a character
// sequence, each character its bits (b of them, enough for the largest byte), the loss the mean
// log-likelihood of the next character's bits. GradBench's `lstm`; its gradient is of main_params
// then extra_params, each row after row.
struct Lstm {
  static constexpr std::string_view name = "lstm";
  static constexpr std::string_view family = "GradBench evals";
  static constexpr std::string_view times =
      "GradBench's lstm jacobian: 2 diagonal LSTM layers over `chars` characters of the corpus, "
      "backward, read every parameter's gradient";
  static constexpr Sizes sizes{"chars", {1024, 4096}, 2, 900'000};  // the corpus has 985k bytes
  static constexpr Tolerance tolerance = kEvalTolerance;
  static constexpr int num_grads = kGradsPerSize;
  static constexpr KnownAnswer known = no_known_answer;
  static constexpr int32_t kLayers = 2;

  struct Input {
    int32_t layers, chars, bits;
    std::vector<double> main_params;   // (2 layers, 4 bits): weights then biases of each layer
    std::vector<double> extra_params;  // (3, bits): input weight, output weight, output bias
    std::vector<double> state;         // (2 layers, bits): hidden then cell of each layer
    std::vector<double> sequence;      // (chars, bits)
  };
  // The first `chars` bytes of our corpus (workloads/data.h), whatever --data says.
  static Input input(int64_t chars) {
    const std::string text = read_text(kDefaultCorpus, chars);
    int largest = 1;
    for (char ch : text) largest = std::max(largest, int(uint8_t(ch)));
    const int32_t bits = int32_t(std::ceil(std::log2(double(largest))));
    Input in{kLayers, int32_t(chars), bits, {}, {}, {}, {}};
    SplitMix64 rng{kEvalSeed + 2};
    in.main_params = uniform_doubles(rng, size_t(2 * kLayers * 4 * bits));
    in.extra_params = uniform_doubles(rng, size_t(3 * bits));
    in.state = uniform_doubles(rng, size_t(2 * kLayers * bits));
    for (char ch : text)  // the bits of each byte, the most significant first
      for (int32_t k = bits - 1; k >= 0; k--) in.sequence.push_back(double((uint8_t(ch) >> k) & 1));
    return in;
  }

  template <ScalarBackend B>
  struct Graph {
    using S = typename B::Scalar;
    std::vector<S> params;  // main_params, then extra_params
    int32_t layers, chars, bits;
    std::vector<double> state, sequence;

    Graph(B& be, const Input& in)
        : layers(in.layers),
          chars(in.chars),
          bits(in.bits),
          state(in.state),
          sequence(in.sequence) {
      const size_t b = size_t(bits);
      if (layers < 1 || bits < 1 || chars < 2 || in.main_params.size() != 8 * layers * b ||
          in.extra_params.size() != 3 * b || in.state.size() != 2 * layers * b ||
          in.sequence.size() != size_t(chars) * b)
        throw std::invalid_argument(
            "lstm: inconsistent sizes: main_params " + std::to_string(in.main_params.size()) +
            ", extra_params " + std::to_string(in.extra_params.size()) + ", state " +
            std::to_string(in.state.size()) + ", sequence " + std::to_string(in.sequence.size()) +
            " for " + std::to_string(layers) + " layers of " + std::to_string(bits) + " and " +
            std::to_string(chars) + " characters");
      params = params_of(be, in.main_params);
      for (double v : in.extra_params) params.push_back(be.param(v));
    }

    static S sigmoid(B& be, const S& x) { return 1.0 / (1.0 + be.exp(-x)); }
    // One layer's cells: hidden and cell (a double before the first character) to new ones.
    template <class H, class C>
    void cells(B& be, const S* weight, const std::vector<S>& input, const H* hidden, const C* cell,
               std::vector<S>& new_hidden, std::vector<S>& new_cell) const {
      const S* bias = weight + 4 * bits;
      for (int32_t i = 0; i < bits; i++) {
        const S forget = sigmoid(be, input[i] * weight[i] + bias[i]);
        const S ingate = sigmoid(be, hidden[i] * weight[bits + i] + bias[bits + i]);
        const S outgate = sigmoid(be, input[i] * weight[2 * bits + i] + bias[2 * bits + i]);
        const S change = be.tanh(hidden[i] * weight[3 * bits + i] + bias[3 * bits + i]);
        new_cell[i] = cell[i] * forget + ingate * change;
        new_hidden[i] = outgate * be.tanh(new_cell[i]);
      }
    }

    S objective(B& be) const {
      const size_t b = size_t(bits);
      const S* extra = params.data() + 8 * layers * b;  // in_weight, out_weight, out_bias
      std::vector<std::vector<S>> hidden(layers, std::vector<S>(b, extra[0])),
          cell = hidden;  // filled at the first character (S has no default on every backend)
      std::vector<S> ypred(b, extra[0]);
      S total = extra[0];
      for (int32_t t = 0; t + 1 < chars; t++) {
        const double* x = &sequence[size_t(t) * b];
        for (size_t i = 0; i < b; i++) ypred[i] = x[i] * extra[i];
        for (int32_t l = 0; l < layers; l++) {
          const S* weight = params.data() + 8 * b * l;
          const std::vector<S>& in = l == 0 ? ypred : hidden[l - 1];
          if (t == 0)
            cells(be, weight, in, &state[2 * b * l], &state[2 * b * l + b], hidden[l], cell[l]);
          else
            cells(be, weight, in, hidden[l].data(), cell[l].data(), hidden[l], cell[l]);
        }
        for (size_t i = 0; i < b; i++)
          ypred[i] = hidden[layers - 1][i] * extra[b + i] + extra[2 * b + i];
        S sum = be.exp(ypred[0]);
        for (size_t i = 1; i < b; i++) sum = sum + be.exp(ypred[i]);
        const S lse = be.log(sum + 2.0);
        const double* gold = &sequence[size_t(t + 1) * b];
        for (size_t i = 0; i < b; i++) {
          const S term = gold[i] * (ypred[i] - lse);
          total = t == 0 && i == 0 ? term : total + term;
        }
      }
      return -total / double(int64_t(chars - 1) * bits);
    }
  };
  template <ScalarBackend B>
  using Run = EvalRun<Lstm, B>;
};

// An ODE solved with s = 10 steps of Runge-Kutta 4 from y = 0 to t = 2: y_0' = x_0,
// y_i' = x_i y_(i-1) (cmpad's an_ode, by way of GradBench's `ode`); the gradient is of the last
// element of y with respect to every x_i.
struct Ode {
  static constexpr std::string_view name = "ode";
  static constexpr std::string_view family = "GradBench evals";
  static constexpr std::string_view times =
      "GradBench's ode gradient: 10 Runge-Kutta steps of n equations, backward, read all n "
      "gradients of the last y";
  static constexpr Sizes sizes{"equations", {100, 1000}, 1, 10'000'000};
  static constexpr Tolerance tolerance = kEvalTolerance;
  static constexpr int num_grads = kGradsPerSize;
  static constexpr KnownAnswer known = no_known_answer;
  static constexpr int64_t kSteps = 10;  // GradBench's middle default of s

  struct Input {
    std::vector<double> x;
    int64_t s;
  };
  static Input input(int64_t n) {
    SplitMix64 rng{kEvalSeed + 4};
    return {uniform_doubles(rng, size_t(n)), kSteps};
  }
  template <ScalarBackend B>
  struct Graph {
    using S = typename B::Scalar;
    std::vector<S> params;  // x
    int64_t s;
    Graph(B& be, const Input& in) : params(params_of(be, in.x)), s(in.s) {
      if (in.x.empty() || in.s < 1)
        throw std::invalid_argument("ode: needs x of at least 1 and s of at least 1, got " +
                                    std::to_string(in.x.size()) + " and " + std::to_string(in.s));
    }
    // z_0 = x_0, z_i = x_i y_(i-1); y a double (the start, 0) or a value.
    template <class Y>
    std::vector<S> derivative(const std::vector<Y>& y) const {
      std::vector<S> z{params[0]};
      for (size_t i = 1; i < params.size(); i++) z.push_back(params[i] * y[i - 1]);
      return z;
    }
    // One Runge-Kutta step from y.
    template <class Y>
    std::vector<S> step(const std::vector<Y>& y, double h) const {
      const size_t n = params.size();
      auto ahead = [&](const std::vector<S>& k, bool half) {
        std::vector<S> out;
        for (size_t i = 0; i < n; i++) out.push_back(y[i] + (half ? h * k[i] / 2.0 : h * k[i]));
        return out;
      };
      const std::vector<S> k1 = derivative(y);
      const std::vector<S> k2 = derivative(ahead(k1, true));
      const std::vector<S> k3 = derivative(ahead(k2, true));
      const std::vector<S> k4 = derivative(ahead(k3, false));
      std::vector<S> out;
      for (size_t i = 0; i < n; i++)
        out.push_back(y[i] + h * (k1[i] + 2.0 * k2[i] + 2.0 * k3[i] + k4[i]) / 6.0);
      return out;
    }
    // y at t = 2 (GradBench's primal); the objective is its last element.
    std::vector<S> solve() const {
      const double h = 2.0 / double(s);
      std::vector<S> y = step(std::vector<double>(params.size(), 0.0), h);
      for (int64_t i = 1; i < s; i++) y = step(y, h);
      return y;
    }
    S objective(B&) const { return solve().back(); }
  };
  template <ScalarBackend B>
  using Run = EvalRun<Ode, B>;
};

// The determinant of an ell x ell matrix by expansion in minors (cmpad's det_of_minor, by way
// of GradBench's `det`): ell! products, a tape of 10^7 nodes at ell = 10. The gradient is of
// every element of A.
struct Det {
  static constexpr std::string_view name = "det";
  static constexpr std::string_view family = "GradBench evals";
  static constexpr std::string_view times =
      "GradBench's det gradient: the determinant of an ell x ell matrix by minors, backward, read "
      "all ell^2 gradients";
  static constexpr Sizes sizes{"ell", {7, 9}, 1, 12};
  static constexpr Tolerance tolerance = kEvalTolerance;
  static constexpr int num_grads = kGradsPerSize;
  static constexpr KnownAnswer known = no_known_answer;

  struct Input {
    std::vector<double> a;  // row-major
    int64_t ell;
  };
  static Input input(int64_t ell) {
    SplitMix64 rng{kEvalSeed + 5};
    return {uniform_doubles(rng, size_t(ell * ell)), ell};
  }
  template <ScalarBackend B>
  struct Graph {
    using S = typename B::Scalar;
    std::vector<S> params;  // A
    int64_t ell;
    Graph(B& be, const Input& in) : params(params_of(be, in.a)), ell(in.ell) {
      if (in.ell < 1 || in.a.size() != size_t(in.ell * in.ell))
        throw std::invalid_argument(
            "det: A has " + std::to_string(in.a.size()) +
            " elements, expected ell^2 for ell = " + std::to_string(in.ell) + " (at least 1)");
    }
    // The determinant of the m x m minor that r and c describe: r[i] is the row after row i,
    // r[ell] the first (columns alike); each minor removes its first row and, in turn, each
    // column, by relinking, and puts them back.
    S minor(std::vector<size_t>& r, std::vector<size_t>& c, size_t m) const {
      const size_t n = size_t(ell), r0 = r[n];
      size_t cj = c[n];
      if (m == 1) return params[r0 * n + cj];
      r[n] = r[r0];
      size_t previous = n;
      S det = params[0];  // replaced by the first term
      for (size_t j = 0; j < m; j++) {
        const S& m0j = params[r0 * n + cj];
        c[previous] = c[cj];
        const S sub = minor(r, c, m - 1);
        c[previous] = cj;
        det = j == 0 ? m0j * sub : j % 2 ? det - m0j * sub : det + m0j * sub;
        previous = cj;
        cj = c[cj];
      }
      r[n] = r0;
      return det;
    }
    S objective(B&) const {
      std::vector<size_t> r(size_t(ell) + 1), c(size_t(ell) + 1);
      for (size_t i = 0; i < size_t(ell); i++) r[i] = c[i] = i + 1;
      r[size_t(ell)] = c[size_t(ell)] = 0;
      return minor(r, c, size_t(ell));
    }
  };
  template <ScalarBackend B>
  using Run = EvalRun<Det, B>;
};

// gmm's input, whatever its d (GradBench's gmm sends d with it).
struct GmmInput {
  int32_t d, k, n;
  std::vector<double> alpha, mu, q, l, x;  // (k), (k, d), (k, d), (k, d(d-1)/2), (n, d)
  int32_t m;
  double gamma;
};

// The Wishart prior's constant term of one component: log of the multivariate gamma function
// Gamma_d(wn / 2) taken from wn d (log(gamma) - log(2) / 2), wn = d + m + 1.
inline double gmm_wishart_constant(int32_t d, int32_t m, double gamma) {
  const int32_t wn = d + m + 1;
  double log_gamma_d = 0.25 * d * (d - 1) * std::log(M_PI);
  for (int32_t j = 1; j <= d; j++)
    log_gamma_d = log_gamma_d + std::lgamma(0.5 * wn + 0.5 * (1 - j));
  return wn * d * (std::log(gamma) - 0.5 * std::log(2)) - log_gamma_d;
}

// A Gaussian mixture's log-likelihood with a Wishart prior (ADBench's GMM), k components of
// dimension d over n = 1000 points, m = 0, gamma = 1 (GradBench's defaults). GradBench's `gmm`;
// its gradient is of alpha, mu, q and l (in its JSON, an object of those four; here in that
// order, flat).
template <int D>
struct GmmEval {
  static constexpr std::string_view name = D == 2 ? "gmm_d2" : D == 10 ? "gmm_d10" : "gmm";
  static constexpr std::string_view family = "GradBench evals";
  static constexpr std::string_view times =
      "GradBench's gmm jacobian: k Gaussians in d dimensions over 1000 points, backward, read the "
      "gradients of alpha, mu, q and l";
  static constexpr Sizes sizes{"k", {5, 25}, 1, 10'000};
  static constexpr Tolerance tolerance = kEvalTolerance;
  static constexpr int num_grads = kGradsPerSize;
  static constexpr KnownAnswer known = no_known_answer;
  static constexpr int64_t kPoints = 1000;

  using Input = GmmInput;
  static Input input(int64_t k) {
    SplitMix64 rng{kEvalSeed + 3};
    Input in{D, int32_t(k), int32_t(kPoints), {}, {}, {}, {}, {}, 0, 1.0};
    in.x = normal_doubles(rng, size_t(kPoints * D));
    in.alpha = normal_doubles(rng, size_t(k));
    in.mu = uniform_doubles(rng, size_t(k * D));
    in.q = normal_doubles(rng, size_t(k * D));
    in.l = normal_doubles(rng, size_t(k * D * (D - 1) / 2));
    return in;
  }

  template <ScalarBackend B>
  struct Graph {
    using S = typename B::Scalar;
    std::vector<S> params;  // alpha, mu, q, l
    int32_t d, k, n, m;
    double gamma;
    std::vector<double> x;

    Graph(B& be, const Input& in) : d(in.d), k(in.k), n(in.n), m(in.m), gamma(in.gamma), x(in.x) {
      const size_t dk = size_t(d) * k, lk = size_t(d) * (d - 1) / 2 * k;
      if (d < 2 || k < 1 || n < 1 || in.alpha.size() != size_t(k) || in.mu.size() != dk ||
          in.q.size() != dk || in.l.size() != lk || in.x.size() != size_t(n) * d)
        throw std::invalid_argument(
            "gmm: inconsistent sizes: alpha " + std::to_string(in.alpha.size()) + ", mu " +
            std::to_string(in.mu.size()) + ", q " + std::to_string(in.q.size()) + ", l " +
            std::to_string(in.l.size()) + ", x " + std::to_string(in.x.size()) +
            " for d=" + std::to_string(d) + " (at least 2), k=" + std::to_string(k) +
            ", n=" + std::to_string(n));
      for (const auto* part : {&in.alpha, &in.mu, &in.q, &in.l})
        for (double v : *part) params.push_back(be.param(v));
    }

    static S sqnorm(std::span<const S> v) {
      S sum = v[0] * v[0];
      for (size_t i = 1; i < v.size(); i++) sum = sum + v[i] * v[i];
      return sum;
    }
    // log(sum(exp(v))), steadied by max(v) read as a number.
    static S logsumexp(B& be, std::span<const S> v) {
      double most = be.value(v[0]);
      for (const S& e : v) most = std::max(most, double(be.value(e)));
      S sum = be.exp(v[0] - most);
      for (size_t i = 1; i < v.size(); i++) sum = sum + be.exp(v[i] - most);
      return be.log(sum) + most;
    }
    S objective(B& be) const {
      const size_t lsz = size_t(d) * (d - 1) / 2;
      const S* alpha = params.data();
      const S* mu = alpha + k;
      const S* q = mu + size_t(d) * k;
      const S* l = q + size_t(d) * k;
      std::vector<S> qdiags, sum_qs;
      for (size_t i = 0; i < size_t(d) * k; i++) qdiags.push_back(be.exp(q[i]));
      for (int32_t c = 0; c < k; c++) {
        S s = q[size_t(c) * d];
        for (int32_t j = 1; j < d; j++) s = s + q[size_t(c) * d + j];
        sum_qs.push_back(s);
      }
      std::vector<S> centered, qx, main_term;
      S slse = alpha[0];  // replaced by the first point's term
      for (int32_t p = 0; p < n; p++) {
        main_term.clear();
        for (int32_t c = 0; c < k; c++) {
          centered.clear(), qx.clear();
          for (int32_t j = 0; j < d; j++)
            centered.push_back(x[size_t(p) * d + j] - mu[size_t(c) * d + j]);
          for (int32_t j = 0; j < d; j++) qx.push_back(qdiags[size_t(c) * d + j] * centered[j]);
          const S* lower = l + size_t(c) * lsz;  // Q's strictly lower part, column after column
          for (int32_t i = 0, at = 0; i < d; i++)
            for (int32_t j = i + 1; j < d; j++) qx[j] = qx[j] + lower[at++] * centered[i];
          main_term.push_back(alpha[c] + sum_qs[c] - 0.5 * sqnorm(qx));
        }
        const S lsum = logsumexp(be, main_term);
        slse = p == 0 ? lsum : slse + lsum;
      }
      const S lse_alpha = logsumexp(be, std::span<const S>(alpha, size_t(k)));
      const double constant = -n * d * 0.5 * std::log(2 * M_PI);
      const S err = constant + slse - double(n) * lse_alpha;

      const double wc = gmm_wishart_constant(d, m, gamma);
      S prior = alpha[0];  // replaced by the first component's term
      for (int32_t c = 0; c < k; c++) {
        const S frobenius = sqnorm(std::span<const S>(&qdiags[size_t(c) * d], size_t(d))) +
                            sqnorm(std::span<const S>(l + size_t(c) * lsz, lsz));
        const S term = 0.5 * gamma * gamma * frobenius - double(m) * sum_qs[c];
        prior = c == 0 ? term : prior + term;
      }
      return err + (-prior + k * wc);
    }
  };
  template <ScalarBackend B>
  using Run = EvalRun<GmmEval, B>;
};
using GmmD2 = GmmEval<2>;
using GmmD10 = GmmEval<10>;

}  // namespace bp
