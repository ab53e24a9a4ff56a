// engine/core/scalar_test.cc: the scalar engine against central finite differences in double.
//
// Every op's gradient is checked (a test fails if an op in ScalarOp has no row here), then the
// properties the engine promises: diamonds accumulate, a million-node chain walks without
// recursion, reset keeps parameters and capacity, steady-state steps allocate nothing (by any
// allocation function, the tape's realloc included), and misuse stops with one clear line.
//   build/engine_tests --gtest_filter='Scalar*'      (or ctest -R Scalar)
#include "engine/core/scalar.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <new>
#include <set>

#include "engine/core/alloc_counter_test.h"

namespace {

using Tape = bp::ScalarTape<double>;
using S = bp::Scalar<double>;
using BinaryFn = std::function<S(S, S)>;

struct ScalarOpCase {
  const char* what;
  BinaryFn f;
  double x, y;       // where the gradient is taken (away from kinks and poles)
  double tolerance;  // on |analytic - finite difference|, relative to max(1, |fd|)
};

// Central differences with h = 1e-6: truncation error O(h^2 f''') ~ 1e-12, rounding O(eps/h) ~
// 1e-10, so 1e-8 leaves room for the larger second derivatives of exp and pow.
const double kStep = 1e-6;

std::vector<ScalarOpCase> op_cases() {
  return {
      {"add", [](S a, S b) { return a + b; }, 0.3, -1.7, 1e-8},
      {"sub", [](S a, S b) { return a - b; }, 0.3, -1.7, 1e-8},
      {"mul", [](S a, S b) { return a * b; }, 0.3, -1.7, 1e-8},
      {"div", [](S a, S b) { return a / b; }, 0.3, -1.7, 1e-8},
      {"neg", [](S a, S b) { return -a * b; }, 0.3, -1.7, 1e-8},
      {"pow 3", [](S a, S) { return pow(a, 3.0); }, 1.3, 0.0, 1e-8},
      {"pow 2.5", [](S a, S) { return pow(a, 2.5); }, 1.3, 0.0, 1e-8},
      {"pow -1", [](S a, S) { return pow(a, -1.0); }, 1.3, 0.0, 1e-8},
      {"pow 0 at 0", [](S a, S b) { return pow(a, 0.0) * b; }, 0.0, 1.7, 1e-8},  // PyTorch: 0
      {"exp", [](S a, S b) { return exp(a * b); }, 0.3, -1.7, 1e-8},
      {"log", [](S a, S b) { return log(a * a + b); }, 0.3, 1.7, 1e-8},
      {"tanh", [](S a, S b) { return tanh(a - b); }, 0.3, -0.2, 1e-8},
      {"relu +", [](S a, S b) { return relu(a * b); }, 0.3, 1.7, 1e-8},
      {"relu -", [](S a, S b) { return relu(a * b) + a; }, 0.3, -1.7, 1e-8},
      {"const +", [](S a, S b) { return 2.0 + a + b * 3.0; }, 0.3, -1.7, 1e-8},
      {"const -", [](S a, S b) { return 2.0 - a - b; }, 0.3, -1.7, 1e-8},
      {"const /", [](S a, S b) { return 10.0 / a + b / 4.0; }, 0.3, -1.7, 1e-8},
      {"compound",
       [](S a, S b) {
         S c = a;
         c += b;
         c *= a;
         c -= 1.0;
         c /= b;
         return c;
       },
       0.3, -1.7, 1e-8},
  };
}

double eval(const BinaryFn& f, double x, double y) {
  Tape tape;
  S a = tape.param(x), b = tape.param(y);
  return f(a, b).value();
}

TEST(ScalarOps, GradientsMatchCentralFiniteDifferences) {
  std::set<bp::ScalarOp> covered;
  for (const ScalarOpCase& c : op_cases()) {
    Tape tape;
    S a = tape.param(c.x), b = tape.param(c.y);
    S out = c.f(a, b);
    for (size_t i = 0; i < tape.size(); i++) covered.insert(tape.node(uint32_t(i)).op);
    tape.backward(out);
    const double fd_a = (eval(c.f, c.x + kStep, c.y) - eval(c.f, c.x - kStep, c.y)) / (2 * kStep);
    const double fd_b = (eval(c.f, c.x, c.y + kStep) - eval(c.f, c.x, c.y - kStep)) / (2 * kStep);
    const double diff = std::max(std::fabs(a.grad() - fd_a) / std::max(1.0, std::fabs(fd_a)),
                                 std::fabs(b.grad() - fd_b) / std::max(1.0, std::fabs(fd_b)));
    std::printf(
        "  %-9s d/da %+.10f (fd %+.10f)  d/db %+.10f (fd %+.10f)  max rel diff %.2e "
        "(tolerance %.0e)\n",
        c.what, a.grad(), fd_a, b.grad(), fd_b, diff, c.tolerance);
    EXPECT_LE(diff, c.tolerance) << c.what;
  }
  for (int op = 0; op < int(bp::ScalarOp::count); op++)
    EXPECT_TRUE(covered.count(bp::ScalarOp(op)))
        << "no gradient check exercises op " << bp::scalar_op_names[op];
}

// A node used twice must receive both contributions: y = a*a + a at a = 3 has dy/da = 2a + 1 = 7.
TEST(ScalarEngine, DiamondAccumulates) {
  Tape tape;
  S a = tape.param(3.0);
  S shared = a * 1.0;
  S y = shared * shared + shared;
  tape.backward(y);
  EXPECT_DOUBLE_EQ(y.value(), 12.0);
  EXPECT_DOUBLE_EQ(a.grad(), 7.0);
}

// One million nodes in one chain: the walk is a loop, so nothing grows with depth but the tape.
TEST(ScalarEngine, MillionNodeChain) {
  Tape tape;
  S x = tape.param(1.0);
  S y = x;
  const int links = 500'000;  // two nodes each: the constant and the product
  const double k = 1.000001;
  for (int i = 0; i < links; i++) y = y * k;
  ASSERT_GE(tape.size(), 1'000'000u);
  tape.backward(y);
  const double expected = std::pow(k, links);
  const double rel = std::fabs(x.grad() - expected) / expected;
  std::printf("  %zu nodes: dy/dx %.12f, expected %.12f, rel diff %.2e (tolerance 1e-9)\n",
              tape.size(), x.grad(), expected, rel);
  EXPECT_LE(rel, 1e-9);
}

// A step as the workloads run it: build, backward, read, reset.
double micrograd_step(Tape& tape, S a, S b, double* ga, double* gb) {
  S c = a + b;
  S d = a * b + pow(b, 3.0);
  c += c + 1.0;
  c += 1.0 + c + (-a);
  d += d * 2.0 + (b + a).relu();
  d += 3.0 * d + (b - a).relu();
  S e = c - d;
  S f = pow(e, 2.0);
  S g = f / 2.0;
  g += 10.0 / f;
  tape.backward(g);
  *ga = a.grad(), *gb = b.grad();
  const double out = g.value();
  tape.reset();
  return out;
}

TEST(ScalarEngine, ResetKeepsParametersAndCapacity) {
  Tape tape;
  S a = tape.param(-4.0), b = tape.param(2.0);
  double ga1, gb1, ga2, gb2;
  const double g1 = micrograd_step(tape, a, b, &ga1, &gb1);
  const size_t bytes = tape.arena_bytes();
  const double g2 = micrograd_step(tape, a, b, &ga2, &gb2);
  EXPECT_EQ(tape.size(), 2u);  // only the parameters are left
  EXPECT_EQ(a.grad(), 0.0);    // and their gradients are cleared
  EXPECT_EQ(g1, g2);           // the second step sees exactly what the first did
  EXPECT_EQ(ga1, ga2);
  EXPECT_EQ(gb1, gb2);
  EXPECT_EQ(tape.arena_bytes(), bytes);
  EXPECT_NEAR(g1, 24.7041, 5e-5);  // micrograd README, four decimals
  EXPECT_NEAR(ga1, 138.8338, 5e-5);
  EXPECT_NEAR(gb1, 645.5773, 5e-5);
}

TEST(ScalarEngine, SteadyStateStepsAllocateNothing) {
  if (!kCountingAllocations) GTEST_SKIP() << "AddressSanitizer owns malloc here";
  Tape tape(0);  // no reservation: the first step grows the tape several times
  S a = tape.param(-4.0), b = tape.param(2.0);
  double ga, gb;
  micrograd_step(tape, a, b, &ga, &gb);  // the first step sizes the tape
  const long before = g_allocations;
  const uint32_t growths = tape.growths();
  for (int i = 0; i < 1000; i++) micrograd_step(tape, a, b, &ga, &gb);
  EXPECT_EQ(g_allocations - before, 0) << "heap allocations in 1000 steady-state steps";
  EXPECT_EQ(tape.growths(), growths) << "the tape was reallocated in steady state";
}

// The counter above must see the tape's own reallocation, or the test could not fail: a step
// with a larger graph than any before it grows the tape, and both counts say so.
TEST(ScalarEngine, TapeRegrowthIsCounted) {
  if (!kCountingAllocations) GTEST_SKIP() << "AddressSanitizer owns malloc here";
  Tape tape(0);
  S a = tape.param(1.0);
  S y = a;
  for (int i = 0; i < 10; i++) y = y * a;
  tape.reset();
  const long before = g_allocations;
  const uint32_t growths = tape.growths();
  y = a;
  for (int i = 0; i < 10000; i++) y = y * a;
  EXPECT_GT(g_allocations - before, 0) << "realloc of the tape went unseen";
  EXPECT_GT(tape.growths(), growths);
}

TEST(ScalarEngine, GrowsFromAnEmptyReservation) {
  Tape tape(0);
  S x = tape.param(2.0);
  S y = x;
  for (int i = 0; i < 1000; i++) y = y * 1.0;
  tape.backward(y);
  EXPECT_EQ(x.grad(), 1.0);
  EXPECT_GE(tape.arena_bytes(), tape.size() * sizeof(bp::ScalarNode<double>));
}

TEST(ScalarEngine, FloatPrecision) {
  bp::ScalarTape<float> tape;
  auto a = tape.param(-41.0f), b = tape.param(2.0f);
  auto g = pow((a + b) - (a * b + pow(b, 3.0f)), 2.0f) / 2.0f;
  tape.backward(g);
  EXPECT_FLOAT_EQ(g.value(), 612.5f);
  EXPECT_FLOAT_EQ(a.grad(), -35.0f);
  EXPECT_FLOAT_EQ(b.grad(), 1050.0f);
}

TEST(ScalarEngineDeathTest, ParamAfterGraphIsRefused) {
  Tape tape;
  S a = tape.param(1.0);
  (void)(a * 2.0);
  EXPECT_DEATH(tape.param(2.0), "create all parameters before building a graph");
}

TEST(ScalarEngineDeathTest, MixingTapesIsRefused) {
  Tape t1, t2;
  S a = t1.param(1.0), b = t2.param(2.0);
  EXPECT_DEATH((void)(a + b), "ScalarTape::add: an operand belongs to another tape");
}

TEST(ScalarEngineDeathTest, EmptyHandleIsRefused) {
  Tape tape;
  S a = tape.param(1.0), empty;
  EXPECT_DEATH((void)(empty * a), "ScalarTape::mul: an operand is an empty Scalar handle");
  EXPECT_DEATH((void)(a - empty), "ScalarTape::sub: an operand is an empty Scalar handle");
  EXPECT_DEATH((void)empty.value(), "ScalarTape::value: an operand is an empty Scalar handle");
  EXPECT_DEATH((void)tanh(empty), "ScalarTape::tanh: an operand is an empty Scalar handle");
}

// A handle kept across reset() points at a slot the next step reuses: refused, even when that
// slot is occupied again.
TEST(ScalarEngineDeathTest, HandleFromAnEarlierStepIsRefused) {
  Tape tape;
  S a = tape.param(1.0);
  S old = a * 2.0;
  tape.reset();
  S fresh = a * 3.0;  // occupies old's slot
  (void)fresh;
  EXPECT_DEATH((void)(old + a), "ScalarTape::add: an operand was made before the last reset");
  EXPECT_DEATH((void)old.grad(), "ScalarTape::grad: an operand was made before the last reset");
  S kept = a + 1.0;  // parameters outlive steps
  EXPECT_EQ(kept.value(), 2.0);
}

// PyTorch refuses a second backward through one graph; here it would add every gradient again.
TEST(ScalarEngineDeathTest, SecondBackwardIsRefused) {
  Tape tape;
  S a = tape.param(3.0);
  S y = a * a;
  tape.backward(y);
  EXPECT_EQ(a.grad(), 6.0);
  EXPECT_DEATH(tape.backward(y), "ScalarTape::backward: called twice on one graph");
  tape.reset();
  S z = a * a;
  tape.backward(z);  // a new step may
  EXPECT_EQ(a.grad(), 6.0);
}

}  // namespace
