// workloads/workloads_test.cc: every scalar workload on our engine against known answers and
// against finite differences (PlainBackend, no autodiff), in double.
//   ctest -R workloads_test --output-on-failure
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <vector>

#include "engine/backend.h"
#include "workloads/plain_backend.h"
#include "workloads/registry.h"

namespace {

template <class W>
std::vector<double> engine_grads(int64_t size, double* value) {
  bp::EngineBackend be;
  typename W::template Run<bp::EngineBackend> run(be, size);
  std::vector<double> grads(W::num_grads);
  *value = run.step(be, grads);
  return grads;
}

template <class W>
void expect_known_answer() {
  double value;
  std::vector<double> grads = engine_grads<W>(0, &value);
  double diff = std::fabs(value - W::known->value);
  for (int i = 0; i < W::known->num_grads; i++)
    diff = std::max(diff, std::fabs(grads[i] - W::known->grads[i]));
  std::printf("  %s: value %.6f, grads %.6f %.6f; max diff to known answer %.2e (tolerance %.0e)\n",
              std::string(W::name).c_str(), value, grads[0], grads[1], diff, W::known->tolerance);
  EXPECT_LE(diff, W::known->tolerance);
}

TEST(Workloads, TinyGraphKnownAnswer) { expect_known_answer<bp::TinyGraph>(); }
TEST(Workloads, SmallGraphKnownAnswer) { expect_known_answer<bp::SmallGraph>(); }

// Gradients of every parameter against central differences; relative tolerance because the
// scalar graphs' gradients reach 1e3.
template <class W>
void expect_finite_differences(int64_t size) {
  double value;
  std::vector<double> grads = engine_grads<W>(size, &value);
  double worst = 0;
  for (int i = 0; i < W::num_grads; i++) {
    const double fd = bp::finite_difference<W>(size, i, 1e-6);
    worst = std::max(worst, std::fabs(grads[i] - fd) / std::max(1.0, std::fabs(fd)));
  }
  std::printf("  %s size %lld: max rel diff to finite differences %.2e (tolerance 1e-7)\n",
              std::string(W::name).c_str(), (long long)size, worst);
  EXPECT_LE(worst, 1e-7);
}

TEST(Workloads, GradientsMatchFiniteDifferences) {
  expect_finite_differences<bp::TinyGraph>(0);
  expect_finite_differences<bp::SmallGraph>(0);
  for (int64_t n : {1, 2, 3, 10, 1000, 100000}) expect_finite_differences<bp::ScalarChain>(n);
}

}  // namespace
