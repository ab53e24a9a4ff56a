// workloads/plain_backend.h: a ScalarBackend with no autodiff: every Scalar is a plain double.
//
// The floor of CppAD's speed suite and our finite-difference oracle: tests evaluate a workload
// here with one parameter nudged by +-h to get d(out)/d(param) with no autodiff involved.
// Not a benchmark backend: it has no gradients (grad() returns NaN so that no one mistakes it).
#pragma once

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

  int nudged_param = -1;  // which param() call gets `nudge` added, -1 for none
  double nudge = 0.0;
  int params_made = 0;

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
double finite_difference(int64_t size, int param, double h) {
  double out[2];
  for (int side = 0; side < 2; side++) {
    PlainBackend be;
    be.nudged_param = param;
    be.nudge = side ? -h : h;
    typename W::template Run<PlainBackend> run(be, size);
    std::array<double, W::num_grads> unused;
    out[side] = run.step(be, std::span<double, W::num_grads>(unused));
  }
  return (out[0] - out[1]) / (2 * h);
}

// A scalar graph's answer computed with no autodiff at all: its value on plain doubles and each
// gradient by central differences. The runner's judge (harness/runner/judge.h) holds every backend
// to it, so that a lone backend, or a majority that is wrong together, is still caught.
struct PlainAnswer {
  double value;
  std::vector<double> grads;
};
// Central differences with h = 1e-6 agree with our engine's gradients within 2.5e-9 relative
// on the registry's graphs (workloads_test prints each); a backend gets 400 times that.
inline constexpr double kFiniteDifferenceStep = 1e-6, kFiniteDifferenceTolerance = 1e-6;

template <class W>
PlainAnswer plain_answer(int64_t size) {
  PlainBackend be;
  typename W::template Run<PlainBackend> run(be, size);
  std::array<double, W::num_grads> unused;
  PlainAnswer a{run.step(be, std::span<double, W::num_grads>(unused)), {}};
  for (int i = 0; i < W::num_grads; i++)
    a.grads.push_back(finite_difference<W>(size, i, kFiniteDifferenceStep));
  return a;
}

}  // namespace bp
