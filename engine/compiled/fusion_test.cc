// engine/compiled/fusion_test.cc: the compiled mode's fused groups (engine/compiled/fusion.h) bit
// for bit the eager engine: every model workload, and random chains of elementwise and row-wise
// ops, with tiles small enough that the tests' small shapes form groups; and what a group saves,
// at the default sizes, on gmm_d10_tensor.
//   build/engine_tests --gtest_filter='CompiledFusion*'
#include <gtest/gtest.h>

#include <cstdio>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "engine/compiled/trace_test.h"

namespace {

// Tiles of 64 elements, groups from 64: every chain of the tests' shapes is a group.
struct SmallTiles {
  bp::FusionSizes saved = bp::fusion_sizes();
  SmallTiles() { bp::fusion_sizes() = {64, 64}; }
  ~SmallTiles() { bp::fusion_sizes() = saved; }
};

template <class W>
void expect_same_trace(const Trace<W, bp::EngineBackend>& e, const Trace<W, bp::CompiledBackend>& c,
                       int64_t size) {
  for (size_t i = 0; i < e.losses.size(); i++)
    EXPECT_TRUE(same_bits(e.losses[i], c.losses[i])) << W::name << " " << size << " loss " << i;
  ASSERT_EQ(e.step0_grads.size(), c.step0_grads.size());
  for (size_t i = 0; i < e.step0_grads.size(); i++) {
    EXPECT_TRUE(same_bits(e.step0_grads[i], c.step0_grads[i])) << W::name << " param " << i;
    EXPECT_TRUE(same_bits(e.grads_after_updates[i], c.grads_after_updates[i]))
        << W::name << " param " << i << " after the updates";
  }
}

TEST(CompiledFusion, EveryModelWorkloadInSmallTilesIsBitwiseTheEagerEngine) {
  const bp::Corpus corpus = bp::load_corpus(bp::kDefaultCorpus, 1000);
  const SmallTiles small;
  size_t groups = 0;
  bp::for_each_workload([&]<class W>() {
    if constexpr (bp::ModelWorkload<W>) {
      const int64_t size = model_test_sizes<W>()[0];
      expect_same_trace<W>(trace<W, bp::EngineBackend>(size, corpus, 4),
                           trace<W, bp::CompiledBackend>(size, corpus, 4), size);
      bp::CompiledBackend be;
      typename W::template Run<bp::CompiledBackend> run(be, size, corpus);
      run.step(be);
      const auto& p = be.program;
      std::printf("  %-14s size %-5lld %3zu groups of %4zu instructions, moved %8.1f of %8.1f KB\n",
                  std::string(W::name).c_str(), (long long)size, p.fusion().groups(),
                  p.fusion().fused_instructions(), p.bytes_moved() / 1e3,
                  p.bytes_moved_unfused() / 1e3);
      groups += p.fusion().groups();
    }
  });
  EXPECT_GT(groups, 0u);
}

// A random chain over one (rows, cols) tensor: elementwise ops with a parameter of its shape or
// a constant row broadcast, squares, views between; the loss is its sum, or the sum of its row
// sums or of its rows' log-sum-exps (the row-wise ops that end a group). Drawn once from its
// seed, made on each backend from the same values.
struct Chain {
  int32_t rows, cols;
  std::vector<int> ops;
  int end;  // 0: sum; 1: sum of row sums; 2: sum of log-sum-exps
  std::vector<std::vector<float>> params, rows_of_constants;  // (rows, cols) each; (1, cols) each
  Chain(uint32_t seed, int32_t r, int32_t c) : rows(r), cols(c) {
    std::mt19937 pick(seed);
    auto values = [&](size_t n, double lo, double hi) {
      std::uniform_real_distribution<double> d(lo, hi);
      std::vector<float> v(n);
      for (float& x : v) x = float(d(pick));
      return v;
    };
    params.push_back(values(size_t(rows) * cols, -1, 1));
    const int count = 4 + int(pick() % 6);
    for (int i = 0; i < count; i++) {
      ops.push_back(int(pick() % 8));
      if (ops.back() == 0) params.push_back(values(size_t(rows) * cols, -1, 1));
      if (ops.back() == 1) rows_of_constants.push_back(values(size_t(cols), -1, 1));
      if (ops.back() == 4) rows_of_constants.push_back(values(size_t(cols), 1, 2));
    }
    end = int(pick() % 3);
  }
  template <class B>
  struct On {  // the chain's tensors on backend B, made before its first step
    std::vector<typename B::Tensor> params, constants;
    On(B& be, const Chain& c) {
      for (const auto& v : c.params) params.push_back(be.param(c.rows, c.cols, v));
      for (const auto& v : c.rows_of_constants) constants.push_back(be.constant(1, c.cols, v));
    }
  };
  template <class B>
  typename B::Tensor loss(B& be, const On<B>& t) const {
    typename B::Tensor x = t.params[0];
    size_t p = 1, k = 0;
    for (int op : ops) switch (op) {
        case 0: x = be.mul(x, t.params[p++]); break;
        case 1: x = be.add(x, t.constants[k++]); break;
        case 2: x = be.tanh(x); break;
        case 3: x = be.sigmoid(x); break;
        case 4: x = be.log(be.add(be.exp(x), t.constants[k++])); break;
        case 5: x = be.mul(x, x); break;
        case 6: x = be.add(x, x); break;
        default: x = be.view(be.relu(be.view(x, rows * 2, cols / 2)), rows, cols); break;
      }
    return be.sum(end == 0 ? x : end == 1 ? be.sum_rows(x) : be.logsumexp(x));
  }
};

// Two steps (captured, then replayed): each loss and every parameter's gradient.
template <class B>
std::vector<std::vector<float>> chain_steps(const Chain& chain) {
  B be;
  const typename Chain::template On<B> t(be, chain);
  std::vector<std::vector<float>> out;
  for (int step = 0; step < 2; step++) {
    be.zero_grad();
    const auto loss = chain.loss(be, t);
    be.backward(loss);
    out.push_back({float(be.loss_value(loss))});
    for (const auto& p : t.params) {
      std::vector<float> g(size_t(chain.rows) * chain.cols);
      be.read_grad(p, g);
      out.push_back(g);
    }
    be.end_step();
  }
  if constexpr (std::is_same_v<B, bp::CompiledBackend>)
    out.push_back({float(be.program.fusion().groups())});
  return out;
}

TEST(CompiledFusion, RandomChainsInSmallTilesAreBitwiseTheEagerEngine) {
  const SmallTiles small;
  size_t groups = 0;
  for (uint32_t seed = 1; seed <= 40; seed++) {
    const Chain chain(seed, 64 << (seed % 3), 32);
    const auto e = chain_steps<bp::EngineBackend>(chain);
    auto c = chain_steps<bp::CompiledBackend>(chain);
    groups += size_t(c.back()[0]);
    c.pop_back();
    ASSERT_EQ(e.size(), c.size()) << "seed " << seed;
    for (size_t i = 0; i < e.size(); i++)
      EXPECT_TRUE(same_bits(e[i], c[i])) << "seed " << seed << " output " << i;
  }
  std::printf("  40 random chains, %zu fused groups, bitwise equal\n", groups);
  EXPECT_GT(groups, 20u);
}

// Under a memory budget (recomputation chosen first, groups found in the program it gives):
// still bitwise, in small tiles, on the models with groups.
TEST(CompiledFusion, UnderABudgetInSmallTilesIsBitwiseTheEagerEngine) {
  const bp::Corpus corpus = bp::load_corpus(bp::kDefaultCorpus, 1000);
  const SmallTiles small;
  auto check = [&]<class W>(int64_t size, double fraction) {
    expect_same_trace<W>(trace<W, bp::EngineBackend>(size, corpus, 4),
                         trace<W, bp::CompiledBackend>(size, corpus, 4, fraction), size);
  };
  // its fused plan is already its smallest: under a budget of that plan (recomputation chosen)
  check.template operator()<bp::GmmD10Tensor>(5, 1.0);
  check.template operator()<bp::CharRnn>(100, 0.7);
}

// At the default sizes, gmm_d10_tensor at k = 25 fuses its squared distances with their row
// sums, forward and backward: the squares and their gradient take one tile each, not 1 MB.
TEST(CompiledFusion, GmmsSquaredDistancesStayInATile) {
  const bp::Corpus corpus;
  bp::CompiledBackend fused, unfused;
  unfused.fuse = false;
  bp::GmmD10Tensor::Run<bp::CompiledBackend> a(fused, 25, corpus), b(unfused, 25, corpus);
  a.step(fused), b.step(unfused);
  const auto &f = fused.program, &u = unfused.program;
  std::printf("  gmm_d10_tensor k 25: arena %.2f -> %.2f MB, moved %.1f -> %.1f MB, %zu groups\n",
              u.memory().arena_bytes / 1e6, f.memory().arena_bytes / 1e6, u.bytes_moved() / 1e6,
              f.bytes_moved() / 1e6, f.fusion().groups());
  EXPECT_EQ(u.fusion().groups(), 0u);
  EXPECT_GE(f.fusion().groups(), 2u);
  EXPECT_LT(f.memory().arena_bytes + 500'000, u.memory().arena_bytes);
  EXPECT_LT(f.bytes_moved() + 2'000'000, u.bytes_moved());
  EXPECT_EQ(f.bytes_moved_unfused(), u.bytes_moved());
}

}  // namespace
