// engine/distributed/ring.h: the sum of a buffer over every rank of an MPI communicator, in an
// order fixed by the ranks alone, so that the same ranks give the same bits run after run and
// every rank ends with the same bits.
//
// A ring, as Baidu's ring all-reduce and NCCL's: the buffer is cut into one chunk per rank; in
// N - 1 steps each rank passes a chunk to its right neighbour and adds the chunk that comes from
// its left (reduce-scatter), then in N - 1 more steps the summed chunks go round (all-gather).
// Each rank sends and receives 2 (N - 1) / N of the buffer, whatever N (a ring's bandwidth term
// does not grow with the ranks; its latency term, 2 (N - 1) messages, does). Chunk c is summed from
// rank c rightwards, one rank at a time:
//   ((x_c + x_{c+1}) + x_{c+2}) + ... + x_{c+N-1}   (ranks mod N)
// where MPI_Allreduce's order is the library's to choose (and changes with the message size).
// Tests: engine/distributed/ring_test.cc, under mpirun at 1 to 4 ranks.
#pragma once

#include <mpi.h>

#include <climits>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <type_traits>
#include <vector>

namespace bp::dist {

template <class T>
MPI_Datatype mpi_type() {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>);
  return std::is_same_v<T, float> ? MPI_FLOAT : MPI_DOUBLE;
}

// How many ranks comm has, and which one this process is.
inline int ranks_of(MPI_Comm comm) {
  int n = 1;
  MPI_Comm_size(comm, &n);
  return n;
}
inline int rank_of(MPI_Comm comm) {
  int r = 0;
  MPI_Comm_rank(comm, &r);
  return r;
}

// Chunk c of n elements cut into `ranks`: the first n % ranks chunks one element longer.
struct Chunk {
  size_t begin, size;
};
inline Chunk chunk_of(size_t n, int ranks, int c) {
  const size_t base = n / ranks, longer = n % ranks, k = size_t(c);
  return {k * base + (k < longer ? k : longer), base + (k < longer ? 1 : 0)};
}
// The elements of the longest chunk: what ring_allreduce's scratch holds.
inline size_t ring_scratch_elems(size_t n, int ranks) { return chunk_of(n, ranks, 0).size; }

// MPI's own error handler aborts the job; a failed call here says which one before it does.
inline void mpi_check(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  std::fprintf(stderr, "error: %s failed: %.*s\n", what, len, text);
  MPI_Abort(MPI_COMM_WORLD, 1);
}

// x (n elements, the same n on every rank) becomes the sum of every rank's x, in place. scratch
// holds ring_scratch_elems(n, ranks). tag tells apart reductions that may be in flight together
// on one communicator (one per bucket).
template <class T>
void ring_allreduce(T* x, size_t n, T* scratch, MPI_Comm comm, int tag = 0) {
  const int ranks = ranks_of(comm), rank = rank_of(comm);
  if (ranks == 1 || n == 0) return;
  if (ring_scratch_elems(n, ranks) > size_t(INT_MAX)) {
    std::fprintf(stderr, "error: ring_allreduce: a chunk of %zu elements is over MPI's int count\n",
                 ring_scratch_elems(n, ranks));
    MPI_Abort(comm, 2);
  }
  const int right = (rank + 1) % ranks, left = (rank + ranks - 1) % ranks;
  const MPI_Datatype type = mpi_type<T>();
  auto mod = [ranks](int c) { return ((c % ranks) + ranks) % ranks; };
  // Reduce-scatter: at step k, send chunk rank - k (its sum so far), receive chunk rank - k - 1
  // and add this rank's own to it. After N - 1 steps this rank holds chunk rank + 1 summed.
  for (int k = 0; k < ranks - 1; k++) {
    const Chunk out = chunk_of(n, ranks, mod(rank - k)), in = chunk_of(n, ranks, mod(rank - k - 1));
    mpi_check(MPI_Sendrecv(x + out.begin, int(out.size), type, right, tag, scratch, int(in.size),
                           type, left, tag, comm, MPI_STATUS_IGNORE),
              "MPI_Sendrecv (ring reduce-scatter)");
    T* own = x + in.begin;
    for (size_t i = 0; i < in.size; i++) own[i] = scratch[i] + own[i];
  }
  // All-gather: at step k, send chunk rank + 1 - k (summed), receive chunk rank - k in place.
  for (int k = 0; k < ranks - 1; k++) {
    const Chunk out = chunk_of(n, ranks, mod(rank + 1 - k)), in = chunk_of(n, ranks, mod(rank - k));
    mpi_check(MPI_Sendrecv(x + out.begin, int(out.size), type, right, tag, x + in.begin,
                           int(in.size), type, left, tag, comm, MPI_STATUS_IGNORE),
              "MPI_Sendrecv (ring all-gather)");
  }
}

}  // namespace bp::dist
