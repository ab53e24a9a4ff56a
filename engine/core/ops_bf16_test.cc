// engine/core/ops_bf16_test.cc: mixed precision (engine/core/ops_bf16.h). The products under bf16
// are, bit for bit, bias + bf16::gemm on operands rounded to bf16 (the kernel is checked against
// the instructions' model in engine/kernels/bf16_test.cc), forward and backward, activations and
// parameters as operands, with and without ReLU, written fresh or added to; within the bound
// bf16's unit roundoff gives of the same product in double; the parameters' bf16 copies are the
// values rounded after every update and unchanged by a skipped one, and made again after a write
// through data(); the compiled mode is the eager engine under bf16 bit for bit on every model
// workload; and each model's step-0 loss and gradients are within docs/correctness.md's bf16
// tolerance of float32's. Misuse is one line.
//   build/engine_tests --gtest_filter='Bf16Ops*:Bf16Models*'
#include "engine/core/ops_bf16.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "engine/compiled/trace_test.h"
#include "engine/core/at_threads_test.h"
#include "engine/core/tensor.h"

namespace ops_bf16_test {

using bp::Precision;
using bp::Tensor;
using G32 = bp::TensorGraph<float>;

std::vector<float> random_floats(size_t n, std::mt19937& g, float scale = 1.f) {
  std::uniform_real_distribution<float> u(-scale, scale);
  std::vector<float> v(n);
  for (float& x : v) x = u(g);
  return v;
}
std::vector<uint16_t> rounded(const float* x, size_t n) {
  std::vector<uint16_t> h(n);
  for (size_t i = 0; i < n; i++) h[i] = bp::bf16::from_float(x[i]);
  return h;
}
// c += op(a) op(b) on bf16 operands, by the kernel's widened path (the same bits as any path).
void reference_product(float* c, const std::vector<uint16_t>& a, bool ta,
                       const std::vector<uint16_t>& b, bool tb, int M, int K, int N) {
  std::vector<float> scratch(
      bp::bf16::gemm_scratch_floats(M, K, N, ta, tb, bp::bf16::Path::widened));
  bp::bf16::gemm(c, {a.data(), ta, b.data(), tb}, M, K, N, scratch.data(), bp::bf16::Path::widened);
}
bool same(const float* x, const float* y, size_t n) { return std::memcmp(x, y, n * 4) == 0; }

// linear(x, w, b[, relu]) with x an activation (tanh of a parameter) and w a parameter: its
// output and the gradients of x, w and b against the reference on rounded operands.
void check_linear(int N, int C, int OC, bool relu, std::mt19937& rng) {
  G32 g;
  g.set_precision(Precision::bf16);
  const std::vector<float> xp = random_floats(size_t(N) * C, rng, 2.f),
                           wv = random_floats(size_t(OC) * C, rng), bv = random_floats(OC, rng),
                           r = random_floats(size_t(N) * OC, rng);
  const Tensor p = g.param(N, C, xp), w = g.param(OC, C, wv), b = g.param(1, OC, bv);
  const Tensor R = g.constant(N, OC, r);
  g.zero_grad();
  const Tensor x = g.tanh(p);
  const Tensor out = g.linear(x, w, b, relu);
  g.backward(g.sum(g.mul(out, R)));
  const float* xd = g.data(x);
  std::vector<float> want(size_t(N) * OC);
  for (int i = 0; i < N; i++) std::memcpy(&want[size_t(i) * OC], bv.data(), OC * 4);
  const std::vector<uint16_t> xh = rounded(xd, size_t(N) * C), wh = rounded(wv.data(), wv.size());
  reference_product(want.data(), xh, false, wh, true, N, C, OC);
  std::vector<float> grad = r;  // d out
  for (size_t i = 0; i < want.size(); i++) {
    if (relu) want[i] = want[i] < 0 ? 0.f : want[i];
    if (relu && !(want[i] > 0)) grad[i] = 0.f;
  }
  const char* what = relu ? "linear_relu" : "linear";
  EXPECT_TRUE(same(g.data(out), want.data(), want.size())) << what << " forward " << N << "x" << C;
  const std::vector<uint16_t> gh = rounded(grad.data(), grad.size());
  std::vector<float> dx(size_t(N) * C, 0.f), dw(size_t(OC) * C, 0.f), db(OC, 0.f);
  reference_product(dx.data(), gh, false, wh, false, N, OC, C);
  reference_product(dw.data(), gh, true, xh, false, OC, N, C);
  for (int i = 0; i < N; i++)
    for (int c = 0; c < OC; c++) db[c] += grad[size_t(i) * OC + c];
  EXPECT_TRUE(same(g.grad(x), dx.data(), dx.size())) << what << " dx";
  EXPECT_TRUE(same(g.grad(w), dw.data(), dw.size())) << what << " dw";
  EXPECT_TRUE(same(g.grad(b), db.data(), db.size())) << what << " db";
}

// matmul(a, b[, b^T]) of two activations: both saved in bf16 in its aux.
void check_matmul(int M, int K, int N, bool tb, std::mt19937& rng) {
  G32 g;
  g.set_precision(Precision::bf16);
  const int br = tb ? N : K, bc = tb ? K : N;
  const std::vector<float> av = random_floats(size_t(M) * K, rng, 2.f),
                           bv = random_floats(size_t(br) * bc, rng, 2.f),
                           r = random_floats(size_t(M) * N, rng);
  const Tensor pa = g.param(M, K, av), pb = g.param(br, bc, bv), R = g.constant(M, N, r);
  g.zero_grad();
  const Tensor a = g.tanh(pa), b = g.tanh(pb);
  const Tensor out = g.matmul(a, b, tb);
  g.backward(g.sum(g.mul(out, R)));
  const std::vector<uint16_t> ah = rounded(g.data(a), size_t(M) * K),
                              bh = rounded(g.data(b), size_t(br) * bc),
                              gh = rounded(r.data(), r.size());
  std::vector<float> want(size_t(M) * N, 0.f), da(size_t(M) * K, 0.f), db(size_t(br) * bc, 0.f);
  reference_product(want.data(), ah, false, bh, tb, M, K, N);
  reference_product(da.data(), gh, false, bh, !tb, M, N, K);
  if (tb)
    reference_product(db.data(), gh, true, ah, false, N, M, K);
  else
    reference_product(db.data(), ah, true, gh, false, K, M, N);
  EXPECT_TRUE(same(g.data(out), want.data(), want.size())) << "matmul forward, tb " << tb;
  EXPECT_TRUE(same(g.grad(a), da.data(), da.size())) << "matmul da, tb " << tb;
  EXPECT_TRUE(same(g.grad(b), db.data(), db.size())) << "matmul db, tb " << tb;
}

TEST(Bf16Ops, TheTableReplacesTheRulesOfExactlyTheOpsItRunsInBf16) {
  for (size_t i = 0; i < size_t(bp::TensorOp::count); i++) {
    const bool replaced = bp::op_rules<float>()[i].forward != bp::op_rules_bf16()[i].forward ||
                          bp::op_rules<float>()[i].backward != bp::op_rules_bf16()[i].backward;
    EXPECT_EQ(replaced, bp::runs_bf16(bp::TensorOp(i)) ||
                            bp::saved_in_bf16(bp::TensorOp(i)) != bp::SavedBf16::none)
        << bp::tensor_op_names[i];
    // no backward under bf16 reads a float32 activation (a parameter's copy is OpArgs::half)
    if (replaced) {
      EXPECT_FALSE(
          bp::op_rules_bf16()[i].backward_reads &
          (bp::kReadsIn0 | bp::kReadsOut | (bp::runs_bf16(bp::TensorOp(i)) ? bp::kReadsIn1 : 0)))
          << bp::tensor_op_names[i];
    }
  }
}

TEST(Bf16Ops, ProductsAreTheKernelOnOperandsRoundedToBf16) {
  std::mt19937 rng(5);
  const int shapes[][3] = {{1, 1, 1}, {3, 5, 7}, {8, 24, 72}, {17, 33, 40}, {64, 70, 19}};
  for (const auto& s : shapes)
    for (bool relu : {false, true}) check_linear(s[0], s[1], s[2], relu, rng);
  for (const auto& s : shapes)
    for (bool tb : {false, true}) check_matmul(s[0], s[1], s[2], tb, rng);
  std::printf(
      "  linear (with and without ReLU) and matmul (b transposed or not), 5 shapes: "
      "forward and every gradient bitwise the kernel on bf16-rounded operands (%s)\n",
      bp::bf16::path_name(bp::bf16::best_path()));
}

// Against double on the unrounded operands: |bf16 - exact| <= (2u + u^2) sum|x w| + the float32
// sums' (K + 1) 2^-24 (|b| + (1 + u)^2 sum|x w|), u = 2^-8 (bf16's unit roundoff).
TEST(Bf16Ops, ALinearIsWithinBf16sRoundoffOfDouble) {
  std::mt19937 rng(9);
  const int N = 32, C = 300, OC = 48;
  G32 g;
  g.set_precision(Precision::bf16);
  const std::vector<float> xv = random_floats(size_t(N) * C, rng, 3.f),
                           wv = random_floats(size_t(OC) * C, rng), bv = random_floats(OC, rng);
  const Tensor x = g.constant(N, C, xv), w = g.param(OC, C, wv), b = g.param(1, OC, bv);
  g.zero_grad();
  const float* out = g.data(g.linear(x, w, b));
  const double u = std::ldexp(1.0, -8), e32 = std::ldexp(1.0, -24);
  double worst = 0;  // error over its bound
  for (int i = 0; i < N; i++)
    for (int o = 0; o < OC; o++) {
      double exact = bv[o], magnitude = 0;
      for (int k = 0; k < C; k++) {
        exact += double(xv[size_t(i) * C + k]) * wv[size_t(o) * C + k];
        magnitude += std::fabs(double(xv[size_t(i) * C + k]) * wv[size_t(o) * C + k]);
      }
      const double bound = (2 * u + u * u) * magnitude +
                           (C + 1) * e32 * (std::fabs(bv[o]) + (1 + u) * (1 + u) * magnitude);
      worst = std::max(worst, std::fabs(out[size_t(i) * OC + o] - exact) / bound);
    }
  std::printf("  linear (%d, %d) x (%d, %d)^T: worst error %.2f of the bf16 bound\n", N, C, OC, C,
              worst);
  EXPECT_LE(worst, 1.0);
  EXPECT_GT(worst, 0.01);  // the operands were rounded: not float32's error
}

TEST(Bf16Ops, TheOptimizerKeepsEachParametersBf16CopyAndSkipsExactly) {
  std::mt19937 rng(3);
  G32 g;
  g.set_precision(Precision::bf16);
  const Tensor w = g.param(7, 9, random_floats(63, rng)), b = g.param(1, 7, random_floats(7, rng));
  const auto copy_is_rounded_values = [&] {
    for (size_t i = 0; i < g.flat_size(); i++)
      if (g.flat_halves()[i] != bp::bf16::from_float(g.flat_values()[i])) return false;
    return true;
  };
  EXPECT_TRUE(copy_is_rounded_values()) << "made from the initial values";
  const Tensor x = g.constant(5, 9, random_floats(45, rng));
  for (int step = 0; step < 4; step++) {
    g.zero_grad();
    g.backward(g.sum(g.tanh(g.linear(x, w, b))));
    step % 2 ? g.sgd_step(0.5) : g.adamw_step({.lr = 0.1});
    g.end_step();
    EXPECT_TRUE(copy_is_rounded_values()) << "after update " << step;
  }
  std::vector<float> values(g.flat_values(), g.flat_values() + g.flat_size());
  std::vector<uint16_t> halves(g.flat_halves(), g.flat_halves() + g.flat_size());
  g.zero_grad();
  g.grad(w)[3] = std::nanf("");
  g.adamw_step({});
  EXPECT_EQ(g.skipped_steps(), 1);
  EXPECT_EQ(std::memcmp(values.data(), g.flat_values(), values.size() * 4), 0);
  EXPECT_EQ(std::memcmp(halves.data(), g.flat_halves(), halves.size() * 2), 0);
}

// A parameter written through data() is what the products read under bf16 too: its bf16 copy is
// made again before the next op, eager and compiled (after the capture, and when the program runs
// again). The step's loss is that of a graph made with the written values, bit for bit; a NaN
// written in reaches the loss.
template <class Backend>
std::vector<double> losses_writing_at_step_one(const std::vector<float>& w0,
                                               const std::vector<float>& written,
                                               const std::vector<float>& x_values) {
  Backend be;
  be.graph.set_precision(Precision::bf16);
  const Tensor w = be.param(7, 9, w0), x = be.constant(5, 9, x_values);
  std::vector<double> losses;
  for (int step = 0; step < 3; step++) {
    if (step == 1) std::copy(written.begin(), written.end(), be.graph.data(w));
    be.zero_grad();
    const Tensor loss = be.sum(be.tanh(be.linear(x, w)));
    be.backward(loss);
    losses.push_back(be.loss_value(loss));
    be.end_step();
  }
  return losses;
}
template <class Backend>
void expect_written_parameters_reach_the_products(const char* name) {
  std::mt19937 rng(5);
  const std::vector<float> w0 = random_floats(63, rng), x = random_floats(45, rng);
  std::vector<float> written(63, 100.f);
  const double want = losses_writing_at_step_one<Backend>(written, written, x)[0];
  const std::vector<double> got = losses_writing_at_step_one<Backend>(w0, written, x);
  EXPECT_FALSE(same_bits(got[0], want)) << name << ": the test writes other values";
  EXPECT_TRUE(same_bits(got[1], want)) << name << " " << got[1] << " against " << want;
  EXPECT_TRUE(same_bits(got[2], want)) << name << " " << got[2] << " against " << want;
  written[3] = std::nanf("");
  EXPECT_TRUE(std::isnan(losses_writing_at_step_one<Backend>(w0, written, x)[1])) << name;
}
TEST(Bf16Ops, AParameterWrittenThroughDataReachesTheProducts) {
  expect_written_parameters_reach_the_products<bp::EngineBackend>("eager");
  expect_written_parameters_reach_the_products<bp::CompiledBackend>("compiled");
}

// Under bf16 the compiled mode runs the same rules as the eager engine in the same order: the
// same bits, on every model workload at its smallest size, over 4 updates. Against float32, the
// step-0 loss and each gradient (the norm of its difference over its norm) within 2^-3 = 32 u:
// a roundoff of u = 2^-8 on each operand of up to 50 products in sequence (mini_gpt: 25 forward,
// 25 back), less what cancels, and ReLUs that flip on rounding near zero (docs/correctness.md).
constexpr double kStepTolerance = bp::kBf16MostRelative;
TEST(Bf16Models, CompiledIsTheEagerEngineBitwiseAndWithinToleranceOfFloat32) {
  const bp::Corpus corpus = bp::load_corpus(bp::kDefaultCorpus, 1000);
  int checked = 0;
  bp::for_each_workload([&]<class W>() {
    if constexpr (bp::ModelWorkload<W>) {
      const int64_t size = model_test_sizes<W>()[0];
      const auto e = trace<W, bp::EngineBackend>(size, corpus, 4, 0, Precision::bf16);
      const auto c = trace<W, bp::CompiledBackend>(size, corpus, 4, 0, Precision::bf16);
      const auto f = trace<W, bp::EngineBackend>(size, corpus, 1);
      for (size_t i = 0; i < e.losses.size(); i++)
        EXPECT_TRUE(same_bits(e.losses[i], c.losses[i])) << W::name << " loss of step " << i;
      double worst = std::fabs(e.losses[0] - f.losses[0]) / std::fabs(f.losses[0]);
      for (size_t i = 0; i < e.step0_grads.size(); i++) {
        EXPECT_TRUE(same_bits(e.step0_grads[i], c.step0_grads[i])) << W::name << " param " << i;
        EXPECT_TRUE(same_bits(e.grads_after_updates[i], c.grads_after_updates[i]))
            << W::name << " param " << i << " after updates";
        double diff = 0, norm = 0;
        for (size_t j = 0; j < f.step0_grads[i].size(); j++) {
          const double d = double(e.step0_grads[i][j]) - f.step0_grads[i][j];
          diff += d * d, norm += double(f.step0_grads[i][j]) * f.step0_grads[i][j];
        }
        if (norm > 0) worst = std::max(worst, std::sqrt(diff / norm));
      }
      std::printf(
          "  %-14s size %-5lld compiled bf16 bitwise eager bf16; against float32 %.1e (tolerance "
          "%.3f)\n",
          std::string(W::name).c_str(), (long long)size, worst, kStepTolerance);
      EXPECT_LE(worst, kStepTolerance) << W::name;
      checked++;
    }
  });
  EXPECT_GT(checked, 0);
}

// Under bf16 too, the same bits at any thread count and way of splitting, eager and compiled.
template <class W>
void expect_bf16_bitwise_at_threads(int64_t size, const bp::Corpus& corpus) {
  const auto one_e = trace<W, bp::EngineBackend>(size, corpus, 2, 0, Precision::bf16);
  const auto one_c = trace<W, bp::CompiledBackend>(size, corpus, 2, 0, Precision::bf16);
  for (int n : {2, 3})
    for (Forced forced : kEveryWayOfSplitting) {
      AtThreads at(n, forced);
      const auto e = trace<W, bp::EngineBackend>(size, corpus, 2, 0, Precision::bf16);
      const auto c = trace<W, bp::CompiledBackend>(size, corpus, 2, 0, Precision::bf16);
      const std::string what =
          std::string(W::name) + " at " + std::to_string(n) + " threads" + forced_name(forced);
      for (size_t i = 0; i < e.losses.size(); i++) {
        EXPECT_TRUE(same_bits(e.losses[i], one_e.losses[i])) << "eager " << what;
        EXPECT_TRUE(same_bits(c.losses[i], one_c.losses[i])) << "compiled " << what;
      }
      for (size_t i = 0; i < e.step0_grads.size(); i++) {
        EXPECT_TRUE(same_bits(e.grads_after_updates[i], one_e.grads_after_updates[i]))
            << "eager " << what << " param " << i;
        EXPECT_TRUE(same_bits(c.grads_after_updates[i], one_c.grads_after_updates[i]))
            << "compiled " << what << " param " << i;
      }
    }
}
TEST(Bf16Models, BitwiseAtAnyThreadCount) {
  const bp::Corpus corpus = bp::load_corpus(bp::kDefaultCorpus, 1000);
  expect_bf16_bitwise_at_threads<bp::MiniGptWide>(1, corpus);
  expect_bf16_bitwise_at_threads<bp::CharMlp>(256, corpus);
  expect_bf16_bitwise_at_threads<bp::CharRnnWide>(8, corpus);
  std::printf(
      "  mini_gpt_wide, char_mlp, char_rnn_wide under bf16 at 2 and 3 threads, every way "
      "of splitting, eager and compiled: bitwise one thread's\n");
}

TEST(Bf16OpsDeathTest, APrecisionAfterTheFirstStepOrInDoubleIsOneLine) {
  G32 g;
  g.zero_grad();
  EXPECT_DEATH(g.set_precision(Precision::bf16),
               "set_precision: bf16 after the first step began: set the precision before it");
  bp::TensorGraph<double> d;
  EXPECT_DEATH(d.set_precision(Precision::bf16),
               "set_precision: bf16 in a graph of doubles: mixed precision is for float32 graphs");
}

}  // namespace ops_bf16_test
