// libtorch_tensor.cc: GradBench's lstm and gmm as tensor code on libtorch, written as GradBench's
// PyTorch tool writes them (ADBench's PyTorch versions: lstm a loop over characters of small
// vector ops, gmm a handful of batched ops over every point and component), in double, on our
// seeded inputs (workloads/gradbench.h). For each size: the median time of a gradient (forward,
// backward, gradients read and set to none) over `runs` runs, and its largest difference from our
// engine's gradient of the same input: the same work, so that the bench's rows (the scalar graphs
// in double, the tensor forms of workloads/gradbench_tensor.h in float32) can be weighed against
// the tensor code a GradBench user runs (dev/notes.md, "GradBench's evals", "Tensor forms").
//   build/dev/gradbench_libtorch_tensor [runs]      (cmake -DBP_DEV=ON; make test builds it)
#include <torch/autograd.h>
#include <torch/types.h>
#include <torch/utils.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "engine/backend.h"
#include "workloads/gradbench.h"

namespace {

torch::Tensor tensor_of(const std::vector<double>& v, std::vector<int64_t> shape, bool grad) {
  auto t = torch::from_blob(const_cast<double*>(v.data()), shape, torch::kFloat64).clone();
  return grad ? t.requires_grad_(true) : t;
}

// ADBench's PyTorch lstm: gates of a layer in one op over 4b, the state cloned per character.
torch::Tensor lstm_objective(const torch::Tensor& main, const torch::Tensor& extra,
                             const torch::Tensor& state0, const torch::Tensor& sequence) {
  const int64_t b = sequence.size(1), chars = sequence.size(0), layers = main.size(0) / 2;
  std::vector<torch::Tensor> state;
  for (int64_t i = 0; i < 2 * layers; i++) state.push_back(state0[i]);
  torch::Tensor total = torch::zeros({}, torch::kFloat64);
  for (int64_t t = 0; t + 1 < chars; t++) {
    torch::Tensor x = sequence[t] * extra[0];
    for (int64_t l = 0; l < layers; l++) {
      const torch::Tensor &hidden = state[2 * l], &cell = state[2 * l + 1];
      const torch::Tensor gates =
          torch::cat({x, hidden, x, hidden}) * main[2 * l] + main[2 * l + 1];
      const torch::Tensor forget = torch::sigmoid(gates.slice(0, 0, b));
      const torch::Tensor ingate = torch::sigmoid(gates.slice(0, b, 2 * b));
      const torch::Tensor outgate = torch::sigmoid(gates.slice(0, 2 * b, 3 * b));
      const torch::Tensor change = torch::tanh(gates.slice(0, 3 * b, 4 * b));
      state[2 * l + 1] = cell * forget + ingate * change;
      state[2 * l] = outgate * torch::tanh(state[2 * l + 1]);
      x = state[2 * l];
    }
    const torch::Tensor ypred = x * extra[1] + extra[2];
    const torch::Tensor ynorm = ypred - torch::log(torch::exp(ypred).sum() + 2);
    total = total + (sequence[t + 1] * ynorm).sum();
  }
  return -total / double((chars - 1) * b);
}

// ADBench's PyTorch gmm: every point against every component at once.
torch::Tensor gmm_objective(const torch::Tensor& alpha, const torch::Tensor& mu,
                            const torch::Tensor& q, const torch::Tensor& l, const torch::Tensor& x,
                            const torch::Tensor& lower_rows, const torch::Tensor& lower_cols,
                            double gamma, int64_t m) {
  const int64_t n = x.size(0), d = x.size(1), k = alpha.size(0);
  const torch::Tensor qdiags = torch::exp(q), sum_qs = q.sum(1);
  torch::Tensor ls = torch::zeros({k, d, d}, torch::kFloat64);
  ls.index_put_({torch::indexing::Slice(), lower_rows, lower_cols}, l);  // L[c][j][i]
  const torch::Tensor centered = x.unsqueeze(1) - mu.unsqueeze(0);       // (n, k, d)
  const torch::Tensor qx =
      qdiags.unsqueeze(0) * centered + torch::einsum("kji,nki->nkj", {ls, centered});
  const torch::Tensor main_term = alpha + sum_qs - 0.5 * (qx * qx).sum(2);
  const double constant = -double(n * d) * 0.5 * std::log(2 * M_PI);
  const torch::Tensor err =
      constant + torch::logsumexp(main_term, 1).sum() - double(n) * torch::logsumexp(alpha, 0);
  const int64_t wn = d + m + 1;
  double wc = 0.25 * double(d * (d - 1)) * std::log(M_PI);
  for (int64_t j = 1; j <= d; j++) wc += std::lgamma(0.5 * double(wn) + 0.5 * double(1 - j));
  wc = double(wn * d) * (std::log(gamma) - 0.5 * std::log(2)) - wc;
  const torch::Tensor frobenius = (qdiags * qdiags).sum(1) + (l * l).sum(1);
  const torch::Tensor prior = (0.5 * gamma * gamma * frobenius - double(m) * sum_qs).sum();
  return err + (-prior + double(k) * wc);
}

// The median seconds of `runs` gradients, and the gradient (flat, in GradBench's order).
template <class Fn>
double median_seconds(int runs, Fn&& gradient) {
  std::vector<double> times;
  for (int r = 0; r < runs; r++) {
    const auto start = std::chrono::steady_clock::now();
    gradient();
    times.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

double max_rel_diff(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return INFINITY;
  double worst = 0;
  for (size_t i = 0; i < a.size(); i++)
    worst = std::max(worst, std::fabs(a[i] - b[i]) / std::max(1.0, std::fabs(b[i])));
  return worst;
}
std::vector<double> flat(std::initializer_list<torch::Tensor> grads) {
  std::vector<double> out;
  for (const torch::Tensor& g : grads) {
    const torch::Tensor c = g.contiguous();
    out.insert(out.end(), c.data_ptr<double>(), c.data_ptr<double>() + c.numel());
  }
  return out;
}

void lstm(int runs, int64_t chars) {
  const bp::Lstm::Input in = bp::Lstm::input(chars);
  const int64_t b = in.bits, l = in.layers;
  const torch::Tensor main = tensor_of(in.main_params, {2 * l, 4 * b}, true);
  const torch::Tensor extra = tensor_of(in.extra_params, {3, b}, true);
  const torch::Tensor state = tensor_of(in.state, {2 * l, b}, false);
  const torch::Tensor sequence = tensor_of(in.sequence, {chars, b}, false);
  std::vector<double> g;
  const double s = median_seconds(runs, [&] {
    lstm_objective(main, extra, state, sequence).backward();
    g = flat({main.grad(), extra.grad()});
    main.mutable_grad().reset(), extra.mutable_grad().reset();
  });
  std::printf(
      "lstm     chars %-6lld libtorch tensor code %10.3f ms   max rel diff to engine %.1e\n",
      (long long)chars, s * 1e3,
      max_rel_diff(g, bp::eval_gradient<bp::Lstm, bp::EngineBackend>(chars)));
}

template <class W>
void gmm(int runs, int64_t k) {
  const bp::GmmInput in = W::input(k);
  const int64_t d = in.d;
  const torch::Tensor alpha = tensor_of(in.alpha, {k}, true);
  const torch::Tensor mu = tensor_of(in.mu, {k, d}, true);
  const torch::Tensor q = tensor_of(in.q, {k, d}, true);
  const torch::Tensor l = tensor_of(in.l, {k, d * (d - 1) / 2}, true);
  const torch::Tensor x = tensor_of(in.x, {in.n, d}, false);
  std::vector<int64_t> rows, cols;  // GradBench's order: column i, then rows j > i
  for (int64_t i = 0; i < d; i++)
    for (int64_t j = i + 1; j < d; j++) rows.push_back(j), cols.push_back(i);
  const torch::Tensor lower_rows = torch::tensor(rows), lower_cols = torch::tensor(cols);
  std::vector<double> g;
  const double s = median_seconds(runs, [&] {
    gmm_objective(alpha, mu, q, l, x, lower_rows, lower_cols, in.gamma, in.m).backward();
    g = flat({alpha.grad(), mu.grad(), q.grad(), l.grad()});
    for (const torch::Tensor* p : {&alpha, &mu, &q, &l}) p->mutable_grad().reset();
  });
  std::printf("%-8s k %-10lld libtorch tensor code %10.3f ms   max rel diff to engine %.1e\n",
              std::string(W::name).c_str(), (long long)k, s * 1e3,
              max_rel_diff(g, bp::eval_gradient<W, bp::EngineBackend>(k)));
}

}  // namespace

int main(int argc, char** argv) {
  const int runs = argc > 1 ? std::max(1, std::atoi(argv[1])) : 11;
  torch::set_num_threads(1);
  for (int64_t chars : {1024, 4096, 8192}) lstm(runs, chars);
  for (int64_t k : {5, 10, 25, 50, 100}) gmm<bp::GmmD2>(runs, k);
  for (int64_t k : {5, 10, 25, 50, 100}) gmm<bp::GmmD10>(runs, k);
  return 0;
}
