// dev/ranks/ring_link.cc: the ring all-reduce's time (engine/distributed/ring.h) against the bytes
// summed, at the ranks mpirun started, for the model of dev/ranks/model.py: at N ranks a ring
// takes 2(N-1) latencies and moves 2(N-1)/N of the buffer, so two ranks' times fit
// t(bytes) = 2 alpha + bytes / beta. Prints one JSON line (rank 0): {ranks, bytes, seconds}.
//   mpirun -n 2 build/dev/ring_link      (dev/two_hosts.sh run ... for the emulated link)
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "engine/distributed/ring.h"

int main(int argc, char** argv) {
  setenv("OMPI_MCA_mpi_yield_when_idle", "1", 0);  // as bench_ranks
  MPI_Init(&argc, &argv);
  const int rank = bp::dist::rank_of(MPI_COMM_WORLD), ranks = bp::dist::ranks_of(MPI_COMM_WORLD);
  std::vector<double> bytes, seconds;
  for (size_t n : {size_t(1), size_t(1) << 10, size_t(1) << 14, size_t(1) << 18, size_t(1) << 20}) {
    std::vector<float> x(n, 1.0f), scratch(bp::dist::ring_scratch_elems(n, ranks));
    const int reps = n >= (size_t(1) << 18) ? 10 : 200;
    std::vector<double> each;  // the median of 5 rounds
    for (int round = 0; round < 5; round++) {
      MPI_Barrier(MPI_COMM_WORLD);
      const auto start = std::chrono::steady_clock::now();
      for (int i = 0; i < reps; i++)
        bp::dist::ring_allreduce(x.data(), n, scratch.data(), MPI_COMM_WORLD);
      each.push_back(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / reps);
    }
    std::nth_element(each.begin(), each.begin() + 2, each.end());
    bytes.push_back(double(n * sizeof(float))), seconds.push_back(each[2]);
  }
  if (rank == 0) {
    std::printf("{\"ranks\": %d, \"bytes\": [", ranks);
    for (size_t i = 0; i < bytes.size(); i++) std::printf("%s%.0f", i ? ", " : "", bytes[i]);
    std::printf("], \"seconds\": [");
    for (size_t i = 0; i < seconds.size(); i++) std::printf("%s%.9f", i ? ", " : "", seconds[i]);
    std::printf("]}\n");
  }
  MPI_Finalize();
}
