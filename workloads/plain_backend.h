// workloads/plain_backend.h: a ScalarBackend with no autodiff: every Scalar is a plain double.
//
// The floor of CppAD's speed suite and our finite-difference oracle: tests evaluate a workload
// here with one parameter nudged by +-h to get d(out)/d(param) with no autodiff involved.
// Not a benchmark backend: it has no gradients (grad() returns NaN so that no one mistakes it).
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <string_view>
#include <vector>

#include "workloads/backend.h"

namespace bp {

struct PlainBackend {
  static constexpr std::string_view name = "plain";
  static constexpr Implements implements = Implements::scalar_graphs;
  using Scalar = double;

  int64_t nudged_param = -1;  // which param() call gets `nudge` added, -1 for none
  double nudge = 0.0;
  int64_t params_made = 0;

  Scalar param(double v) { return params_made++ == nudged_param ? v + nudge : v; }
  Scalar pow(Scalar x, double k) { return std::pow(x, k); }
  Scalar relu(Scalar x) { return x > 0 ? x : 0.0; }
  Scalar tanh(Scalar x) { return std::tanh(x); }
  Scalar exp(Scalar x) { return std::exp(x); }
  Scalar log(Scalar x) { return std::log(x); }
  void backward(Scalar) {}
  double value(Scalar x) const { return x; }
  double grad(Scalar) const { return std::numeric_limits<double>::quiet_NaN(); }
  void reset() {}
};

static_assert(ScalarBackend<PlainBackend>);

// d(step value)/d(param i) of workload W at `size` by central differences on PlainBackend.
template <class W>
double finite_difference(int64_t size, int64_t param, double h) {
  double out[2];
  for (int side = 0; side < 2; side++) {
    PlainBackend be;
    be.nudged_param = param;
    be.nudge = side ? -h : h;
    typename W::template Run<PlainBackend> run(be, size);
    auto unused = grads_storage<W>(run);
    out[side] = run.step(be, GradSpan<W>(unused));
  }
  return (out[0] - out[1]) / (2 * h);
}

// Which gradients of a step the check records and compares: all of them up to kCheckedGrads,
// else kCheckedGrads spread evenly from the first to the last. A check that holds every one of a
// GradBench eval's 10^5 gradients would be megabytes per backend; the tests compare them all.
inline constexpr int64_t kCheckedGrads = 32;
inline std::vector<int64_t> checked_grad_indices(int64_t num_grads) {
  std::vector<int64_t> at;
  const int64_t n = std::min(num_grads, kCheckedGrads);
  for (int64_t i = 0; i < n; i++)
    at.push_back(n == num_grads ? i : i * (num_grads - 1) / (kCheckedGrads - 1));
  return at;
}

// A scalar graph's answer computed with no autodiff at all: its value on plain doubles and the
// checked gradients (checked_grad_indices) by central differences. The runner's judge
// (harness/runner/judge.h) holds every backend to it, so that a lone backend, or a majority that
// is wrong together, is still caught.
struct PlainAnswer {
  double value;
  std::vector<double> grads;
  std::vector<int64_t> grad_of;  // which parameter each of `grads` is
};
// Central differences with h = 1e-6 agree with our engine's gradients within 2.5e-9 relative
// on the registry's graphs (workloads_test prints each); a backend gets 400 times that.
inline constexpr double kFiniteDifferenceStep = 1e-6, kFiniteDifferenceTolerance = 1e-6;
// What central differences cannot resolve, allowed on top of the tolerance: each of the two
// evaluations rounds by a few units in the last place of the value (gmm, over sums of 1000: 3.5),
// and their difference is divided by 2h. It matters where values are large (gmm's reach 10^5).
inline double finite_difference_noise(double value, double h = kFiniteDifferenceStep) {
  return 8 * std::numeric_limits<double>::epsilon() * std::fabs(value) / h;
}

template <class W>
PlainAnswer plain_answer(int64_t size) {
  PlainBackend be;
  typename W::template Run<PlainBackend> run(be, size);
  auto unused = grads_storage<W>(run);
  PlainAnswer a{run.step(be, GradSpan<W>(unused)), {}, checked_grad_indices(unused.size())};
  for (int64_t i : a.grad_of)
    a.grads.push_back(finite_difference<W>(size, i, kFiniteDifferenceStep));
  return a;
}

}  // namespace bp
