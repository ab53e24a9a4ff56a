// baselines/adolc/backend_test.cc: ADOL-C against our engine on every scalar workload of the
// registry, both ways of taping, in double; and the two ways against each other, bitwise (the
// same tape, evaluated by the same sweeps).
//   build/adolc_test   (or ctest -R Adolc)
#include "baselines/adolc/backend.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/backend.h"
#include "workloads/registry.h"

namespace {

// Three steps on one setup, as a benchmark takes them: the value and gradients of each.
template <class W, class B>
std::vector<std::vector<double>> three_steps(int64_t size, bool every_step = false) {
  B be;
  if constexpr (std::is_same_v<B, bp::AdolcBackend>) be.tape_every_step = every_step;
  typename W::template Run<B> run(be, size);
  std::vector<std::vector<double>> out;
  for (int step = 0; step < 3; step++) {
    auto grads = bp::grads_storage<W>(run);
    double value;
    if constexpr (bp::ReplaysScalarSteps<B>)
      value = be.can_replay_scalar_step() ? be.replay_scalar_step(grads)
                                          : run.step(be, bp::GradSpan<W>(grads));
    else
      value = run.step(be, bp::GradSpan<W>(grads));
    out.push_back({value});
    out.back().insert(out.back().end(), grads.begin(), grads.end());
  }
  return out;
}

// Small sizes: the test is about agreement, and a tape of a GradBench eval's defaults is 10^6
// operations.
template <class W>
std::vector<int64_t> sizes_of() {
  if (!W::sizes.sized()) return {0};
  if (W::num_grads == bp::kGradsPerSize) return {W::sizes.min + 2};
  return {W::sizes.defaults()[0], W::sizes.min};
}

TEST(Adolc, MatchesTheEngineOnEveryScalarWorkloadBothWays) {
  const double tolerance = 1e-12;  // relative above 1: the same operations, other libm calls
  int checked = 0;
  bp::for_each_workload([&]<class W>() {
    if constexpr (bp::ScalarWorkload<W>) {
      for (int64_t size : sizes_of<W>()) {
        const auto engine = three_steps<W, bp::EngineBackend>(size);
        const auto once = three_steps<W, bp::AdolcBackend>(size, false);
        const auto every = three_steps<W, bp::AdolcBackend>(size, true);
        double worst = 0;
        for (int step = 0; step < 3; step++) {
          ASSERT_EQ(once[step].size(), engine[step].size()) << W::name;
          for (size_t i = 0; i < engine[step].size(); i++) {
            worst = std::max(worst, std::fabs(once[step][i] - engine[step][i]) /
                                        std::max(1.0, std::fabs(engine[step][i])));
            EXPECT_EQ(once[step][i], every[step][i])
                << W::name << " size " << size << " step " << step << " number " << i
                << ": taped once and replayed differs from taped every step";
          }
        }
        std::printf("  %-13s size %-6lld max rel diff ADOL-C vs engine %.1e (tolerance %.0e)\n",
                    std::string(W::name).c_str(), (long long)size, worst, tolerance);
        EXPECT_LE(worst, tolerance) << W::name << " size " << size;
        checked++;
      }
    }
  });
  EXPECT_GE(checked, 8);
}

// A misuse stops with one line, and a new backend can tape after an old one is gone.
TEST(Adolc, RefusesParametersAfterOpsAndTapesAgainInANewBackend) {
  {
    bp::AdolcBackend be;
    auto a = be.param(2.0);
    auto b = a * a;
    (void)b;
    EXPECT_THROW(be.param(1.0), std::logic_error);
  }
  bp::AdolcBackend be;
  auto a = be.param(3.0);
  be.backward(a * a);
  EXPECT_EQ(be.grad(a), 6.0);
  EXPECT_EQ(be.value(a * a), 9.0);
}

// A tape longer than its buffers is refused in one line, and ADOL-C leaves no file behind (it
// writes what outgrows its buffers to ADOLC-*.tap in the working directory).
TEST(Adolc, ATapeThatOutgrowsItsBuffersIsRefusedAndLeavesNoFile) {
  namespace fs = std::filesystem;
  auto tape_files = [] {
    int n = 0;
    for (const auto& e : fs::directory_iterator(fs::current_path()))
      n += e.path().filename().string().rfind("ADOLC-", 0) == 0;
    return n;
  };
  const int before = tape_files();
  bp::AdolcBackend be;
  be.first_tape_entries = 1000;
  bp::ScalarChain::Run<bp::AdolcBackend> run(be, 5000);
  std::array<double, 3> grads{};
  try {
    run.step(be, grads);
    ADD_FAILURE() << "a tape of 5000 operations fit in buffers of 1000";
  } catch (const std::runtime_error& e) {
    std::printf("  %s\n", e.what());
    EXPECT_NE(std::string(e.what()).find("outgrew its in-memory buffers of 1000"),
              std::string::npos);
  }
  EXPECT_EQ(tape_files(), before) << "ADOL-C's files left in " << fs::current_path();
}

}  // namespace
