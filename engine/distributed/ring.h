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
// The elements of the longest chunk and one more (a chunk's trailer): what the ring's scratch
// holds.
inline size_t ring_scratch_elems(size_t n, int ranks) { return chunk_of(n, ranks, 0).size + 1; }
// The chunk this rank holds summed after ring_reduce_scatter: the one to its right.
inline int owned_chunk(int rank, int ranks) { return (rank + 1) % ranks; }

// MPI's own error handler aborts the job; a failed call here says which one before it does.
inline void mpi_check(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  std::fprintf(stderr, "error: %s failed: %.*s\n", what, len, text);
  MPI_Abort(MPI_COMM_WORLD, 1);
}

namespace detail {
inline int mod(int c, int ranks) { return ((c % ranks) + ranks) % ranks; }
inline void check_count(size_t n, int ranks, MPI_Comm comm) {
  if (ring_scratch_elems(n, ranks) <= size_t(INT_MAX)) return;
  std::fprintf(stderr, "error: ring: a chunk of %zu elements is over MPI's int count\n",
               ring_scratch_elems(n, ranks));
  MPI_Abort(comm, 2);
}
// chunk (n elements at x) followed by one more element at `trailer`, as one message.
inline MPI_Datatype with_trailer(const void* x, int n, const void* trailer, MPI_Datatype type) {
  MPI_Aint at[2];
  MPI_Get_address(x, &at[0]);
  MPI_Get_address(trailer, &at[1]);
  const int lengths[2] = {n, 1};
  MPI_Datatype out;
  MPI_Type_create_hindexed(2, lengths, at, type, &out);
  MPI_Type_commit(&out);
  return out;
}
}  // namespace detail

// The first half of the ring: afterwards chunk owned_chunk(rank) of x holds the sum of every
// rank's, in the order above; the other chunks hold partial sums. scratch holds
// ring_scratch_elems(n, ranks). trailers, when given, are one value per chunk that travel with it
// and are summed with it, in its order (a sharded optimizer's agreement on a non-finite gradient,
// engine/distributed/data_parallel.h); trailers[owned_chunk] is then every rank's sum. tag tells
// apart reductions that may be in flight together on one communicator (one per bucket).
template <class T>
void ring_reduce_scatter(T* x, size_t n, T* scratch, MPI_Comm comm, int tag = 0,
                         T* trailers = nullptr) {
  const int ranks = ranks_of(comm), rank = rank_of(comm);
  if (ranks == 1) return;
  detail::check_count(n, ranks, comm);
  const int right = (rank + 1) % ranks, left = (rank + ranks - 1) % ranks;
  const MPI_Datatype type = mpi_type<T>();
  // At step k, send chunk rank - k (its sum so far), receive chunk rank - k - 1 and add this
  // rank's own to it. After N - 1 steps this rank holds chunk rank + 1 summed.
  for (int k = 0; k < ranks - 1; k++) {
    const int c_out = detail::mod(rank - k, ranks), c_in = detail::mod(rank - k - 1, ranks);
    const Chunk out = chunk_of(n, ranks, c_out), in = chunk_of(n, ranks, c_in);
    if (trailers) {
      MPI_Datatype message =
          detail::with_trailer(x + out.begin, int(out.size), trailers + c_out, type);
      mpi_check(MPI_Sendrecv(MPI_BOTTOM, 1, message, right, tag, scratch, int(in.size) + 1, type,
                             left, tag, comm, MPI_STATUS_IGNORE),
                "MPI_Sendrecv (ring reduce-scatter)");
      MPI_Type_free(&message);
      trailers[c_in] = scratch[in.size] + trailers[c_in];
    } else {
      mpi_check(MPI_Sendrecv(x + out.begin, int(out.size), type, right, tag, scratch, int(in.size),
                             type, left, tag, comm, MPI_STATUS_IGNORE),
                "MPI_Sendrecv (ring reduce-scatter)");
    }
    T* own = x + in.begin;
    for (size_t i = 0; i < in.size; i++) own[i] = scratch[i] + own[i];
  }
}

// The second half: every rank's owned chunk (owned_chunk) goes round, so that every rank ends
// with every chunk, bit for bit as its owner holds it.
template <class T>
void ring_all_gather(T* x, size_t n, MPI_Comm comm, int tag = 0) {
  const int ranks = ranks_of(comm), rank = rank_of(comm);
  if (ranks == 1) return;
  detail::check_count(n, ranks, comm);
  const int right = (rank + 1) % ranks, left = (rank + ranks - 1) % ranks;
  // At step k, send chunk rank + 1 - k, receive chunk rank - k in place.
  for (int k = 0; k < ranks - 1; k++) {
    const Chunk out = chunk_of(n, ranks, detail::mod(rank + 1 - k, ranks)),
                in = chunk_of(n, ranks, detail::mod(rank - k, ranks));
    mpi_check(MPI_Sendrecv(x + out.begin, int(out.size), mpi_type<T>(), right, tag, x + in.begin,
                           int(in.size), mpi_type<T>(), left, tag, comm, MPI_STATUS_IGNORE),
              "MPI_Sendrecv (ring all-gather)");
  }
}

// x (n elements, the same n on every rank) becomes the sum of every rank's x, in place, the same
// bits on every rank: reduce-scatter, then all-gather.
template <class T>
void ring_allreduce(T* x, size_t n, T* scratch, MPI_Comm comm, int tag = 0) {
  if (n == 0) return;
  ring_reduce_scatter(x, n, scratch, comm, tag);
  ring_all_gather(x, n, comm, tag);
}

}  // namespace bp::dist
