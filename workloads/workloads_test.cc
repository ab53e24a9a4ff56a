// workloads/workloads_test.cc: every scalar workload of the registry on our engine, against its
// known answer if it has one and against finite differences (PlainBackend, no autodiff), in
// double. A workload added to workloads/registry.h is tested here without a line of its own.
// Models run in float32, where finite differences say little: here each only trains (its ops are
// checked in double in engine/core/tensor_test.cc, each model against libtorch in
// baselines/libtorch/backend_test.cc).
//   build/engine_tests --gtest_filter='Workloads*'   (or ctest -R Workloads)
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <string>

#include "engine/backend.h"
#include "workloads/plain_backend.h"
#include "workloads/registry.h"

namespace {

template <class W>
auto engine_grads(int64_t size, double* value) {
  bp::EngineBackend be;
  typename W::template Run<bp::EngineBackend> run(be, size);
  auto grads = bp::grads_storage<W>(run);
  *value = run.step(be, bp::GradSpan<W>(grads));
  return grads;
}

// The sizes a test can afford: the smallest three and the defaults up to 100,000 (a GradBench
// eval's defaults have up to 10^5 gradients, each two evaluations by finite differences: only its
// smallest three).
template <class W>
std::vector<int64_t> test_sizes() {
  std::vector<int64_t> sizes;
  for (int64_t n : W::sizes.defaults())
    if (n <= 100000 && W::num_grads != bp::kGradsPerSize) sizes.push_back(n);
  if (W::sizes.sized())
    for (int64_t n = W::sizes.min; n < W::sizes.min + 3 && n <= W::sizes.max; n++)
      sizes.push_back(n);
  return sizes;
}

TEST(Workloads, KnownAnswers) {
  int checked = 0;
  bp::for_each_workload([&]<class W>() {
    if constexpr (bp::ScalarWorkload<W>) {
      if constexpr (W::known.exists) {
        double value;
        const auto grads = engine_grads<W>(W::sizes.defaults()[0], &value);
        double diff = std::fabs(value - W::known.value);
        for (size_t i = 0; i < W::known.num_grads; i++)
          diff = std::max(diff, std::fabs(grads[i] - W::known.grads[i]));
        std::printf("  %s: value %.6f; max diff to the known answer %.2e (tolerance %.0e)\n",
                    std::string(W::name).c_str(), value, diff, W::known.tolerance);
        EXPECT_LE(diff, W::known.tolerance) << W::name;
        checked++;
      }
    }
  });
  EXPECT_GE(checked, 2) << "tiny_graph and small_graph have known answers";
}

// Gradients of every parameter against central differences; relative tolerance because the
// scalar graphs' gradients reach 1e3.
TEST(Workloads, GradientsMatchFiniteDifferences) {
  int checked = 0;
  bp::for_each_workload([&]<class W>() {
    if constexpr (bp::ScalarWorkload<W>) {
      for (int64_t size : test_sizes<W>()) {
        double value;
        const auto grads = engine_grads<W>(size, &value);
        // Relative above 1, absolute below, beyond the rounding of the differences themselves
        // (it matters where values are large: gmm's reach 10^5).
        const double noise = bp::finite_difference_noise(value, 1e-6), tolerance = 1e-7;
        double worst = 0, raw = 0;
        for (size_t i = 0; i < grads.size(); i++) {
          const double fd = bp::finite_difference<W>(size, int64_t(i), 1e-6);
          const double diff = std::fabs(grads[i] - fd), scale = std::max(1.0, std::fabs(fd));
          raw = std::max(raw, diff / scale);
          worst = std::max(worst, std::max(0.0, diff - noise) / scale);
        }
        std::printf(
            "  %s size %lld: %zu gradients, max rel diff to finite differences %.2e, %.2e beyond "
            "their rounding %.1e (tolerance %.0e)\n",
            std::string(W::name).c_str(), (long long)size, grads.size(), raw, worst, noise,
            tolerance);
        EXPECT_LE(worst, tolerance) << W::name << " size " << size;
        checked++;
      }
    }
  });
  EXPECT_GE(checked, 4);
}

// GradBench's det and ode against answers computed another way: the determinant by Gaussian
// elimination, and the ODE where Runge-Kutta 4 is exact (y_i is x_0...x_i t^(i+1)/(i+1)!, of
// degree at most 4 in t for 4 equations).
TEST(Workloads, DetAndOdeAgreeWithAnswersComputedAnotherWay) {
  for (int64_t ell = 1; ell <= 8; ell++) {
    const bp::Det::Input in = bp::Det::input(ell);
    std::vector<double> a = in.a;
    double det = 1;
    const size_t n = size_t(ell);
    for (size_t k = 0; k < n; k++) {  // partial pivoting
      size_t p = k;
      for (size_t i = k + 1; i < n; i++)
        if (std::fabs(a[i * n + k]) > std::fabs(a[p * n + k])) p = i;
      if (p != k) {
        for (size_t j = 0; j < n; j++) std::swap(a[k * n + j], a[p * n + j]);
        det = -det;
      }
      det *= a[k * n + k];
      for (size_t i = k + 1; i < n; i++) {
        const double f = a[i * n + k] / a[k * n + k];
        for (size_t j = k; j < n; j++) a[i * n + j] -= f * a[k * n + j];
      }
    }
    const double minors = bp::plain_answer<bp::Det>(ell).value;
    std::printf("  det ell %lld: by minors %.15g, by elimination %.15g\n", (long long)ell, minors,
                det);
    EXPECT_NEAR(minors, det, 1e-12 * std::max(1.0, std::fabs(det))) << "ell " << ell;
  }
  const bp::Ode::Input in = bp::Ode::input(4);
  const double exact = in.x[0] * in.x[1] * in.x[2] * in.x[3] * 16.0 / 24.0;  // t = 2, 4!
  const double rk4 = bp::plain_answer<bp::Ode>(4).value;
  std::printf("  ode 4 equations: Runge-Kutta %.15g, exact %.15g\n", rk4, exact);
  EXPECT_NEAR(rk4, exact, 1e-13);
}

// Every model of the registry trains on our engine at its smallest default size: finite losses
// that fall over a few steps on one batch (a gradient without update: the same loss each step).
// Cheap, so that `make sanitize` runs every model's ops under AddressSanitizer and UBSan; the
// numbers are checked against libtorch in libtorch_test.
TEST(Workloads, EveryModelTrainsOnTheEngine) {
  const bp::Corpus corpus = bp::load_corpus(bp::kDefaultCorpus, 1000);
  int checked = 0;
  bp::for_each_workload([&]<class W>() {
    if constexpr (bp::ModelWorkload<W>) {
      // Under AddressSanitizer the recurrent workloads run 8 steps: the same ops, a tenth of the
      // time (char_rnn_wide's 100 took most of the sanitized test's 26 s).
#if defined(__SANITIZE_ADDRESS__)
      constexpr bool recurrent =
          bp::RecurrentModel<typename W::template Run<bp::EngineBackend>, bp::EngineBackend>;
      const int64_t size = recurrent ? 8 : W::sizes.defaults()[0];
#else
      const int64_t size = W::sizes.defaults()[0];
#endif
      bp::EngineBackend be;
      typename W::template Run<bp::EngineBackend> run(be, size, corpus);
      double first = 0, last = 0;
      for (int step = 0; step < 4; step++) {
        run.next_batch = 0;                              // the same batch: the loss must fall
        if constexpr (requires { run.check_step(be); })  // a step that returns no loss
          last = run.check_step(be);
        else
          last = run.step(be);
        if (step == 0) first = last;
        ASSERT_TRUE(std::isfinite(last)) << W::name << " step " << step;
      }
      if constexpr (bp::takes_no_update<W>()) {
        std::printf("  %s size %lld: loss %.4f, the same 4 steps running\n",
                    std::string(W::name).c_str(), (long long)size, last);
        EXPECT_EQ(last, first) << W::name;
      } else {
        std::printf("  %s size %lld: loss %.4f -> %.4f in 3 updates on one batch\n",
                    std::string(W::name).c_str(), (long long)size, first, last);
        EXPECT_LT(last, first) << W::name;
      }
      checked++;
    }
  });
  EXPECT_GE(checked, 4);
}

// Data parallel's shards (workloads/data.h): every model that names its batch_rows, its batch
// split over 2 and 4 ranks, each rank's step made in turn in this process: the mean of the ranks'
// losses and gradients is the whole batch's, up to the order of the sums. (The ranks' reduction
// itself is engine/distributed/'s, tested under mpirun.)
TEST(Workloads, ShardsOfABatchAverageToTheWholeBatch) {
  const bp::Corpus corpus = bp::load_corpus(bp::kDefaultCorpus, 1000);
  int checked = 0;
  bp::for_each_workload([&]<class W>() {
    if constexpr (bp::ModelWorkload<W> && requires { W::batch_rows(int64_t(1)); }) {
      const int64_t size = W::sizes.defaults().back() >= 8 && W::batch_rows(8) == 8
                               ? 8
                               : W::sizes.defaults()[0];  // sequences: 8 split into 2 or 4
      auto step_grads = [&](bp::Shard shard, double* loss) {
        bp::process_shard() = shard;
        bp::EngineBackend be;
        typename W::template Run<bp::EngineBackend> run(be, size, corpus);
        be.zero_grad();
        *loss = run.forward_backward(be, 0);
        std::vector<float> all;
        for (size_t k = 0; k < run.params.size(); k++) {
          std::vector<float> g(run.param_sizes[k]);
          be.read_grad(run.params[k], g);
          all.insert(all.end(), g.begin(), g.end());
        }
        bp::process_shard() = bp::Shard{};
        return all;
      };
      double whole_loss = 0;
      const std::vector<float> whole = step_grads(bp::Shard{}, &whole_loss);
      for (int ranks : {2, 4}) {
        ASSERT_EQ((bp::Shard{0, ranks}.refusal(W::batch_rows(size))), "") << W::name;
        std::vector<double> mean(whole.size(), 0.0);
        double mean_loss = 0, worst = 0;
        for (int r = 0; r < ranks; r++) {
          double loss = 0;
          const std::vector<float> g = step_grads(bp::Shard{r, ranks}, &loss);
          for (size_t i = 0; i < g.size(); i++) mean[i] += double(g[i]) / ranks;
          mean_loss += loss / ranks;
        }
        for (size_t i = 0; i < whole.size(); i++)
          worst = std::max(worst, std::abs(mean[i] - whole[i]) / (std::abs(double(whole[i])) + 1));
        EXPECT_LE(worst, 1e-6) << W::name << " at " << ranks << " ranks";
        EXPECT_NEAR(mean_loss, whole_loss, 1e-5 * whole_loss) << W::name;
        std::printf(
            "  %s size %lld, %d shards: max |mean of shards - whole| / (|whole| + 1) "
            "%.1e (tolerance 1e-06)\n",
            std::string(W::name).c_str(), (long long)size, ranks, worst);
      }
      checked++;
    }
  });
  EXPECT_GE(checked, 4);  // char_mlp, mini_gpt, mini_gpt_wide, mlp_width
}

TEST(Workloads, AShardIsItsRanksRowsOfTheGlobalBatch) {
  const std::vector<int> v = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};  // 6 rows of 2
  EXPECT_EQ((bp::Shard{1, 3}.slice(v, 6, 2)), (std::vector<int>{4, 5, 6, 7}));
  EXPECT_EQ((bp::Shard{0, 1}.slice(v, 6, 2)), v);
  EXPECT_EQ((bp::Shard{2, 3, true}.global_rows(2)), 6);  // weak: each rank keeps 2 rows
  EXPECT_EQ((bp::Shard{2, 3, true}.slice(v, 2, 2)), (std::vector<int>{8, 9, 10, 11}));
  EXPECT_EQ((bp::Shard{0, 3}.refusal(64)),
            "a batch of 64 rows does not split evenly into 3 ranks (--scaling=weak keeps each "
            "rank's batch whole)");
  EXPECT_EQ((bp::Shard{0, 3, true}.refusal(64)), "");
}

static_assert(bp::TensorBackend<bp::EngineDoubleBackend>);

// The tensor form T and the scalar graph S of one eval, both in double on the same inputs (the
// double tensor mode GradBench's sessions run): the value and every gradient, in GradBench's
// order, agree to 1e-12, relative above 1 and absolute below; the two sum in different orders.
// A float32 input or constant anywhere in the tensor form moves them by 1e-8 or more.
template <class T, class S>
void expect_tensor_form_matches_scalar(int64_t size) {
  bp::EngineDoubleBackend tb;
  typename T::template Run<bp::EngineDoubleBackend> run(tb, size, bp::Corpus{});
  tb.zero_grad();
  const double tensor_value = run.forward_backward(tb, 0);
  std::vector<double> tensor_grads;
  for (size_t i = 0; i < run.params.size(); i++) {
    const double* g = tb.graph.grad(run.params[i]);
    tensor_grads.insert(tensor_grads.end(), g, g + run.param_sizes[i]);
  }
  const typename S::Input in = S::input(size);
  bp::EngineBackend sb;
  typename S::template Graph<bp::EngineBackend> graph(sb, in);
  std::vector<double> grads(graph.params.size());
  const double value = bp::finish_step(sb, graph.objective(sb), std::span<double>(grads),
                                       std::span<const bp::Scalar<double>>(graph.params));
  ASSERT_EQ(tensor_grads.size(), grads.size()) << T::name;
  double worst = std::fabs(tensor_value - value) / std::max(1.0, std::fabs(value));
  for (size_t i = 0; i < grads.size(); i++)
    worst =
        std::max(worst, std::fabs(tensor_grads[i] - grads[i]) / std::max(1.0, std::fabs(grads[i])));
  std::printf(
      "  %-14s size %-4lld value %.6g, %zu gradients: max rel diff to %s %.2e (tol 1e-12)\n",
      std::string(T::name).c_str(), (long long)size, value, grads.size(),
      std::string(S::name).c_str(), worst);
  EXPECT_LE(worst, 1e-12) << T::name;
}

TEST(Workloads, TensorFormsOfEvalsMatchTheirScalarGraphsInDouble) {
  expect_tensor_form_matches_scalar<bp::LstmTensor, bp::Lstm>(64);
  expect_tensor_form_matches_scalar<bp::GmmD2Tensor, bp::GmmD2>(3);
  expect_tensor_form_matches_scalar<bp::GmmD10Tensor, bp::GmmD10>(4);
}

// The registry's facts at run time agree with the workloads' own (what bench_run reads).
TEST(Workloads, RegistryInfoMatchesEachWorkload) {
  size_t i = 0;
  bp::for_each_workload([&]<class W>() {
    const bp::WorkloadInfo& info = bp::kWorkloads[i++];
    EXPECT_EQ(info.name, W::name);
    EXPECT_EQ(info.model, bp::ModelWorkload<W>);
    if constexpr (requires { W::phase; })
      EXPECT_EQ(info.phase, W::phase);
    else
      EXPECT_EQ(info.phase, info.model ? "step" : "grad");
    EXPECT_EQ(bp::find_workload(W::name), &info);
  });
  EXPECT_EQ(i, bp::kWorkloads.size());
  EXPECT_EQ(bp::find_workload("no_such_workload"), nullptr);
  const bp::WorkloadInfo& chain = *bp::find_workload("scalar_chain");
  EXPECT_EQ(bp::size_error(chain, 1000), "");
  EXPECT_EQ(bp::size_error(chain, 0), "nodes=0 is out of range for scalar_chain (1 to 10000000)");
  EXPECT_EQ(bp::size_error(*bp::find_workload("tiny_graph"), 5),
            "tiny_graph has no size (give none)");
}

}  // namespace
