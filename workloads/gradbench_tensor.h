// workloads/gradbench_tensor.h: GradBench's lstm and gmm as tensor code, each written once for
// every TensorBackend: the same function as workloads/gradbench.h's scalar graph, on the same
// inputs (in the backend's Real: exact on a double backend, rounded on a float32 one), the way a
// tensor framework's user writes it.
//
// lstm_tensor: a (1, bits) row per character and layer, elementwise ops as GradBench's PyTorch
// tool writes them. gmm_*_tensor: every point against every component at once, as products:
// each component's Q (d, d) stacked into W (k*d, d), so that Q_c (x_p - mu_c) for all p and c is
// one linear, X W^T - (Q_c mu_c), of (n, k*d); the squared norms are the row sums of the squares
// viewed (n*k, d), and the log-sum-exp over components is one op per row.
// Slices of a parameter (an LSTM gate's weights, Q's diagonal and lower part) are an embedding of
// its elements (`gather`), which also carries their gradients back.
//
// The timed step is GradBench's gradient: zero_grad, forward, backward, read the loss; no update.
// The gradients are the parameters' own, in GradBench's order when read row after row
// (main_params then extra_params; alpha, mu, q, l). workloads/workloads_test.cc runs both forms in
// double on the same inputs and compares every gradient.
#pragma once

#include <cmath>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "workloads/backend.h"
#include "workloads/gradbench.h"
#include "workloads/models.h"
#include "workloads/workload.h"

namespace bp {

// One gradient of the eval's tensor form: no optimizer step, the same loss every step.
template <TensorBackend B, class Model>
struct GradientRun : Model {
  using Model::Model;
  size_t next_batch = 0;  // one input: every step is the same
  double forward_backward(B& be, size_t) {
    auto loss = this->loss(be, 0);
    be.backward(loss);
    return be.loss_value(loss);
  }
  double step(B& be) {
    be.zero_grad();
    const double value = forward_backward(be, 0);
    be.end_step();
    return value;
  }
};

// Elements `index` of x (of `numel` elements, row-major) as a (rows, cols) tensor.
template <TensorBackend B>
typename B::Tensor gather(B& be, const typename B::Tensor& x, int32_t numel,
                          const typename B::Indices& index, int32_t rows, int32_t cols) {
  return be.view(be.embedding(be.view(x, numel, 1), index), rows, cols);
}

// GradBench's lstm (workloads/gradbench.h, Lstm) on rows of `bits`.
struct LstmTensor {
  static constexpr std::string_view name = "lstm_tensor";
  static constexpr std::string_view family = "GradBench evals";
  static constexpr std::string_view times =
      "GradBench's lstm jacobian as tensor code: 2 diagonal LSTM layers over `chars` characters "
      "of the corpus, a (1, bits) row per op, backward";
  // Shorter than Lstm's defaults: the torch backends take a quarter of a second a step at 1024
  // characters (the study gradbench_tensor sweeps 1024 to 8192).
  static constexpr Sizes sizes{"chars", {256, 1024}, 2, 900'000};
  static constexpr std::string_view phase = "grad";
  static constexpr Tolerance tolerance = kModelTolerance;  // float32, summed in other orders
  static constexpr int check_steps = 2;
  static constexpr CorpusUse corpus = no_corpus;  // inputs of its own (lstm: our corpus, as Lstm)

  template <TensorBackend B>
  struct Model : ParamList<B> {
    using Tn = typename B::Tensor;
    using R = typename B::Real;
    int32_t layers, chars, bits;
    Tn main, extra;                           // (2 layers, 4 bits), (3, bits)
    std::vector<typename B::Indices> slices;  // main's 8 per layer (weights, biases), extra's 3
    std::vector<Tn> hidden0, cell0;           // per layer, (1, bits)
    std::vector<Tn> bits_of;                  // per character, (1, bits)
    std::vector<Tn> minus_ones;               // per character, (1, 1): -(how many bits are 1)
    Tn two, scale;                            // (1, 1): 2, -1 / ((chars - 1) bits)

    Model(B& be, int64_t size, const Corpus&) : Model(be, Lstm::input(size)) {}
    Model(B& be, const Lstm::Input& in) {  // GradBench's own (harness/gradbench/)
      layers = in.layers, chars = in.chars, bits = in.bits;
      const int32_t b = bits;
      main = this->make(be, 2 * layers, 4 * b, in.main_params);
      extra = this->make(be, 3, b, in.extra_params);
      for (int32_t row = 0; row < 2 * layers; row++)
        for (int32_t gate = 0; gate < 4; gate++)
          slices.push_back(be.indices(range(row * 4 * b + gate * b, b)));
      for (int32_t row = 0; row < 3; row++) slices.push_back(be.indices(range(row * b, b)));
      for (int32_t l = 0; l < layers; l++) {
        const double* state = &in.state[size_t(2 * l * b)];
        hidden0.push_back(be.constant(1, b, as_reals<B>(std::span(state, size_t(b)))));
        cell0.push_back(be.constant(1, b, as_reals<B>(std::span(state + b, size_t(b)))));
      }
      for (int32_t t = 0; t < chars; t++) {
        const std::span<const double> x(&in.sequence[size_t(t) * b], size_t(b));
        bits_of.push_back(be.constant(1, b, as_reals<B>(x)));
        R ones = 0;
        for (double v : x) ones += R(v);
        minus_ones.push_back(be.constant(1, 1, std::vector<R>{-ones}));
      }
      two = be.constant(1, 1, std::vector<R>{2});
      scale = be.constant(1, 1, std::vector<R>{R(-1.0 / (double(chars - 1) * b))});
      be.use_sgd(0);  // zero_grad needs an optimizer on some backends; no step takes it
    }
    static std::vector<int32_t> range(int32_t from, int32_t n) {
      std::vector<int32_t> v(static_cast<size_t>(n));
      for (int32_t i = 0; i < n; i++) v[size_t(i)] = from + i;
      return v;
    }

    Tn loss(B& be, size_t) {
      const int32_t b = bits;
      std::vector<Tn> part;  // main's slices (layer, weights or biases, gate), then extra's rows
      for (size_t s = 0; s < slices.size(); s++)
        part.push_back(s < size_t(8 * layers) ? gather(be, main, 8 * layers * b, slices[s], 1, b)
                                              : gather(be, extra, 3 * b, slices[s], 1, b));
      const Tn &in_weight = part[size_t(8 * layers)], &out_weight = part[size_t(8 * layers) + 1],
               &out_bias = part[size_t(8 * layers) + 2];
      std::vector<Tn> hidden = hidden0, cell = cell0;
      Tn total;
      for (int32_t t = 0; t + 1 < chars; t++) {
        Tn x = be.mul(bits_of[size_t(t)], in_weight);
        for (int32_t l = 0; l < layers; l++) {
          const Tn* w = &part[size_t(8 * l)];  // weights of the 4 gates, then their biases
          const Tn& input = l == 0 ? x : hidden[size_t(l - 1)];
          const Tn forget = be.sigmoid(be.add(be.mul(input, w[0]), w[4]));
          const Tn ingate = be.sigmoid(be.add(be.mul(hidden[size_t(l)], w[1]), w[5]));
          const Tn outgate = be.sigmoid(be.add(be.mul(input, w[2]), w[6]));
          const Tn change = be.tanh(be.add(be.mul(hidden[size_t(l)], w[3]), w[7]));
          cell[size_t(l)] = be.add(be.mul(cell[size_t(l)], forget), be.mul(ingate, change));
          hidden[size_t(l)] = be.mul(outgate, be.tanh(cell[size_t(l)]));
        }
        const Tn ypred = be.add(be.mul(hidden[size_t(layers - 1)], out_weight), out_bias);
        const Tn lse = be.log(be.add(be.sum(be.exp(ypred)), two));
        // sum(gold * (ypred - lse)) = sum(gold * ypred) - lse * (how many bits of gold are 1)
        const Tn term = be.add(be.sum(be.mul(ypred, bits_of[size_t(t + 1)])),
                               be.mul(lse, minus_ones[size_t(t + 1)]));
        total = t == 0 ? term : be.add(total, term);
      }
      return be.mul(total, scale);
    }
  };
  template <TensorBackend B>
  using Run = GradientRun<B, Model<B>>;
};

// GradBench's gmm (workloads/gradbench.h, GmmEval) as products over every point and component.
template <int D>
struct GmmTensor {
  static constexpr std::string_view name = D == 2 ? "gmm_d2_tensor" : "gmm_d10_tensor";
  static constexpr std::string_view family = "GradBench evals";
  static constexpr std::string_view times =
      "GradBench's gmm jacobian as tensor code: k Gaussians in d dimensions over 1000 points, "
      "every point against every component as one product, backward";
  static constexpr Sizes sizes = GmmEval<D>::sizes;
  static constexpr std::string_view phase = "grad";
  static constexpr Tolerance tolerance = kModelTolerance;  // float32, summed in other orders
  static constexpr int check_steps = 2;
  static constexpr CorpusUse corpus = no_corpus;  // inputs of its own (GmmEval<D>::input)

  template <TensorBackend B>
  struct Model : ParamList<B> {
    using Tn = typename B::Tensor;
    using R = typename B::Real;
    int32_t d, k, n, lsz;
    Tn alpha, mu, q, l;  // (1, k), (k, d), (k, d), (k, d(d-1)/2)
    Tn x;                // (n, d)
    // Q's diagonal and strictly lower part, and each row's mean, gathered into (k*d, d); the
    // masks zero what a gather of the diagonal or lower part puts elsewhere.
    typename B::Indices diagonal_index, lower_index, mean_index;
    Tn diagonal_mask, lower_mask, minus_ones, minus_halves, minus_n, prior_scale, minus_m,
        minus_one, constant_terms;

    Model(B& be, int64_t size, const Corpus&) : Model(be, GmmEval<D>::input(size)) {}
    Model(B& be, const GmmInput& in) {  // GradBench's own, of any d (harness/gradbench/)
      d = in.d, k = in.k, n = in.n, lsz = d * (d - 1) / 2;
      alpha = this->make(be, 1, k, in.alpha);
      mu = this->make(be, k, d, in.mu);
      q = this->make(be, k, d, in.q);
      l = this->make(be, k, lsz, in.l);
      x = be.constant(n, d, as_reals<B>(in.x));
      const size_t kdd = size_t(k) * d * d;
      std::vector<int32_t> diagonal(kdd), lower(kdd), mean(kdd);
      std::vector<R> is_diagonal(kdd), is_lower(kdd);
      for (int32_t c = 0; c < k; c++)  // row c*d + j of W is row j of Q_c
        for (int32_t j = 0; j < d; j++)
          for (int32_t i = 0; i < d; i++) {
            const size_t at = (size_t(c) * d + j) * d + i;
            diagonal[at] = c * d + j;
            is_diagonal[at] = i == j;
            // l lists Q's lower part column after column: (j, i), i < j, at i(2d - i - 1)/2 + j-i-1
            lower[at] = i < j ? c * lsz + i * (2 * d - i - 1) / 2 + (j - i - 1) : 0;
            is_lower[at] = i < j;
            mean[at] = c * d + i;
          }
      diagonal_index = be.indices(diagonal), lower_index = be.indices(lower);
      mean_index = be.indices(mean);
      diagonal_mask = be.constant(k * d, d, is_diagonal);
      lower_mask = be.constant(k * d, d, is_lower);
      minus_ones = be.constant(1, k * d, std::vector<R>(size_t(k) * d, -1));
      minus_halves = be.constant(1, k, std::vector<R>(size_t(k), R(-0.5)));
      minus_n = be.constant(1, 1, std::vector<R>{R(-n)});
      prior_scale = be.constant(1, 1, std::vector<R>{R(0.5 * in.gamma * in.gamma)});
      minus_m = be.constant(1, 1, std::vector<R>{R(-in.m)});
      minus_one = be.constant(1, 1, std::vector<R>{-1});
      const double constant =
          -n * d * 0.5 * std::log(2 * M_PI) + k * gmm_wishart_constant(d, in.m, in.gamma);
      constant_terms = be.constant(1, 1, std::vector<R>{R(constant)});
      be.use_sgd(0);  // zero_grad needs an optimizer on some backends; no step takes it
    }

    Tn loss(B& be, size_t) {
      const int32_t kd = k * d;
      const Tn qdiag = be.exp(q);  // (k, d)
      const Tn w = be.add(be.mul(gather(be, qdiag, kd, diagonal_index, kd, d), diagonal_mask),
                          be.mul(gather(be, l, k * lsz, lower_index, kd, d), lower_mask));
      const Tn q_mu = be.sum_rows(be.mul(w, gather(be, mu, kd, mean_index, kd, d)));  // (kd, 1)
      const Tn centered = be.linear(x, w, be.mul(be.view(q_mu, 1, kd), minus_ones));  // (n, kd)
      const Tn sqnorms = be.view(be.sum_rows(be.view(be.mul(centered, centered), n * k, d)), n, k);
      const Tn sum_qs = be.view(be.sum_rows(q), 1, k);
      const Tn main_term = be.add(be.mul(sqnorms, minus_halves), be.add(alpha, sum_qs));  // (n, k)
      const Tn err = be.add(be.sum(be.logsumexp(main_term)), be.mul(be.logsumexp(alpha), minus_n));
      const Tn frobenius = be.add(be.sum(be.mul(qdiag, qdiag)), be.sum(be.mul(l, l)));
      const Tn prior = be.add(be.mul(frobenius, prior_scale), be.mul(be.sum(q), minus_m));
      return be.add(be.add(err, be.mul(prior, minus_one)), constant_terms);
    }
  };
  template <TensorBackend B>
  using Run = GradientRun<B, Model<B>>;
};
using GmmD2Tensor = GmmTensor<2>;
using GmmD10Tensor = GmmTensor<10>;

}  // namespace bp
