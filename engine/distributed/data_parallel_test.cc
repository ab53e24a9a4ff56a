// engine/distributed/data_parallel_test.cc: data parallel (engine/distributed/data_parallel.h)
// under mpirun at 1 to 4 ranks: a small MLP, each rank a shard of a 12-row global batch, its
// gradients reduced under the backward in one bucket or one per parameter. Against the same
// model's gradients on the whole batch in one process (within a tolerance: a sum over ranks is
// another order than the sum over rows); the same bits on every rank, from step to step and with
// the buckets summed after the backward instead of under it; an
// SGD step leaves every rank's parameters the same bits; a NaN on one rank skips the step on all.
// The optimizer sharded (ZeRO stage 1): the same parameters, bit for bit, as the unsharded
// optimizer's after AdamW and SGD steps, with 1 / ranks of the moments on each rank.
#include "engine/distributed/data_parallel.h"

#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <span>
#include <vector>

namespace data_parallel_test {

using bp::Tensor;
using bp::TensorGraph;

constexpr int32_t kRows = 12, kIn = 6, kHidden = 8, kClasses = 4;  // 12: shards of 1 to 4 ranks

template <class T>
std::vector<T> values(size_t n, int seed) {
  std::vector<T> v(n);
  for (size_t i = 0; i < n; i++) v[i] = T(std::sin(double(i * 7 + seed * 13) * 0.37) * 0.8);
  return v;
}

// x -> tanh(linear) -> linear (its weight read through a view) -> cross-entropy; a parameter the
// step never reads, and constants among and after the parameters, so that none holds a bucket
// back.
template <class T>
struct Mlp {
  TensorGraph<T> g;
  Tensor w1, b1, w2, b2, unused;
  std::vector<T> x = values<T>(size_t(kRows) * kIn, 1);
  std::vector<int32_t> y;
  Mlp() {
    w1 = g.param(kHidden, kIn, values<T>(size_t(kHidden) * kIn, 2));
    b1 = g.param(1, kHidden, values<T>(kHidden, 3));
    g.constant(2, 2, values<T>(4, 9));
    unused = g.param(3, 5, values<T>(15, 4));
    w2 = g.param(kClasses, kHidden, values<T>(size_t(kClasses) * kHidden, 5));
    b2 = g.param(1, kClasses, values<T>(kClasses, 6));
    g.constant(1, 3, values<T>(3, 10));  // after the last parameter too
    for (int32_t r = 0; r < kRows; r++) y.push_back((r * 5 + 1) % kClasses);
  }
  // The mean loss's gradients over rows [r0, r1), in the flat buffer; dp, when given, reduces them.
  void backward(int32_t r0, int32_t r1, bp::dist::DataParallel<T>* dp) {
    g.zero_grad();
    const Tensor in = g.input(
        r1 - r0, kIn, std::span<const T>(x).subspan(size_t(r0) * kIn, size_t(r1 - r0) * kIn));
    const Tensor h = g.tanh(g.linear(in, w1, b1));
    const Tensor logits = g.linear(h, g.view(w2, kClasses, kHidden), b2);
    g.backward(g.cross_entropy(logits, bp::IndexSpan{y.data() + r0, r1 - r0}));
    if (dp) dp->finish();
  }
  std::vector<T> grads() { return {g.flat_grads(), g.flat_grads() + g.flat_size()}; }
  std::vector<T> params() const { return {g.flat_values(), g.flat_values() + g.flat_size()}; }
};

// Whether v holds rank 0's bits on this rank.
template <class T>
bool same_as_rank_0(const std::vector<T>& v) {
  std::vector<T> first(v);
  MPI_Bcast(first.data(), int(first.size()), bp::dist::mpi_type<T>(), 0, MPI_COMM_WORLD);
  return std::memcmp(first.data(), v.data(), v.size() * sizeof(T)) == 0;
}

template <class T>
void against_one_process(double tolerance) {
  const int rank = bp::dist::rank_of(MPI_COMM_WORLD), ranks = bp::dist::ranks_of(MPI_COMM_WORLD);
  const int32_t r0 = kRows * rank / ranks, r1 = kRows * (rank + 1) / ranks;
  Mlp<T> whole;
  whole.backward(0, kRows, nullptr);
  const std::vector<T> want = whole.grads();
  for (size_t bucket_bytes : {size_t(1), size_t(1) << 20}) {
    Mlp<T> m;
    bp::dist::DataParallel<T> dp(m.g, MPI_COMM_WORLD, bucket_bytes);
    m.backward(r0, r1, &dp);
    EXPECT_EQ(dp.buckets(), bucket_bytes == 1 ? 5u : 1u);  // one per trained parameter, or one
    const std::vector<T> got = m.grads();
    m.g.end_step();
    double worst = 0;
    for (size_t i = 0; i < got.size(); i++)
      worst = std::max(
          worst, std::abs(double(got[i]) - double(want[i])) / (std::abs(double(want[i])) + 1));
    EXPECT_LE(worst, tolerance) << "bucket_bytes " << bucket_bytes << ", rank " << rank;
    EXPECT_TRUE(same_as_rank_0(got)) << "rank " << rank << " holds other bits than rank 0";
    m.backward(r0, r1, &dp);  // the same step again: the same bits
    EXPECT_EQ(std::memcmp(got.data(), m.grads().data(), got.size() * sizeof(T)), 0);
    {  // every bucket summed after the backward instead of under it: the same bits
      Mlp<T> later;
      bp::dist::DataParallel<T> after(later.g, MPI_COMM_WORLD, bucket_bytes, /*overlap=*/false);
      later.backward(r0, r1, &after);
      EXPECT_EQ(std::memcmp(got.data(), later.grads().data(), got.size() * sizeof(T)), 0)
          << "overlap off, rank " << rank;
    }
    m.g.sgd_step(0.1);
    m.g.end_step();
    EXPECT_TRUE(same_as_rank_0(m.params())) << "rank " << rank << ": parameters after SGD differ";
    if (rank == 0)
      std::printf(
          "  %d ranks (%s), %zu bucket(s): max |ranks - one process| / (|one process| + 1)"
          " %.1e (tolerance %.0e)\n",
          ranks, sizeof(T) == 4 ? "float" : "double", dp.buckets(), worst, tolerance);
  }
}

TEST(DataParallel, GradientsAreTheWholeBatchsOnEveryRankWithTheSameBits) {
  against_one_process<double>(1e-14);
  against_one_process<float>(1e-6);
}

TEST(DataParallel, ANonFiniteGradientOnOneRankSkipsTheStepOnEvery) {
  const int rank = bp::dist::rank_of(MPI_COMM_WORLD), ranks = bp::dist::ranks_of(MPI_COMM_WORLD);
  const int32_t r0 = kRows * rank / ranks, r1 = kRows * (rank + 1) / ranks;
  Mlp<float> m;
  if (rank == ranks - 1) m.x[size_t(r0) * kIn] = NAN;  // one input of the last rank's shard
  const std::vector<float> before = m.params();
  bp::dist::DataParallel<float> dp(m.g, MPI_COMM_WORLD);
  m.backward(r0, r1, &dp);
  m.g.sgd_step(0.1);
  m.g.end_step();
  EXPECT_EQ(m.g.skipped_steps(), 1) << "rank " << rank;
  EXPECT_EQ(std::memcmp(before.data(), m.params().data(), before.size() * sizeof(float)), 0);
}

// Three steps of AdamW, then two of SGD, with the optimizer sharded or not: the same bits.
TEST(DataParallel, AShardedOptimizerTakesTheUnshardedStepsBitForBit) {
  const int rank = bp::dist::rank_of(MPI_COMM_WORLD), ranks = bp::dist::ranks_of(MPI_COMM_WORLD);
  const int32_t r0 = kRows * rank / ranks, r1 = kRows * (rank + 1) / ranks;
  for (size_t bucket_bytes : {size_t(1), size_t(1) << 20}) {
    Mlp<float> plain, sharded;
    bp::dist::DataParallel<float> dp(plain.g, MPI_COMM_WORLD, bucket_bytes);
    bp::dist::DataParallel<float> zero(sharded.g, MPI_COMM_WORLD, bucket_bytes, true, true);
    const bp::AdamWConfig adamw{0.01, 0.9, 0.999, 1e-8, 0.01};
    for (int step = 0; step < 5; step++) {
      plain.backward(r0, r1, &dp);
      sharded.backward(r0, r1, &zero);
      if (step < 3) {
        plain.g.adamw_step(adamw);
        zero.sharded_step(&adamw, 0);
      } else {
        plain.g.sgd_step(0.05);
        zero.sharded_step(nullptr, 0.05);
      }
      plain.g.end_step(), sharded.g.end_step();
      const std::vector<float> want = plain.params(), got = sharded.params();
      size_t differ = 0;
      for (size_t i = 0; i < want.size(); i++)
        differ += std::memcmp(&want[i], &got[i], sizeof(float)) != 0;
      EXPECT_EQ(differ, 0u) << "step " << step << ", rank " << rank << ", bucket_bytes "
                            << bucket_bytes;
    }
    EXPECT_EQ(sharded.g.adamw_steps(), 3);
    // Each rank keeps its chunk of every bucket's moments: 1 / ranks, give or take a chunk's
    // rounding (an element per bucket).
    const size_t all = dp.optimizer_state_bytes(), mine = zero.optimizer_state_bytes();
    EXPECT_EQ(all, 2 * plain.g.flat_size() * sizeof(float));
    EXPECT_LE(mine, all / size_t(ranks) + 2 * sizeof(float) * zero.buckets());
    EXPECT_GE(mine + 2 * sizeof(float) * zero.buckets(), all / size_t(ranks));
    if (rank == 0)
      std::printf("  %d ranks, %zu bucket(s): sharded AdamW moments %zu of %zu bytes per rank\n",
                  ranks, zero.buckets(), mine, all);
  }
}

TEST(DataParallel, ANonFiniteGradientOnOneRankSkipsTheShardedStepOnEvery) {
  const int rank = bp::dist::rank_of(MPI_COMM_WORLD), ranks = bp::dist::ranks_of(MPI_COMM_WORLD);
  const int32_t r0 = kRows * rank / ranks, r1 = kRows * (rank + 1) / ranks;
  for (size_t bucket_bytes : {size_t(1), size_t(1) << 20}) {
    Mlp<float> m;
    if (rank == ranks - 1) m.x[size_t(r0) * kIn] = INFINITY;  // one input of the last rank's shard
    const std::vector<float> before = m.params();
    bp::dist::DataParallel<float> zero(m.g, MPI_COMM_WORLD, bucket_bytes, true, true);
    const bp::AdamWConfig adamw{};
    m.backward(r0, r1, &zero);
    zero.sharded_step(&adamw, 0);
    m.g.end_step();
    EXPECT_EQ(m.g.skipped_steps(), 1) << "rank " << rank;
    EXPECT_EQ(m.g.adamw_steps(), 0) << "rank " << rank;
    EXPECT_EQ(std::memcmp(before.data(), m.params().data(), before.size() * sizeof(float)), 0);
  }
}

}  // namespace data_parallel_test
