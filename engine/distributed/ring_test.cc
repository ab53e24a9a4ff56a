// engine/distributed/ring_test.cc: the ring all-reduce (engine/distributed/ring.h) under mpirun,
// registered at 1, 2, 3 and 4 ranks (CMakeLists.txt; more ranks than cores is fine, as on two):
// every rank ends with the same bits, and they are the sum in the order ring.h states, bit for
// bit, on sizes that leave chunks empty, odd or long; in float and double.
//   mpirun -n 3 --oversubscribe build/distributed_test
#include "engine/distributed/ring.h"

#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

namespace ring_test {

// Rank r's element i: a value any rank can compute for any other, with exponents spread over a
// few decades so that the order of a sum changes its rounding.
template <class T>
T value(int r, size_t i) {
  uint64_t h =
      (uint64_t(r) + 1) * 0x9e3779b97f4a7c15ull ^ (uint64_t(i) + 7) * 0xbf58476d1ce4e5b9ull;
  h ^= h >> 31, h *= 0x94d049bb133111ebull, h ^= h >> 29;
  const double unit = double(h >> 11) / double(uint64_t(1) << 53);  // [0, 1)
  return T((unit - 0.5) * std::pow(10.0, double(h % 5) - 2));
}
// Every rank's buffer, made once: summed from memory, so the compiler cannot fuse value()'s
// product into the sum (GCC contracts across inlined expressions, and the bits would move).
template <class T>
std::vector<std::vector<T>> every_rank_values(size_t n, int ranks) {
  std::vector<std::vector<T>> x(ranks, std::vector<T>(n));
  for (int r = 0; r < ranks; r++)
    for (size_t i = 0; i < n; i++) x[r][i] = value<T>(r, i);
  return x;
}
// The sum ring.h promises for element i: from the rank that owns its chunk, rightwards.
template <class T>
T ring_order_sum(const std::vector<std::vector<T>>& x, int ranks, size_t i) {
  int c = 0;
  while (c + 1 < ranks && bp::dist::chunk_of(x[0].size(), ranks, c + 1).begin <= i) c++;
  T sum = x[c][i];
  for (int j = 1; j < ranks; j++) sum = sum + x[(c + j) % ranks][i];
  return sum;
}

template <class T>
void check_sizes() {
  const int ranks = bp::dist::ranks_of(MPI_COMM_WORLD), rank = bp::dist::rank_of(MPI_COMM_WORLD);
  size_t reordered = 0;  // elements where rank order 0, 1, ... would give other bits
  for (size_t n : {size_t(0), size_t(1), size_t(ranks - 1 > 0 ? ranks - 1 : 1), size_t(1000),
                   size_t(100003)}) {
    const std::vector<std::vector<T>> inputs = every_rank_values<T>(n, ranks);
    std::vector<T> x = inputs[rank], scratch(bp::dist::ring_scratch_elems(n, ranks));
    bp::dist::ring_allreduce(x.data(), n, scratch.data(), MPI_COMM_WORLD);
    size_t wrong = 0;
    for (size_t i = 0; i < n; i++) {
      const T want = ring_order_sum(inputs, ranks, i);
      if (std::memcmp(&x[i], &want, sizeof(T)) != 0 && wrong++ < 3) {
        ADD_FAILURE() << "rank " << rank << " of " << ranks << ", n " << n << ", element " << i
                      << ": " << x[i] << " against " << want << " in the ring's order";
      }
      T in_rank_order = inputs[0][i];
      for (int r = 1; r < ranks; r++) in_rank_order = in_rank_order + inputs[r][i];
      reordered += std::memcmp(&x[i], &in_rank_order, sizeof(T)) != 0;
    }
    EXPECT_EQ(wrong, 0u) << "n " << n;
    // Every rank the same bits: each rank's buffer against rank 0's.
    std::vector<T> first(x);
    if (n) MPI_Bcast(first.data(), int(n), bp::dist::mpi_type<T>(), 0, MPI_COMM_WORLD);
    EXPECT_TRUE(n == 0 || std::memcmp(first.data(), x.data(), n * sizeof(T)) == 0)
        << "rank " << rank << " differs from rank 0, n " << n;
  }
  // The values are such that order shows: at three ranks or more some sums differ from rank
  // order's, so this test could tell a reduction in another order from the ring's.
  if (ranks >= 3) {
    EXPECT_GT(reordered, 0u);
  }
  if (rank == 0)
    std::printf(
        "  %d ranks (%s): every element the ring order's bits; %zu of them differ from "
        "rank order's\n",
        ranks, sizeof(T) == 4 ? "float" : "double", reordered);
}

TEST(Ring, SumsInTheStatedOrderWithTheSameBitsOnEveryRank) {
  check_sizes<float>();
  check_sizes<double>();
}

// The halves alone (a sharded optimizer's): after the reduce-scatter this rank's owned chunk holds
// the ring order's sum and each chunk's trailer travelled and summed with it; the all-gather then
// gives every rank every owner's chunk.
TEST(Ring, ReduceScatterCarriesTrailersAndAllGatherCompletesIt) {
  const int ranks = bp::dist::ranks_of(MPI_COMM_WORLD), rank = bp::dist::rank_of(MPI_COMM_WORLD);
  for (size_t n : {size_t(0), size_t(1), size_t(1001)}) {
    const std::vector<std::vector<float>> inputs = every_rank_values<float>(n, ranks);
    std::vector<float> x = inputs[rank], scratch(bp::dist::ring_scratch_elems(n, ranks));
    std::vector<float> trailers(static_cast<size_t>(ranks));
    for (int c = 0; c < ranks; c++) trailers[size_t(c)] = float(rank + 1) * float(c + 1);
    bp::dist::ring_reduce_scatter(x.data(), n, scratch.data(), MPI_COMM_WORLD, 3, trailers.data());
    const int own = bp::dist::owned_chunk(rank, ranks);
    const bp::dist::Chunk mine = bp::dist::chunk_of(n, ranks, own);
    size_t wrong = 0;
    for (size_t i = mine.begin; i < mine.begin + mine.size; i++) {
      const float want = ring_order_sum(inputs, ranks, i);
      wrong += std::memcmp(&x[i], &want, sizeof want) != 0;
    }
    EXPECT_EQ(wrong, 0u) << "rank " << rank << ", n " << n;
    EXPECT_EQ(trailers[size_t(own)], float(ranks * (ranks + 1) / 2) * float(own + 1))
        << "rank " << rank << ": the owned chunk's trailer is not every rank's sum";
    bp::dist::ring_all_gather(x.data(), n, MPI_COMM_WORLD, 3);
    for (size_t i = 0; i < n; i++) {
      const float want = ring_order_sum(inputs, ranks, i);
      wrong += std::memcmp(&x[i], &want, sizeof want) != 0;
    }
    EXPECT_EQ(wrong, 0u) << "rank " << rank << ", n " << n << ", after the all-gather";
  }
}

TEST(Ring, ChunksCoverTheBufferOnce) {
  for (size_t n : {0, 1, 2, 5, 1000, 1001}) {
    for (int ranks = 1; ranks <= 7; ranks++) {
      size_t next = 0, longest = 0;
      for (int c = 0; c < ranks; c++) {
        const bp::dist::Chunk k = bp::dist::chunk_of(n, ranks, c);
        EXPECT_EQ(k.begin, next) << "n " << n << " ranks " << ranks << " chunk " << c;
        next = k.begin + k.size;
        longest = std::max(longest, k.size);
      }
      EXPECT_EQ(next, n);
      EXPECT_EQ(longest + 1, bp::dist::ring_scratch_elems(n, ranks));  // and a trailer
    }
  }
}

}  // namespace ring_test
