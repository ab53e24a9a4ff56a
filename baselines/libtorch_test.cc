// baselines/libtorch_test.cc: the libtorch baseline computes what our engine computes.
//
// Known answers on libtorch, then every workload instance (small sizes) on both backends in one
// process, value and every gradient compared. Both run in double; the tolerance allows for
// libtorch's different but equally valid rounding (e.g. pow via exp/log).
//   ctest -R libtorch_test --output-on-failure
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <vector>

#include "baselines/libtorch_backend.h"
#include "engine/backend.h"
#include "workloads/registry.h"

namespace {

const double kRelTolerance = 1e-12;

template <class W, class B>
std::vector<double> run_once(int64_t size) {
  B be;
  typename W::template Run<B> run(be, size);
  std::vector<double> out(W::num_grads + 1);
  out[0] = run.step(be, std::span<double>(out.data() + 1, W::num_grads));
  return out;  // value, then gradients
}

TEST(Libtorch, KnownAnswers) {
  torch::set_num_threads(1);
  auto check = [](auto wl) {
    using W = decltype(wl);
    std::vector<double> got = run_once<W, bp::LibtorchBackend>(0);
    double diff = std::fabs(got[0] - W::known->value);
    for (int i = 0; i < W::known->num_grads; i++)
      diff = std::max(diff, std::fabs(got[1 + i] - W::known->grads[i]));
    std::printf("  libtorch %s: max diff to known answer %.2e (tolerance %.0e)\n",
                std::string(W::name).c_str(), diff, W::known->tolerance);
    EXPECT_LE(diff, W::known->tolerance) << W::name;
  };
  check(bp::TinyGraph{});
  check(bp::SmallGraph{});
}

TEST(Libtorch, MatchesEngineOnEveryWorkload) {
  torch::set_num_threads(1);
  auto compare = [](auto wl) {
    using W = decltype(wl);
    for (int64_t size : W::default_sizes) {
      if (size > 1000) continue;  // keep the test fast; bench_run --check-only covers the rest
      std::vector<double> engine = run_once<W, bp::EngineBackend>(size);
      std::vector<double> torch = run_once<W, bp::LibtorchBackend>(size);
      double worst = 0;
      for (size_t i = 0; i < engine.size(); i++)
        worst = std::max(worst, std::fabs(engine[i] - torch[i]) / std::max(1.0, std::fabs(engine[i])));
      std::printf("  %s size %lld: max rel diff engine vs libtorch %.2e (tolerance %.0e)\n",
                  std::string(W::name).c_str(), (long long)size, worst, kRelTolerance);
      EXPECT_LE(worst, kRelTolerance) << W::name << " size " << size;
    }
  };
  std::apply([&](auto... w) { (compare(w), ...); }, bp::Workloads{});
}

}  // namespace
