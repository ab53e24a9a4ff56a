// engine/distributed/test_main.cc: main() of the distributed tests (ring_test.cc,
// data_parallel_test.cc), run under mpirun.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>

#include "engine/distributed/data_parallel.h"

// Every rank runs the tests; the job fails if any rank's do. The other ranks print their
// failures only (gtest's brief mode), rank 0 everything.
int main(int argc, char** argv) {
  bp::dist::Ranks ranks(&argc, &argv);
  testing::InitGoogleTest(&argc, argv);
  if (ranks.rank() != 0) GTEST_FLAG_SET(brief, true);
  int failed = RUN_ALL_TESTS() != 0, any = 0;
  MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (any && ranks.rank() == 0)
    std::fprintf(stderr, "distributed_test: a test failed on some rank (their lines above)\n");
  return any;
}
