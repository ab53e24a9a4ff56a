// engine/tensor_test.cc: every tensor op's gradient against central finite differences, in double.
//
// Each case builds loss = sum(op(params) * R) with a fixed random R (so every output element
// carries a different weight), takes the engine's gradient of every parameter element, and
// compares it with (loss(p + h) - loss(p - h)) / 2h. A test fails if an op in TensorOp is not
// exercised by some case. Then: the float32 kernels swept against libm and at their edges,
// AdamW against a hand-computed step, arena reuse without any allocation, and misuse stopped
// with one line naming the op and the operands' shapes.
//   ctest -R engine_tensor_test --output-on-failure
#include "engine/tensor.h"

#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <set>
#include <vector>

#include "engine/alloc_counter_test.h"
#include "engine/kernels_reference.h"
#include "engine/op_cases_test.h"
#include "engine/program.h"

namespace {

TEST(TensorOps, GradientsMatchCentralFiniteDifferences) {
  const double h = 1e-6, tolerance = 1e-8;  // relative to max(1, |fd|); see engine/scalar_test.cc
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

// The same cases through the compiled mode (engine/program.h): recorded on a record-only graph,
// compiled into a planned program and run, they must give the eager graph's loss and gradients
// bit for bit: the same rules in the same order, only at planned addresses. (The loss weights R
// are a constant here, made before the op: a record-only graph has no step inputs.)
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

// ---- the float32 kernels, which the finite-difference tests (in double) do not run ----

// Every 4099th float in range against libm in double: |got - exact| <= bound * max(|exact|,
// FLT_MIN), i.e. relative for normal results and a few denormal ulps below FLT_MIN. Measured
// worst over every 97th float: exp 1.01e-7, tanh 1.88e-7 (float epsilon is 1.19e-7).
template <class F, class Exact>
double sweep(F f, Exact exact, float lo, float hi, float* worst_at) {
  double worst = 0;
  for (uint64_t bits = 0; bits <= 0xFFFFFFFFull; bits += 4099) {
    const uint32_t b = uint32_t(bits);
    float x;
    std::memcpy(&x, &b, sizeof x);
    if (!(x >= lo && x <= hi)) continue;
    const double want = exact(double(x));
    const double err = std::fabs(double(f(x)) - want) / std::max(std::fabs(want), double(FLT_MIN));
    if (!(err <= worst)) worst = err, *worst_at = x;
  }
  return worst;
}

TEST(Kernels, ExpMatchesLibmAcrossItsRange) {
  float at = 0;
  const double worst = sweep([](float x) { return bp::exp_f32(x); },
                             [](double x) { return std::exp(x); }, -110.f, 88.72f, &at);
  std::printf("  exp_f32 on [-110, 88.72]: max error %.3g at %g (bound 2.5e-7)\n", worst, at);
  EXPECT_LE(worst, 2.5e-7);
}

TEST(Kernels, TanhMatchesLibmAcrossItsRange) {
  float at = 0;
  const double worst = sweep([](float x) { return bp::tanh_f32(x); },
                             [](double x) { return std::tanh(x); }, -20.f, 20.f, &at);
  std::printf("  tanh_f32 on [-20, 20]: max error %.3g at %g (bound 4e-7)\n", worst, at);
  EXPECT_LE(worst, 4e-7);
}

// exp overflows to inf and underflows through the denormals to 0, as libm's expf does; it is not
// clamped (it once returned 3.7e38 for exp(100) and 1.2e-38 for exp(-100)).
TEST(Kernels, ExpEdges) {
  EXPECT_EQ(bp::exp_f32(100.f), INFINITY);
  EXPECT_EQ(bp::exp_f32(89.f), INFINITY);
  EXPECT_EQ(bp::exp_f32(INFINITY), INFINITY);
  EXPECT_TRUE(std::isfinite(bp::exp_f32(88.72f)));
  EXPECT_FLOAT_EQ(bp::exp_f32(-100.f), std::exp(-100.f));  // 3.78e-44, a denormal
  EXPECT_LT(bp::exp_f32(-100.f), FLT_MIN);
  EXPECT_EQ(bp::exp_f32(-104.f), 0.f);
  EXPECT_EQ(bp::exp_f32(-INFINITY), 0.f);
  EXPECT_TRUE(std::isnan(bp::exp_f32(NAN)));
  EXPECT_EQ(bp::tanh_f32(30.f), 1.f);
  EXPECT_EQ(bp::tanh_f32(-30.f), -1.f);
  EXPECT_EQ(bp::tanh_f32(-1e-30f), -1e-30f);
}

// matmul_accumulate's paths on shapes the op cases are too small for: b transposed by a copy or
// through c^T, and gemm's packed blocks (M >= kPackMinRows; b in one block or several), in double
// against the reference dialect's one-dot-product-per-element loop (engine/kernels_reference.h).
TEST(Kernels, MatmulPathsMatchAPlainProductOnLargeShapes) {
  struct Shape {
    int32_t M, N, K;
  };
  for (const Shape& s : {Shape{33, 70, 65}, Shape{16, 32, 5}, Shape{32, 2048, 64}, Shape{7, 96, 9},
                         Shape{17, 500, 300}, Shape{64, 10, 40}})
    for (const bool ta : {false, true})
      for (const bool tb : {false, true}) {
        const std::vector<double> a = values(size_t(s.M) * s.K, -1, 1, 3),
                                  b = values(size_t(s.K) * s.N, -1, 1, 4),
                                  c0 = values(size_t(s.M) * s.N, -1, 1, 5);
        std::vector<double> got = c0, want = c0;
        std::vector<double> scratch(bp::matmul_scratch_elems(s.M, s.N, s.K, ta, tb) + 1);
        bp::matmul_accumulate(got.data(), a.data(), ta, b.data(), tb, s.M, s.N, s.K,
                              scratch.data());
        bp::reference::Gemm::run(want.data(), a.data(), ta, b.data(), tb, s.M, s.N, s.K,
                                 (double*)nullptr, false);
        double worst = 0;
        for (size_t i = 0; i < got.size(); i++)
          worst = std::max(worst, std::fabs(got[i] - want[i]));
        EXPECT_LE(worst, 1e-12) << s.M << "x" << s.N << "x" << s.K << " ta " << ta << " tb " << tb;
        std::printf("  matmul (%d, %d, %d) trans_a %d trans_b %d: max |diff| %.1e, scratch %zu\n",
                    s.M, s.N, s.K, ta, tb, worst, scratch.size() - 1);
      }
}

// Every path of the products (in place or packed, by a pass of its own or by the first band as it
// computes, the last panel whole or not; one block of b or several, kc = 256 deep; few rows panel
// by panel, kc = 512 deep, in one block or several, rows past the last whole band or none;
// edge tiles cut in rows, in columns, to a half-width panel; a transposed; b transposed through a
// copy, packed from its rows in one block or several, or through c^T) computes each element of c as
// the in-order chain of fused multiply-adds over k, bit for bit: blocking and packing move data
// only, and madd states the fusion that GCC's contraction had left out of the one-column tiles. So
// no choice of path, tile or block changes a result, and the compiled mode's recomputation and the
// eager engine agree bitwise. A fresh product (OpArgs::fresh: c uninitialised, here NaN) gives the
// bits of one added to a zeroed c, and reads nothing of c.
#if defined(__FMA__)
TEST(Kernels, MatmulIsTheInOrderFusedChainOnEveryPath) {
  struct Shape {
    int32_t M, N, K;
  };
  size_t checked = 0;
  for (const Shape& s :
       {Shape{13, 100, 64}, Shape{37, 1000, 64}, Shape{64, 10, 300}, Shape{21, 70, 33},
        Shape{17, 500, 300}, Shape{8, 33, 7}, Shape{20, 88, 8}, Shape{200, 90, 1500},
        Shape{24, 512, 300}, Shape{300, 64, 32}, Shape{16, 320, 1100}, Shape{21, 160, 1000}})
    for (const bool ta : {false, true})
      for (const bool tb : {false, true}) {
        const std::vector<double> a64 = values(size_t(s.M) * s.K, -1, 1, 6),
                                  b64 = values(size_t(s.K) * s.N, -1, 1, 7),
                                  c64 = values(size_t(s.M) * s.N, -1, 1, 8);
        const std::vector<float> a(a64.begin(), a64.end()), b(b64.begin(), b64.end());
        std::vector<float> got(c64.begin(), c64.end()), want = got;
        std::vector<float> scratch(bp::matmul_scratch_elems(s.M, s.N, s.K, ta, tb) + 1);
        bp::matmul_accumulate(got.data(), a.data(), ta, b.data(), tb, s.M, s.N, s.K,
                              scratch.data());
        for (int32_t i = 0; i < s.M; i++)
          for (int32_t j = 0; j < s.N; j++) {
            float acc = want[size_t(i) * s.N + j];
            for (int32_t k = 0; k < s.K; k++)
              acc = std::fma(ta ? a[size_t(k) * s.M + i] : a[size_t(i) * s.K + k],
                             tb ? b[size_t(j) * s.K + k] : b[size_t(k) * s.N + j], acc);
            want[size_t(i) * s.N + j] = acc;
          }
        std::vector<float> fresh(got.size(), NAN), zeroed(got.size(), 0.0f);
        bp::matmul_accumulate(fresh.data(), a.data(), ta, b.data(), tb, s.M, s.N, s.K,
                              scratch.data(), true);
        bp::matmul_accumulate(zeroed.data(), a.data(), ta, b.data(), tb, s.M, s.N, s.K,
                              scratch.data());
        size_t differ = 0, fresh_differ = 0;
        for (size_t i = 0; i < got.size(); i++) {
          differ += std::memcmp(&got[i], &want[i], sizeof(float)) != 0;
          fresh_differ += std::memcmp(&fresh[i], &zeroed[i], sizeof(float)) != 0;
        }
        EXPECT_EQ(differ, 0u) << s.M << "x" << s.N << "x" << s.K << " ta " << ta << " tb " << tb;
        EXPECT_EQ(fresh_differ, 0u)
            << "fresh " << s.M << "x" << s.N << "x" << s.K << " ta " << ta << " tb " << tb;
        checked += got.size();
      }
  std::printf("  %zu elements of c, each its in-order fused chain bit for bit, fresh or not\n",
              checked);
}
#endif

// Attention over positions as lanes (short sequences, heads of 4 and 8) against the
// position-by-position kernels, forward (outputs and probabilities) and backward (gradients
// added to nonzero ones), in float and double, the sequence shorter than the lanes or filling
// them. The same terms in the same order; the lanes fuse each multiply-add (madd), where GCC
// leaves some of the other kernels' unfused, so the two differ by roundings only (the
// finite-difference and libtorch checks cover both paths: engine/op_cases_test.h).
template <class F>
void attention_lanes_against_positions(double tolerance) {
  struct Shape {
    int32_t B, T, H, hs;
  };
  size_t checked = 0;
  double worst = 0;
  for (const Shape& s : {Shape{2, 1, 3, 4}, Shape{2, 5, 3, 4}, Shape{2, 8, 6, 4}, Shape{2, 8, 2, 8},
                         Shape{1, 13, 2, 4}, Shape{3, 16, 2, 8}, Shape{1, 9, 1, 8}}) {
    const int32_t C = s.H * s.hs, rows = s.B * s.T;
    const std::vector<double> qkv64 = values(size_t(rows) * 3 * C, -2, 2, 11),
                              dout64 = values(size_t(rows) * C, -1, 1, 12),
                              d64 = values(size_t(rows) * 3 * C, -1, 1, 13);
    const std::vector<F> qkv(qkv64.begin(), qkv64.end()), dout(dout64.begin(), dout64.end());
    const size_t np = size_t(s.B) * s.H * s.T * s.T;
    std::vector<F> out(size_t(rows) * C), probs(np), want_out(out.size()), want_probs(np, F(0));
    bp::attention_forward_any(out.data(), probs.data(), qkv.data(), s.B, s.T, s.H, s.hs);
    auto by_position = [&](auto hs_constant) {
      constexpr int HS = decltype(hs_constant)::value;
      std::vector<F> dqkv(d64.begin(), d64.end()), dp(s.T);
      bp::attention_forward<F, HS>(want_out.data(), want_probs.data(), qkv.data(), s.B, s.T, s.H,
                                   s.hs);
      bp::attention_backward<F, HS>(dqkv.data(), dp.data(), dout.data(), want_probs.data(),
                                    qkv.data(), s.B, s.T, s.H, s.hs);
      return dqkv;
    };
    const std::vector<F> want_dqkv = s.hs == 4 ? by_position(std::integral_constant<int, 4>{})
                                               : by_position(std::integral_constant<int, 8>{});
    std::vector<F> dqkv(d64.begin(), d64.end());
    bp::attention_backward_any(dqkv.data(), (F*)nullptr, dout.data(), probs.data(), qkv.data(), s.B,
                               s.T, s.H, s.hs);
    double diff = 0;  // |difference| / (|value| + 1), worst over every output
    auto compare = [&](const std::vector<F>& got, const std::vector<F>& want) {
      for (size_t i = 0; i < got.size(); i++)
        diff = worse(diff,
                     std::abs(double(got[i]) - double(want[i])) / (std::abs(double(want[i])) + 1));
    };
    compare(out, want_out), compare(probs, want_probs), compare(dqkv, want_dqkv);
    EXPECT_LE(diff, tolerance) << "B " << s.B << " T " << s.T << " H " << s.H << " hs " << s.hs;
    worst = worse(worst, diff);
    checked += out.size() + np + dqkv.size();
  }
  std::printf(
      "  %zu values (%s): max |lanes - by position| / (|by position| + 1) %.1e (tolerance %.0e)\n",
      checked, sizeof(F) == 4 ? "float" : "double", worst, tolerance);
}
TEST(Kernels, AttentionOverLanesMatchesThePositionByPositionKernel) {
  attention_lanes_against_positions<float>(1e-6);
  attention_lanes_against_positions<double>(1e-15);
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
// function (engine/alloc_counter_test.h).
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

// Segments (engine/checkpoint.h): a step reversed piece by piece. Backward over a segment from
// seeded gradients gives the chain rule's values; rewinding frees the segment's nodes and
// invalidates its handles; a stale mark, a seed of the wrong size or on a tensor without a
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
