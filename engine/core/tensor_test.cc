// engine/core/tensor_test.cc: every tensor op's gradient against central finite differences, in
// double.
//
// Each case builds loss = sum(op(params) * R) with a fixed random R (so every output element
// carries a different weight), takes the engine's gradient of every parameter element, and
// compares it with (loss(p + h) - loss(p - h)) / 2h. A test fails if an op in TensorOp is not
// exercised by some case. Then: cross-entropy of a far target, AdamW against a hand-computed
// step, arena reuse without any allocation, and misuse stopped with one line naming the op and
// the operands' shapes. (The float32 kernels alone: engine/kernels/kernels_test.cc.)
//   build/engine_tests --gtest_filter='Tensor*'      (or ctest -R Tensor)
#include "engine/core/tensor.h"

#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <set>
#include <vector>

#include "engine/compiled/program.h"
#include "engine/core/alloc_counter_test.h"
#include "engine/core/op_cases_test.h"

namespace {

TEST(TensorOps, GradientsMatchCentralFiniteDifferences) {
  const double h = 1e-6,
               tolerance = 1e-8;  // relative to max(1, |fd|); see engine/core/scalar_test.cc
  std::set<bp::TensorOp> covered;
  for (const OpCase& c : cases()) {
    const std::vector<std::vector<double>> init = init_of(c);
    G g;
    std::vector<Tensor> p;
    loss_of(c, init, &g, &p);
    for (size_t i = 0; i < g.num_nodes(); i++) covered.insert(g.node_at(i).op);
    double worst = 0;
    for (size_t i = 0; i < p.size(); i++)
      for (size_t j = 0; j < init[i].size(); j++) {
        auto plus = init, minus = init;
        plus[i][j] += h, minus[i][j] -= h;
        const double fd = (loss_of(c, plus) - loss_of(c, minus)) / (2 * h);
        worst = worse(worst, std::fabs(g.grad(p[i])[j] - fd) / std::max(1.0, std::fabs(fd)));
      }
    std::printf("  %-17s max rel diff %.2e (tolerance %.0e)\n", c.what, worst, tolerance);
    EXPECT_LE(worst, tolerance) << c.what;
  }
  for (int op = 0; op < int(bp::TensorOp::count); op++)
    EXPECT_TRUE(covered.count(bp::TensorOp(op)))
        << "no gradient check exercises op " << bp::tensor_op_names[op];
}

// The same cases through the compiled mode (engine/compiled/program.h): recorded on a record-only
// graph, compiled into a planned program and run, they must give the eager graph's loss and
// gradients bit for bit: the same rules in the same order, only at planned addresses. (The loss
// weights R are a constant here, made before the op: a record-only graph has no step inputs.)
TEST(TensorOps, CompiledProgramGivesTheEagerGradientsBitwise) {
  std::set<bp::TensorOp> covered;
  for (const OpCase& c : cases()) {
    const std::vector<std::vector<double>> init = init_of(c);
    G eager;
    std::vector<Tensor> pe;
    const double want = loss_of(c, init, &eager, &pe);
    const CompiledRun run = run_compiled<double>(c, init);
    covered.insert(run.ops.begin(), run.ops.end());
    double worst = std::fabs(run.loss - want);
    EXPECT_EQ(std::memcmp(&want, &run.loss, sizeof want), 0) << c.what << ": loss";
    for (size_t i = 0; i < pe.size(); i++) {
      const size_t n = init[i].size();
      for (size_t j = 0; j < n; j++)
        worst = worse(worst, std::fabs(eager.grad(pe[i])[j] - run.grads[i][j]));
      EXPECT_EQ(std::memcmp(eager.grad(pe[i]), run.grads[i].data(), n * sizeof(double)), 0)
          << c.what << ": gradient of parameter " << i;
    }
    std::printf("  %-17s compiled: max |compiled - eager| %.1e over %zu instructions (bitwise 0)\n",
                c.what, worst, run.instructions);
  }
  for (int op = 0; op < int(bp::TensorOp::count); op++)
    EXPECT_TRUE(covered.count(bp::TensorOp(op)) || bp::TensorOp(op) == bp::TensorOp::leaf)
        << "no compiled case exercises op " << bp::tensor_op_names[op];
}

// Cross-entropy is a log-sum-exp: a target logit 100 below the row's maximum costs 100, as in
// PyTorch (torch.nn.functional.cross_entropy(torch.tensor([[100., 0.]]), torch.tensor([1])) is
// 100.); -log of the underflowed probability gave 87.3.
TEST(Kernels, CrossEntropyOfAFarTarget) {
  bp::TensorGraph<float> g;
  const int32_t target = 1;
  bp::Tensor logits = g.param(1, 2, std::vector<float>{100.f, 0.f});
  bp::Tensor loss = g.cross_entropy(logits, {&target, 1});
  EXPECT_FLOAT_EQ(g.data(loss)[0], 100.f);
  g.backward(loss);
  EXPECT_FLOAT_EQ(g.grad(logits)[0], 1.f);  // softmax - onehot
  EXPECT_FLOAT_EQ(g.grad(logits)[1], -1.f);
}

// A row far below zero: exp of every term underflows in float, so logsumexp must subtract the
// row's maximum (torch.logsumexp(torch.tensor([[-1000., -1001.]]), 1) is -999.6867).
TEST(Kernels, LogsumexpOfAFarRow) {
  bp::TensorGraph<float> g;
  bp::Tensor x = g.param(2, 2, std::vector<float>{-1000.f, -1001.f, 0.f, 0.f});
  bp::Tensor out = g.logsumexp(x);
  EXPECT_FLOAT_EQ(g.data(out)[0], -1000.f + std::log1p(std::exp(-1.f)));
  EXPECT_FLOAT_EQ(g.data(out)[1], std::log(2.f));
  g.backward(g.sum(out));
  // The row's softmax, from the output as torch takes it: exp(x - out), where out near -1000
  // holds 6e-5 of rounding.
  EXPECT_NEAR(g.grad(x)[0], 1 / (1 + std::exp(-1.f)), 1e-4);
  EXPECT_NEAR(g.grad(x)[1], 1 - 1 / (1 + std::exp(-1.f)), 1e-4);
  EXPECT_FLOAT_EQ(g.grad(x)[2], 0.5f);
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
// (which sizes the arena, the tape and the optimizer state), none allocates, by any allocation
// function (engine/core/alloc_counter_test.h).
TEST(TensorArena, SteadyStateStepsAllocateNothing) {
  if (!kCountingAllocations) GTEST_SKIP() << "AddressSanitizer owns malloc here";
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
    Tensor x = g.embedding(wte, {ids, 8});  // (B*T, C)
    Tensor att = g.attention(g.linear(g.layernorm(x, gamma, beta), wqkv, bqkv), 2, 4, 3);
    Tensor loss = g.cross_entropy(g.matmul(g.add(x, att), head, true), {targets, 8});
    g.backward(loss);
    g.adamw_step({});
    g.end_step();
  };
  step();
  const long before = g_allocations;
  const size_t peak = g.arena_bytes(), blocks = g.step_arena_blocks();
  for (int i = 0; i < 100; i++) step();
  EXPECT_EQ(g_allocations - before, 0) << "heap allocations in the 100 steps after the first";
  EXPECT_EQ(g.step_arena_blocks(), blocks);
  EXPECT_EQ(g.arena_bytes(), peak);
}

// A segment rewound and run again (Revolve's advance, engine/backend.h) lands where it did the
// first time, in memory already paged in: no allocation, the same addresses. Freeing the block it
// had added, as the arena once did, paged a new one in at every step of char_rnn_wide's sweep.
TEST(TensorArena, ARewoundSegmentReusesItsBlocks) {
  if (!kCountingAllocations) GTEST_SKIP() << "AddressSanitizer owns malloc here";
  bp::Arena<float> arena;
  float* start = arena.alloc(1000);
  const auto mark = arena.mark();
  float* first = arena.alloc(size_t(1) << 20);  // beyond the first block: a second one
  const size_t blocks = arena.num_blocks();
  arena.rewind(mark);
  const long before = g_allocations;
  for (int i = 0; i < 10; i++) {
    EXPECT_EQ(arena.alloc(size_t(1) << 20), first);
    arena.rewind(mark);
  }
  EXPECT_EQ(g_allocations - before, 0);
  EXPECT_EQ(arena.num_blocks(), blocks);
  EXPECT_EQ(arena.used(), 1008u);  // 1000 rounded up to whole cache lines
  arena.reset();
  EXPECT_EQ(arena.used(), 0u);
  EXPECT_EQ(arena.alloc(1000), start);
}

// The counter sees an arena's growth (aligned_alloc), or the test above could not fail.
TEST(TensorArena, ArenaGrowthIsCounted) {
  if (!kCountingAllocations) GTEST_SKIP() << "AddressSanitizer owns malloc here";
  bp::Arena<float> arena;
  arena.alloc(16);
  const long before = g_allocations;
  arena.alloc(size_t(1) << 20);  // beyond the first block
  EXPECT_GT(g_allocations - before, 0);
  EXPECT_EQ(arena.num_blocks(), 2u);
}

// ---- the contract at the edges: each misuse stops with one line naming the op and shapes ----

// relu follows PyTorch at NaN and -0: relu(NaN) is NaN and passes its gradient (torch's
// threshold_backward zeroes only where the output is <= 0), relu(-0) is -0. A NaN turned into 0
// would vanish before the check sees it, and through the fused linear+ReLU it zeroed a finite
// input's gradient as well. Loss = sum(out * R) with loss_of's fixed R: eager and compiled.
TEST(TensorOps, ReluPassesNanAndItsGradientAsPyTorch) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<double> R = values(5, -1, 1, 99);
  const OpCase relu =
      op_case("relu nan", {{1, 5, 0, 0}}, [](auto& g, auto& p) { return g.relu(p[0]); });
  const std::vector<std::vector<double>> x{{nan, -0.0, 0.0, 2.0, -1.0}};
  const bool pass[5] = {true, false, false, true, false};
  G g;
  std::vector<Tensor> p;
  loss_of(relu, x, &g, &p);
  G direct;  // the values themselves: NaN, -0, 0, 2, 0 (the sign of -0 kept)
  const double* out = direct.data(direct.relu(direct.param(1, 5, x[0])));
  EXPECT_TRUE(std::isnan(out[0]));
  EXPECT_TRUE(out[1] == 0 && std::signbit(out[1]));
  EXPECT_TRUE(out[2] == 0 && !std::signbit(out[2]) && out[3] == 2 && out[4] == 0);
  const CompiledRun compiled = run_compiled<double>(relu, x);
  for (int i = 0; i < 5; i++) {
    const double want = pass[i] ? R[i] : 0.0;
    EXPECT_EQ(g.grad(p[0])[i], want) << "eager, element " << i;
    EXPECT_EQ(compiled.grads[0][i], want) << "compiled, element " << i;
  }
  EXPECT_TRUE(std::isnan(compiled.loss));
  // linear+relu: x (1, 2) = [1, 2], W (2, 2) = [[NaN, 1], [1, 1]]: out = [NaN, 3], and
  // dL/dx = R0 W[0] + R1 W[1] = [NaN, R0 + R1] (torch: [nan, 2.] with R = 1).
  const OpCase linear = op_case("linear relu nan", {{1, 2, 0, 0}, {2, 2, 0, 0}, {1, 2, 0, 0}},
                                [](auto& g, auto& p) { return g.linear(p[0], p[1], p[2], true); });
  const std::vector<std::vector<double>> in{{1, 2}, {nan, 1, 1, 1}, {0, 0}};
  G gl;
  std::vector<Tensor> pl;
  loss_of(linear, in, &gl, &pl);
  const CompiledRun compiled_linear = run_compiled<double>(linear, in);
  for (const double* dx :
       {static_cast<const double*>(gl.grad(pl[0])), compiled_linear.grads[0].data()}) {
    EXPECT_TRUE(std::isnan(dx[0]));
    EXPECT_EQ(dx[1], R[0] + R[1]);
  }
}

TEST(TensorContractDeathTest, EveryOperandShapeIsChecked) {
  G g;
  Tensor x = g.param(4, 24, values(96, -1, 1, 1));
  Tensor gamma23 = g.param(1, 23, values(23, -1, 1, 2)),
         beta = g.param(1, 24, values(24, -1, 1, 3));
  Tensor w = g.param(5, 3, values(15, -1, 1, 4)), b = g.param(1, 5, values(5, -1, 1, 5));
  Tensor qkv = g.param(8, 72, values(576, -1, 1, 6));
  // layernorm once read past a short gamma and wrote into its neighbour's gradient
  EXPECT_DEATH(g.layernorm(x, gamma23, beta),
               "TensorGraph::layernorm: x \\(4, 24\\), gamma \\(1, 23\\), beta \\(1, 24\\): gamma "
               "and beta must be \\(1, 24\\)");
  EXPECT_DEATH(g.layernorm(x, beta, gamma23), "beta \\(1, 23\\)");
  EXPECT_DEATH(g.linear(x, w, b), "TensorGraph::linear: x \\(4, 24\\), w \\(5, 3\\), b \\(1, 5\\)");
  EXPECT_DEATH(g.matmul(x, w, false), "TensorGraph::matmul: a \\(4, 24\\), b \\(5, 3\\)");
  EXPECT_DEATH(g.add(x, w), "TensorGraph::add: x \\(4, 24\\), y \\(5, 3\\)");
  EXPECT_DEATH(g.sub(x, w), "TensorGraph::sub: x \\(4, 24\\), y \\(5, 3\\)");
  EXPECT_DEATH(g.div(w, b),
               "TensorGraph::div: x \\(5, 3\\), y \\(1, 5\\): y must have x's shape or be "
               "one row \\(1, 3\\)");
  EXPECT_DEATH(g.view(x, 5, 5), "TensorGraph::view: x \\(4, 24\\) cannot be viewed as \\(5, 5\\)");
  EXPECT_DEATH(g.view(x, -4, -24), "cannot be viewed as \\(-4, -24\\)");
  // attention with H = 0 died of a division by zero; negative sizes read out of bounds
  EXPECT_DEATH(g.attention(qkv, 2, 4, 0), "TensorGraph::attention: qkv \\(8, 72\\), B=2, T=4, H=0");
  EXPECT_DEATH(g.attention(qkv, -2, -4, 3), "B=-2, T=-4, H=3: B, T and H must each be at least 1");
  EXPECT_DEATH(g.attention(qkv, 2, 4, 5),
               "need qkv \\(B\\*T, 3C\\) = \\(8, 3C\\) with C a multiple of H");
  EXPECT_DEATH(g.attention(qkv, 4, 4, 3), "= \\(16, 3C\\)");
  const int32_t bad_index = 9, ids[2] = {0, 1};
  EXPECT_DEATH(g.embedding(w, {&bad_index, 1}),
               "TensorGraph::embedding: table \\(5, 3\\), index 9");
  EXPECT_DEATH(g.embedding(w, {ids, -1}), "-1 indices");
  EXPECT_DEATH(g.cross_entropy(w, {ids, 2}),
               "TensorGraph::cross_entropy: logits \\(5, 3\\), 2 targets");
  const int32_t targets5[5] = {0, 1, 2, 3, 1};
  EXPECT_DEATH(g.nll(w, {targets5, 5}),
               "TensorGraph::nll: logp \\(5, 3\\), target 3 at row 3: valid targets are 0 to 2");
  EXPECT_DEATH(g.param(-1, 3, std::vector<double>{}), "TensorGraph::param: shape \\(-1, 3\\)");
  EXPECT_DEATH(g.param(2, 3, std::vector<double>(5)), "shape \\(2, 3\\) holds 6 values; 5 given");
}

TEST(TensorContractDeathTest, EmptyForeignAndStaleHandlesAreRefused) {
  G g, other;
  Tensor w = g.param(2, 2, values(4, -1, 1, 1)), foreign = other.param(2, 2, values(4, -1, 1, 2));
  EXPECT_DEATH(g.tanh(Tensor{}), "TensorGraph::tanh: an operand is an empty Tensor handle");
  EXPECT_DEATH(g.add(w, foreign), "TensorGraph::add: an operand belongs to another TensorGraph");
  Tensor h = g.tanh(w);
  g.end_step();
  Tensor reused = g.relu(w);  // takes h's place on the tape
  (void)reused;
  EXPECT_DEATH(g.mul(h, w), "TensorGraph::mul: an operand was made before the last end_step");
  EXPECT_DEATH(g.data(h), "TensorGraph::data: an operand was made before the last end_step");
  EXPECT_NE(g.data(w), nullptr);  // parameters outlive steps
}

// Segments (engine/checkpoint/checkpoint.h): a step reversed piece by piece. Backward over a
// segment from seeded gradients gives the chain rule's values; rewinding frees the segment's nodes
// and invalidates its handles; a stale mark, a seed of the wrong size or on a tensor without a
// gradient stops with one line.
TEST(TensorContractDeathTest, SegmentsSeedRewindAndRefuseMisuse) {
  G g;
  Tensor w = g.param(1, 3, std::vector<double>{1, 2, 3});
  const auto mark = g.mark();
  Tensor x = g.state(1, 3, std::vector<double>{0.5, -1, 2});  // d/dx of sum(w*x) is w
  Tensor loss = g.sum(g.mul(w, x));
  g.seed_grad(loss, std::vector<double>{1});
  g.backward_since(mark);
  EXPECT_EQ(g.grad(x)[1], 2.0);
  EXPECT_EQ(g.grad(w)[2], 2.0);
  EXPECT_DEATH(g.seed_grad(loss, std::vector<double>{1, 2}),
               "TensorGraph::seed_grad: \\(1, 1\\) holds 1 values; 2 given");
  Tensor c = g.input(1, 3, std::vector<double>{1, 1, 1});
  EXPECT_DEATH(g.seed_grad(c, std::vector<double>{1, 1, 1}),
               "TensorGraph::seed_grad: \\(1, 3\\) has no gradient");
  g.rewind(mark);
  EXPECT_EQ(g.num_nodes(), g.num_params());
  EXPECT_DEATH(g.data(x),
               "TensorGraph::data: an operand was made before the last end_step.. or rewind");
  EXPECT_DEATH(g.rewind(mark),
               "TensorGraph::rewind: the mark .node 1 of step 0. is not of this step");
  EXPECT_EQ(g.grad(w)[2], 2.0);  // parameters and their gradients stay
}

// PyTorch refuses a second backward through one graph; here it would add every gradient again.
TEST(TensorContractDeathTest, SecondBackwardIsRefused) {
  G g;
  Tensor w = g.param(1, 3, std::vector<double>{1, 2, 3});
  Tensor loss = g.sum(g.mul(w, w));
  g.backward(loss);
  EXPECT_EQ(g.grad(w)[2], 6.0);
  EXPECT_DEATH(g.backward(loss), "TensorGraph::backward: called twice in one step");
  g.end_step();
  g.zero_grad();
  g.backward(g.sum(g.mul(w, w)));  // the next step may
  EXPECT_EQ(g.grad(w)[2], 6.0);
}

}  // namespace
