// engine/core/optimizer_test.cc: the flat buffers and the fused, sync-free optimizer
// (engine/core/optimizer.h) on the eager engine: layout, the exact skip of a step with a NaN or
// Inf gradient (bitwise: values, moments and step count), gradients kept, threads.
// The compiled mode's updates issued inside the backward: engine/compiled/compiled_test.cc.
//   build/engine_tests --gtest_filter='Flat*:Optimizer*'
#include "engine/core/optimizer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <vector>

#include "engine/core/at_threads_test.h"
#include "engine/core/tensor.h"

namespace optimizer_test {

using Graph = bp::TensorGraph<float>;

std::vector<float> ramp(size_t n, float scale, float shift = 0) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; i++) v[i] = scale * float(int(i % 13) - 6) + shift;
  return v;
}

TEST(FlatParams, EachParameterStartsOnACacheLineOfOneBufferPerRole) {
  Graph g;
  const bp::Tensor a = g.param(1, 5, ramp(5, 0.1f)), c = g.constant(2, 2, ramp(4, 1)),
                   b = g.param(1, 17, ramp(17, 0.2f)), d = g.param(3, 1, ramp(3, 0.3f));
  (void)c;
  const float* base = g.flat_values();
  EXPECT_EQ(g.data(a) - base, 0);
  EXPECT_EQ(g.data(b) - base, 16);  // 5 floats padded to a 64-byte line
  EXPECT_EQ(g.data(d) - base, 48);  // 17 padded to 32
  EXPECT_EQ(g.flat_size(), 64u);
  for (bp::Tensor p : {a, b, d}) {
    EXPECT_EQ(reinterpret_cast<uintptr_t>(g.data(p)) % 64, 0u);
    EXPECT_EQ(g.grad(p) - g.grad(a), g.data(p) - g.data(a));  // the same offsets in each buffer
  }
  EXPECT_EQ(std::memcmp(g.data(b), ramp(17, 0.2f).data(), 17 * sizeof(float)), 0);
}

// A two-parameter model: loss = cross_entropy(x W^T + b); x is batch i's input.
struct Model {
  Graph g;
  bp::Tensor w, b;
  std::vector<int32_t> targets{0, 2, 1, 1};
  Model() { w = g.param(3, 4, ramp(12, 0.05f)), b = g.param(1, 3, ramp(3, 0.01f)); }
  static std::vector<float> batch(int i) { return ramp(16, 0.1f * float(i + 1), 0.02f * float(i)); }
  // zero_grad, forward, backward; `poison` then writes one gradient element.
  void backward(int i, float poison = 0, bool poisoned = false) {
    g.zero_grad();
    const bp::Tensor x = g.input(4, 4, batch(i));
    g.backward(g.cross_entropy(g.linear(x, w, b), {targets.data(), 4}));
    if (poisoned) g.grad(w)[7] = poison;
  }
  void update(bool adamw) { adamw ? g.adamw_step(bp::AdamWConfig{}) : g.sgd_step(0.1); }
  std::vector<float> values() const {
    std::vector<float> v(g.data(w), g.data(w) + 12);
    v.insert(v.end(), g.data(b), g.data(b) + 3);
    return v;
  }
};

bool same_bits(const std::vector<float>& x, const std::vector<float>& y) {
  return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
}

// A step with one NaN or Inf gradient changes no value, moment or step count: the run that
// skipped it ends bitwise where a run that never took it ends, two steps later.
TEST(Optimizer, AStepWithANonFiniteGradientChangesNothingAndIsCounted) {
  const float inf = std::numeric_limits<float>::infinity();
  for (bool adamw : {false, true})
    for (float bad : {std::numeric_limits<float>::quiet_NaN(), inf, -inf}) {
      Model skipped, never;
      for (Model* m : {&skipped, &never}) {
        m->backward(0), m->update(adamw), m->g.end_step();
      }
      const std::vector<float> before = skipped.values();
      skipped.backward(1, bad, true);
      const std::vector<float> grad_w(skipped.g.grad(skipped.w), skipped.g.grad(skipped.w) + 12);
      skipped.update(adamw);
      skipped.g.end_step();
      EXPECT_TRUE(same_bits(skipped.values(), before)) << "adamw " << adamw << ", gradient " << bad;
      EXPECT_TRUE(same_bits(
          std::vector<float>(skipped.g.grad(skipped.w), skipped.g.grad(skipped.w) + 12), grad_w))
          << "the gradients are kept";
      EXPECT_EQ(skipped.g.skipped_steps(), 1);
      EXPECT_EQ(skipped.g.adamw_steps(), adamw ? 1 : 0);
      for (Model* m : {&skipped, &never})
        for (int i : {2, 3}) m->backward(i), m->update(adamw), m->g.end_step();
      EXPECT_TRUE(same_bits(skipped.values(), never.values()))
          << "adamw " << adamw << ", gradient " << bad << ": moments or step count moved";
      EXPECT_FALSE(same_bits(skipped.values(), before));
      EXPECT_EQ(never.g.skipped_steps(), 0);
    }
}

// The fused pass takes torch.optim.AdamW's step: against the formula in double, one element at
// a time, after three steps.
TEST(Optimizer, AdamWIsTorchsFormula) {
  Model m;
  const std::vector<float> initial = m.values();
  std::vector<double> p(initial.begin(), initial.end()), mo(15, 0), v(15, 0);
  const bp::AdamWConfig c;
  double worst = 0;
  for (int t = 1; t <= 3; t++) {
    m.backward(t);
    std::vector<double> grad(m.g.grad(m.w), m.g.grad(m.w) + 12);
    grad.insert(grad.end(), m.g.grad(m.b), m.g.grad(m.b) + 3);
    m.update(true);
    m.g.end_step();
    for (size_t j = 0; j < 15; j++) {
      mo[j] = c.beta1 * mo[j] + (1 - c.beta1) * grad[j];
      v[j] = c.beta2 * v[j] + (1 - c.beta2) * grad[j] * grad[j];
      const double mh = mo[j] / (1 - std::pow(c.beta1, t)), vh = v[j] / (1 - std::pow(c.beta2, t));
      p[j] = p[j] * (1 - c.lr * c.weight_decay) - c.lr * mh / (std::sqrt(vh) + c.eps);
    }
  }
  const std::vector<float> got = m.values();
  for (size_t j = 0; j < 15; j++) worst = std::max(worst, std::fabs(got[j] - p[j]));
  std::printf("  AdamW, 3 steps: max |fused - formula in double| %.1e (tolerance 1e-6)\n", worst);
  EXPECT_LT(worst, 1e-6);
}

// The pass split over 1 to 4 threads writes the same bits, and a NaN in any part is seen.
TEST(Optimizer, ThePassIsBitwiseAtAnyThreadCountAndSeesANaNInAnyPart) {
  const size_t n = 100003;
  std::vector<float> reference;
  for (int threads : {1, 2, 3, 4}) {
    AtThreads at(threads, Forced::every_split);
    Graph g;
    const bp::Tensor p = g.param(1, int32_t(n), ramp(n, 0.01f));
    float* grad = g.grad(p);
    for (size_t j = 0; j < n; j++) grad[j] = 0.001f * float(j % 101) - 0.05f;
    g.adamw_step(bp::AdamWConfig{});
    std::vector<float> got(g.data(p), g.data(p) + n);
    if (threads == 1) reference = got;
    EXPECT_TRUE(same_bits(got, reference)) << threads << " threads";
    for (size_t at_index : {size_t(0), n / 2, n - 1}) {
      const float saved = grad[at_index];
      grad[at_index] = std::numeric_limits<float>::quiet_NaN();
      g.adamw_step(bp::AdamWConfig{});
      grad[at_index] = saved;
      EXPECT_TRUE(same_bits(std::vector<float>(g.data(p), g.data(p) + n), got))
          << threads << " threads, NaN at " << at_index;
    }
    EXPECT_EQ(g.skipped_steps(), 3);
    EXPECT_EQ(g.adamw_steps(), 1);
  }
}

void param_after_the_first_step() {
  Model m;
  m.backward(0);
  m.g.end_step();
  m.g.param(2, 2, ramp(4, 1));
}

TEST(OptimizerDeathTest, AParameterAfterTheFirstStepIsRefused) {
  EXPECT_DEATH(param_after_the_first_step(),
               "bp::TensorGraph::param: \\(2, 2\\) after the first step began: parameters come "
               "before it");
}

}  // namespace optimizer_test
