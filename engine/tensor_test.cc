// engine/tensor_test.cc: every tensor op's gradient against central finite differences, in double.
//
// Each case builds loss = sum(op(params) * R) with a fixed random R (so every output element
// carries a different weight), takes the engine's gradient of every parameter element, and
// compares it with (loss(p + h) - loss(p - h)) / 2h. A test fails if an op in TensorOp is not
// exercised by some case. Then: AdamW against a hand-computed step, and arena reuse.
//   ctest -R engine_tensor_test --output-on-failure
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <set>
#include <vector>

#include "engine/alloc_counter_test.h"
#include "engine/tensor.h"

namespace {

using G = bp::TensorGraph<double>;
using bp::Tensor;

// Deterministic values in [lo, hi): tests must not depend on a seed that changes.
std::vector<double> values(size_t n, double lo, double hi, uint64_t seed) {
  std::vector<double> v(n);
  for (size_t i = 0; i < n; i++) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    v[i] = lo + (hi - lo) * double(seed >> 11) / double(1ull << 53);
  }
  return v;
}

struct ParamSpec {
  int rows, cols;
  double lo, hi;  // initial values drawn from [lo, hi): away from kinks and poles of the op
};

struct OpCase {
  const char* what;
  std::vector<ParamSpec> params;
  std::function<Tensor(G&, const std::vector<Tensor>&)> build;  // returns the op's output
};

const int32_t kTargets[] = {1, 4, 0, 2, 3, 3};
const int32_t kIds[] = {0, 2, 2, 5, 1, 0};

std::vector<OpCase> cases() {
  bp::IndexSpan ids{kIds, 6}, targets4{kTargets, 4};
  return {
      {"matmul a b^T", {{3, 4, -1, 1}, {5, 4, -1, 1}},
       [](G& g, auto& p) { return g.matmul(p[0], p[1], true); }},
      {"matmul a b^T 2", {{1, 8, -1, 1}, {40, 8, -1, 1}},  // b much larger: the c^T path
       [](G& g, auto& p) { return g.matmul(p[0], p[1], true); }},
      {"matmul a b", {{3, 4, -1, 1}, {4, 5, -1, 1}},
       [](G& g, auto& p) { return g.matmul(p[0], p[1], false); }},
      {"linear", {{3, 4, -1, 1}, {5, 4, -1, 1}, {1, 5, -1, 1}},
       [](G& g, auto& p) { return g.linear(p[0], p[1], p[2]); }},
      {"linear relu", {{3, 4, -1, 1}, {5, 4, -1, 1}, {1, 5, -1, 1}},
       [](G& g, auto& p) { return g.linear(p[0], p[1], p[2], true); }},
      {"add", {{3, 4, -1, 1}, {3, 4, -1, 1}}, [](G& g, auto& p) { return g.add(p[0], p[1]); }},
      {"add row", {{3, 4, -1, 1}, {1, 4, -1, 1}}, [](G& g, auto& p) { return g.add(p[0], p[1]); }},
      {"mul", {{3, 4, -1, 1}, {3, 4, -1, 1}}, [](G& g, auto& p) { return g.mul(p[0], p[1]); }},
      {"mul row", {{3, 4, -1, 1}, {1, 4, -1, 1}}, [](G& g, auto& p) { return g.mul(p[0], p[1]); }},
      {"tanh", {{3, 4, -2, 2}}, [](G& g, auto& p) { return g.tanh(p[0]); }},
      {"relu", {{3, 4, 0.1, 1}}, [](G& g, auto& p) { return g.relu(g.add(p[0], p[0])); }},
      {"relu <0", {{3, 4, -1, -0.1}}, [](G& g, auto& p) { return g.add(g.relu(p[0]), p[0]); }},
      {"gelu", {{3, 4, -3, 3}}, [](G& g, auto& p) { return g.gelu(p[0]); }},
      {"exp", {{3, 4, -1, 1}}, [](G& g, auto& p) { return g.exp(p[0]); }},
      {"log", {{3, 4, 0.5, 2}}, [](G& g, auto& p) { return g.log(p[0]); }},
      {"embedding", {{6, 3, -1, 1}}, [ids](G& g, auto& p) { return g.embedding(p[0], ids); }},
      {"view", {{4, 3, -1, 1}}, [](G& g, auto& p) { return g.tanh(g.view(p[0], 2, 6)); }},
      {"sum", {{3, 4, -1, 1}}, [](G& g, auto& p) { return g.sum(g.mul(p[0], p[0])); }},
      {"mean", {{3, 4, -1, 1}}, [](G& g, auto& p) { return g.mean(g.mul(p[0], p[0])); }},
      {"layernorm", {{4, 6, -2, 2}, {1, 6, 0.5, 1.5}, {1, 6, -1, 1}},
       [](G& g, auto& p) { return g.layernorm(p[0], p[1], p[2]); }},
      {"softmax", {{3, 5, -2, 2}}, [](G& g, auto& p) { return g.softmax(p[0]); }},
      {"attention", {{2 * 3, 3 * 4, -1, 1}},  // B=2, T=3, C=4, H=2: head size 2, the generic path
       [](G& g, auto& p) { return g.attention(p[0], 2, 3, 2); }},
      {"attention hs 4", {{1 * 3, 3 * 8, -1, 1}},  // B=1, T=3, C=8, H=2: the compiled head size
       [](G& g, auto& p) { return g.attention(p[0], 1, 3, 2); }},
      {"cross_entropy", {{4, 5, -2, 2}},
       [targets4](G& g, auto& p) { return g.cross_entropy(p[0], targets4); }},
  };
}

// loss = sum(out * R): R is an input, so only the op's parameters get gradients.
double loss_of(const OpCase& c, const std::vector<std::vector<double>>& init, G* keep = nullptr,
               std::vector<Tensor>* params_out = nullptr) {
  G local;
  G& g = keep ? *keep : local;
  std::vector<Tensor> p;
  for (size_t i = 0; i < c.params.size(); i++)
    p.push_back(g.param(c.params[i].rows, c.params[i].cols, init[i]));
  Tensor out = c.build(g, p);
  const size_t n = size_t(g.rows(out)) * g.cols(out);
  Tensor r = g.input(g.rows(out), g.cols(out), values(n, -1, 1, 99));
  Tensor loss = g.sum(g.mul(out, r));
  if (params_out) *params_out = p;
  if (keep) g.backward(loss);
  return g.data(loss)[0];
}

TEST(TensorOps, GradientsMatchCentralFiniteDifferences) {
  const double h = 1e-6, tolerance = 1e-8;  // relative to max(1, |fd|); see engine/scalar_test.cc
  std::set<bp::TensorOp> covered;
  for (const OpCase& c : cases()) {
    std::vector<std::vector<double>> init;
    for (size_t i = 0; i < c.params.size(); i++) {
      const ParamSpec& s = c.params[i];
      init.push_back(values(size_t(s.rows) * s.cols, s.lo, s.hi, 7 + i));
    }
    G g;
    std::vector<Tensor> p;
    loss_of(c, init, &g, &p);
    for (size_t i = 0; i < g.num_nodes(); i++) covered.insert(g.node(Tensor{uint32_t(i)}).op);
    double worst = 0;
    for (size_t i = 0; i < p.size(); i++)
      for (size_t j = 0; j < init[i].size(); j++) {
        auto plus = init, minus = init;
        plus[i][j] += h, minus[i][j] -= h;
        const double fd = (loss_of(c, plus) - loss_of(c, minus)) / (2 * h);
        worst = std::max(worst, std::fabs(g.grad(p[i])[j] - fd) / std::max(1.0, std::fabs(fd)));
      }
    std::printf("  %-14s max rel diff %.2e (tolerance %.0e)\n", c.what, worst, tolerance);
    EXPECT_LE(worst, tolerance) << c.what;
  }
  for (int op = 0; op < int(bp::TensorOp::count); op++)
    EXPECT_TRUE(covered.count(bp::TensorOp(op)))
        << "no gradient check exercises op " << bp::tensor_op_names[op];
}

// Two AdamW steps on one parameter, against the update written out by hand from
// torch.optim.AdamW's documented algorithm.
TEST(TensorOptim, AdamWMatchesTheDocumentedUpdate) {
  bp::AdamWConfig cfg{0.1, 0.9, 0.999, 1e-8, 0.01};
  G g;
  Tensor w = g.param(1, 1, std::vector<double>{2.0});
  double p = 2.0, m = 0, v = 0;
  for (int t = 1; t <= 2; t++) {
    g.zero_grad();
    Tensor loss = g.sum(g.mul(w, w));  // d/dw = 2w
    g.backward(loss);
    const double grad = 2 * p;
    EXPECT_DOUBLE_EQ(g.grad(w)[0], grad);
    g.adamw_step(cfg);
    g.end_step();
    p *= 1 - cfg.lr * cfg.weight_decay;
    m = cfg.beta1 * m + (1 - cfg.beta1) * grad;
    v = cfg.beta2 * v + (1 - cfg.beta2) * grad * grad;
    const double mhat = m / (1 - std::pow(cfg.beta1, t)), vhat = v / (1 - std::pow(cfg.beta2, t));
    p -= cfg.lr * mhat / (std::sqrt(vhat) + cfg.eps);
    EXPECT_NEAR(g.data(w)[0], p, 1e-12) << "step " << t;
  }
}

// The second step reuses the first step's memory: one arena block, the same peak.
TEST(TensorArena, StepsReuseTheirMemory) {
  G g;
  Tensor w = g.param(64, 32, values(64 * 32, -1, 1, 3));
  auto step = [&] {
    Tensor x = g.input(128, 32, values(128 * 32, -1, 1, 4));
    for (int i = 0; i < 4; i++) x = g.tanh(g.matmul(g.matmul(x, w, true), w, false));  // (128, 32)
    g.backward(g.mean(g.mul(x, x)));
    g.end_step();
  };
  step();
  const size_t peak = g.arena_bytes();
  for (int i = 0; i < 5; i++) step();
  EXPECT_EQ(g.arena_bytes(), peak);
  EXPECT_EQ(g.num_nodes(), 1u);
}

// A training step of a small attention model, as the workloads run it: after the first step
// (which sizes the arena) and the second (which consolidates it into one block), none allocates.
TEST(TensorArena, SteadyStateStepsAllocateNothing) {
  bp::TensorGraph<float> g;
  auto init = [](size_t n) {
    std::vector<float> v(n);
    for (size_t i = 0; i < n; i++) v[i] = float((i * 37 % 101) / 101.0 - 0.5);
    return v;
  };
  Tensor wte = g.param(10, 12, init(120)), wqkv = g.param(36, 12, init(432));
  Tensor bqkv = g.param(1, 36, init(36)), head = g.param(10, 12, init(120));
  Tensor gamma = g.param(1, 12, init(12)), beta = g.param(1, 12, init(12));
  const int32_t ids[8] = {1, 2, 3, 4, 5, 6, 7, 8}, targets[8] = {2, 3, 4, 5, 6, 7, 8, 9};
  auto step = [&] {
    g.zero_grad();
    Tensor x = g.embedding(wte, {ids, 8});                                       // (B*T, C)
    Tensor att = g.attention(g.linear(g.layernorm(x, gamma, beta), wqkv, bqkv), 2, 4, 3);
    Tensor loss = g.cross_entropy(g.matmul(g.add(x, att), head, true), {targets, 8});
    g.backward(loss);
    g.adamw_step({});
    g.end_step();
  };
  step();
  step();
  const long before = g_allocations;
  const size_t peak = g.arena_bytes();
  for (int i = 0; i < 100; i++) step();
  EXPECT_EQ(g_allocations - before, 0) << "operator new calls in 100 steady-state steps";
  EXPECT_EQ(g.step_arena_blocks(), 1u);
  EXPECT_EQ(g.arena_bytes(), peak);
}

}  // namespace
