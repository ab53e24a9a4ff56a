// baselines/libtorch/backend_test.cc: the libtorch baseline computes what our engine computes, for
// every workload of the registry (a new one is tested here without a line of its own).
//
// Scalar workloads: known answers on libtorch, then every instance (small sizes) on both backends
// in one process, value and every gradient compared; both in double. Models (float32), each at its
// smallest default size: the step-0 loss and every element of every parameter's gradient, then
// the losses of 50 training steps on the same batches (2 steps of one gradient for an eval's tensor
// form, which takes no update).
//   ctest -R libtorch_test --output-on-failure
#include "baselines/libtorch/backend.h"

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <span>
#include <vector>

#include "engine/backend.h"
#include "workloads/data.h"
#include "workloads/registry.h"

namespace {

const double kRelTolerance = 1e-12;

template <class W, class B>
std::vector<double> run_once(int64_t size) {
  B be;
  typename W::template Run<B> run(be, size);
  auto grads = bp::grads_storage<W>(run);
  std::vector<double> out = {run.step(be, bp::GradSpan<W>(grads))};
  out.insert(out.end(), grads.begin(), grads.end());
  return out;  // value, then gradients
}

TEST(Libtorch, KnownAnswers) {
  torch::set_num_threads(1);
  int checked = 0;
  bp::for_each_workload([&]<class W>() {
    if constexpr (bp::ScalarWorkload<W>) {
      if constexpr (W::known.exists) {
        std::vector<double> got = run_once<W, bp::LibtorchBackend>(W::sizes.defaults()[0]);
        double diff = std::fabs(got[0] - W::known.value);
        for (size_t i = 0; i < W::known.num_grads; i++)
          diff = std::max(diff, std::fabs(got[1 + i] - W::known.grads[i]));
        std::printf("  libtorch %s: max diff to known answer %.2e (tolerance %.0e)\n",
                    std::string(W::name).c_str(), diff, W::known.tolerance);
        EXPECT_LE(diff, W::known.tolerance) << W::name;
        checked++;
      }
    }
  });
  EXPECT_GE(checked, 2);
}

TEST(Libtorch, MatchesEngineOnEveryScalarWorkload) {
  torch::set_num_threads(1);
  bp::for_each_workload([&]<class W>() {
    if constexpr (bp::ScalarWorkload<W>) {
      // Keep the test fast; bench_run --check-only covers the rest. A GradBench eval's defaults
      // are 10^5 to 10^6 libtorch ops: it is compared at a small size of its own.
      std::vector<int64_t> sizes(W::sizes.defaults().begin(), W::sizes.defaults().end());
      if (W::num_grads == bp::kGradsPerSize) sizes = {W::sizes.min + 2};
      for (int64_t size : sizes) {
        if (size > 1000) continue;
        std::vector<double> engine = run_once<W, bp::EngineBackend>(size);
        std::vector<double> torch = run_once<W, bp::LibtorchBackend>(size);
        double worst = 0;
        for (size_t i = 0; i < engine.size(); i++)
          worst = std::max(worst,
                           std::fabs(engine[i] - torch[i]) / std::max(1.0, std::fabs(engine[i])));
        std::printf("  %s size %lld: max rel diff engine vs libtorch %.2e (tolerance %.0e)\n",
                    std::string(W::name).c_str(), (long long)size, worst, kRelTolerance);
        EXPECT_LE(worst, kRelTolerance) << W::name << " size " << size;
      }
    }
  });
}

// float32 on both sides with different summation orders. Gradients are compared per parameter,
// relative to that parameter's largest gradient (measured: ~1e-6); losses relative (measured
// after 50 steps: ~1e-5).
const double kGradTolerance = 1e-4, kLossTolerance = 1e-3;

template <class W>
void compare_training(int64_t size) {
  torch::set_num_threads(1);
  const bp::Corpus corpus = bp::load_corpus(bp::kDefaultCorpus, 100);
  bp::EngineBackend e;
  bp::LibtorchBackend t;
  typename W::template Run<bp::EngineBackend> re(e, size, corpus);
  typename W::template Run<bp::LibtorchBackend> rt(t, size, corpus);
  ASSERT_EQ(re.params.size(), rt.params.size());

  e.zero_grad(), t.zero_grad();
  auto le = re.loss(e, 0);
  auto lt = rt.loss(t, 0);
  e.backward(le), t.backward(lt);
  const double loss_diff = std::fabs(e.loss_value(le) - t.loss_value(lt)) / t.loss_value(lt);
  double worst = 0;
  for (size_t i = 0; i < re.params.size(); i++) {
    std::vector<float> ge(re.param_sizes[i]), gt(re.param_sizes[i]);
    e.read_grad(re.params[i], ge);
    t.read_grad(rt.params[i], gt);
    double scale = 1e-30, diff = 0;
    for (size_t j = 0; j < gt.size(); j++) {
      scale = std::max(scale, double(std::fabs(gt[j])));
      diff = std::max(diff, double(std::fabs(ge[j] - gt[j])));
    }
    worst = std::max(worst, diff / scale);
  }
  e.optimizer_step(), t.optimizer_step();
  e.end_step(), t.end_step();
  re.next_batch = rt.next_batch = 1;
  double worst_loss = loss_diff, last_e = 0, last_t = 0;
  const int steps = bp::takes_no_update<W>() ? 2 : 50;
  for (int s = 1; s <= steps; s++) {
    last_e = re.step(e), last_t = rt.step(t);
    worst_loss = std::max(worst_loss, std::fabs(last_e - last_t) / std::fabs(last_t));
  }
  std::printf(
      "  %s %s:%lld: %zu params; step-0 loss rel diff %.2e; max grad diff / max |grad| "
      "%.2e (tolerance %.0e); losses over %d steps max rel diff %.2e (tolerance %.0e); "
      "loss %.4f -> %.4f\n",
      std::string(W::name).c_str(), std::string(W::sizes.key).c_str(), (long long)size,
      re.params.size(), loss_diff, worst, kGradTolerance, steps, worst_loss, kLossTolerance,
      t.loss_value(lt), last_t);
  EXPECT_LE(worst, kGradTolerance);
  EXPECT_LE(worst_loss, kLossTolerance);
  if constexpr (bp::takes_no_update<W>())
    EXPECT_EQ(last_t, t.loss_value(lt)) << "a gradient without an update: the same loss";
  else
    EXPECT_LT(last_t, t.loss_value(lt)) << "training should lower the loss";
}

TEST(LibtorchModels, EveryModelTrainsIdentically) {
  int checked = 0;
  bp::for_each_workload([&]<class W>() {
    if constexpr (bp::ModelWorkload<W>) {
      compare_training<W>(W::sizes.defaults()[0]);
      checked++;
    }
  });
  EXPECT_GE(checked, 4);
}

// The engine's elementwise binary ops against torch's on the same inputs, in double: x op y with
// y of x's shape or one row broadcast over x's rows, loss = sum(out * R), the loss and both
// gradients compared. (Every op against finite differences: engine/core/tensor_test.cc.)
TEST(LibtorchOps, BinaryOpsMatchTorchWithAndWithoutABroadcastRow) {
  using G = bp::TensorGraph<double>;
  struct Op {
    const char* name;
    bp::Tensor (G::*engine)(bp::Tensor, bp::Tensor);
    torch::Tensor (*torch_op)(const torch::Tensor&, const torch::Tensor&);
    double y_lo, y_hi;  // y's values: away from div's pole
  };
  const Op ops[] = {
      {"add", &G::add, [](const torch::Tensor& x, const torch::Tensor& y) { return x + y; }, -1, 1},
      {"mul", &G::mul, [](const torch::Tensor& x, const torch::Tensor& y) { return x * y; }, -1, 1},
      {"sub", &G::sub, [](const torch::Tensor& x, const torch::Tensor& y) { return x - y; }, -1, 1},
      {"div", &G::div, [](const torch::Tensor& x, const torch::Tensor& y) { return x / y; }, 0.5,
       2}};
  const auto options = torch::TensorOptions().dtype(torch::kFloat64);
  auto values = [](size_t n, double lo, double hi, uint64_t seed) {
    std::vector<double> v(n);
    for (double& x : v) {
      seed = seed * 6364136223846793005ull + 1442695040888963407ull;
      x = lo + (hi - lo) * double(seed >> 11) / double(1ull << 53);
    }
    return v;
  };
  const int32_t R = 5, C = 7;
  for (const Op& op : ops)
    for (const int32_t y_rows : {R, 1}) {
      const std::vector<double> x = values(size_t(R) * C, -1, 1, 1),
                                y = values(size_t(y_rows) * C, op.y_lo, op.y_hi, 2),
                                w = values(size_t(R) * C, -1, 1, 3);
      G g;
      const bp::Tensor gx = g.param(R, C, x), gy = g.param(y_rows, C, y);
      const bp::Tensor loss = g.sum(g.mul((g.*op.engine)(gx, gy), g.input(R, C, w)));
      g.backward(loss);
      auto tensor = [&](const std::vector<double>& v, int32_t rows) {
        return torch::from_blob(const_cast<double*>(v.data()), {rows, C}, options).clone();
      };
      torch::Tensor tx = tensor(x, R).requires_grad_(), ty = tensor(y, y_rows).requires_grad_();
      const torch::Tensor tloss = (op.torch_op(tx, ty) * tensor(w, R)).sum();
      tloss.backward();
      double worst = std::fabs(g.data(loss)[0] - tloss.item<double>());
      for (auto [t, p, n] : {std::tuple{tx, gx, R * C}, std::tuple{ty, gy, y_rows * C}}) {
        const torch::Tensor grad = t.grad().contiguous();
        for (int32_t i = 0; i < n; i++)
          worst = std::max(worst, std::fabs(g.grad(p)[i] - grad.data_ptr<double>()[i]));
      }
      std::printf("  %s, y (%d, %d): max |engine - torch| %.1e (tolerance 1e-12)\n", op.name,
                  y_rows, C, worst);
      EXPECT_LE(worst, 1e-12) << op.name << " with y of " << y_rows << " rows";
    }
}

// log_softmax, nll and the two together (torch's cross-entropy) against torch's on the same
// inputs, in double: loss = sum(log_softmax(x) * R), nll(x), nll(log_softmax(x)).
TEST(LibtorchOps, LogSoftmaxAndNllMatchTorch) {
  using G = bp::TensorGraph<double>;
  const int32_t N = 4, V = 6;
  const auto options = torch::TensorOptions().dtype(torch::kFloat64);
  std::vector<double> x(size_t(N) * V), w(size_t(N) * V);
  for (size_t i = 0; i < x.size(); i++)
    x[i] = std::sin(0.7 * double(i)) * 9, w[i] = std::cos(double(i));
  const std::vector<int32_t> targets = {5, 0, 3, 3};
  const std::vector<int64_t> targets64(targets.begin(), targets.end());
  enum class Form { log_softmax, nll, nll_of_log_softmax };
  for (Form form : {Form::log_softmax, Form::nll, Form::nll_of_log_softmax}) {
    G g;
    const bp::Tensor gx = g.param(N, V, x);
    const bp::IndexSpan t{targets.data(), N};
    const bp::Tensor loss = form == Form::log_softmax
                                ? g.sum(g.mul(g.log_softmax(gx), g.input(N, V, w)))
                            : form == Form::nll ? g.nll(gx, t)
                                                : g.nll(g.log_softmax(gx), t);
    g.backward(loss);
    torch::Tensor tx = torch::from_blob(x.data(), {N, V}, options).clone().requires_grad_();
    const torch::Tensor tt = torch::tensor(targets64, torch::kLong);
    const torch::Tensor tw = torch::from_blob(w.data(), {N, V}, options).clone();
    const torch::Tensor tloss = form == Form::log_softmax ? (torch::log_softmax(tx, 1) * tw).sum()
                                : form == Form::nll
                                    ? torch::nll_loss(tx, tt)
                                    : torch::nll_loss(torch::log_softmax(tx, 1), tt);
    tloss.backward();
    double worst = std::fabs(g.data(loss)[0] - tloss.item<double>());
    const torch::Tensor grad = tx.grad().contiguous();
    for (int32_t i = 0; i < N * V; i++)
      worst = std::max(worst, std::fabs(g.grad(gx)[i] - grad.data_ptr<double>()[i]));
    const char* names[] = {"log_softmax", "nll", "nll of log_softmax"};
    std::printf("  %s: max |engine - torch| %.1e (tolerance 1e-12)\n", names[int(form)], worst);
    EXPECT_LE(worst, 1e-12) << names[int(form)];
  }
}

// transpose against torch's t() on the same input, in double, past one 16 x 16 tile both ways:
// loss = sum(x^T * R).
TEST(LibtorchOps, TransposeMatchesTorch) {
  using G = bp::TensorGraph<double>;
  const int32_t N = 37, C = 20;
  const auto options = torch::TensorOptions().dtype(torch::kFloat64);
  std::vector<double> x(size_t(N) * C), w(size_t(N) * C);
  for (size_t i = 0; i < x.size(); i++)
    x[i] = std::sin(0.3 * double(i)), w[i] = std::cos(double(i));
  G g;
  const bp::Tensor gx = g.param(N, C, x);
  const bp::Tensor loss = g.sum(g.mul(g.transpose(gx), g.input(C, N, w)));
  g.backward(loss);
  torch::Tensor tx = torch::from_blob(x.data(), {N, C}, options).clone().requires_grad_();
  const torch::Tensor tloss = (tx.t() * torch::from_blob(w.data(), {C, N}, options)).sum();
  tloss.backward();
  double worst = std::fabs(g.data(loss)[0] - tloss.item<double>());
  const torch::Tensor grad = tx.grad().contiguous();
  for (int32_t i = 0; i < N * C; i++)
    worst = std::max(worst, std::fabs(g.grad(gx)[i] - grad.data_ptr<double>()[i]));
  std::printf("  transpose (%d, %d): max |engine - torch| %.1e (tolerance 1e-12)\n", N, C, worst);
  EXPECT_LE(worst, 1e-12);
}

}  // namespace
