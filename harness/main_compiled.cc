// harness/main_compiled.cc: bench_compiled, every workload on our engine's compiled mode
// (engine/compiled.h): the first step captured and planned, every later step a replay of that
// program. Does not link libtorch, like bench_engine, so its peak RSS is its own.
//
//   build/bench_compiled --benchmark_filter=mini_gpt     # more in harness/backend_main.h
#include <malloc.h>

#include "engine/compiled.h"
#include "harness/backend_main.h"

int main(int argc, char** argv) {
  bp::BackendInfo info;
  info.version =
      "backprop-bench engine, compiled mode (this repository): the step captured once, planned "
      "into one arena and replayed; scalars in double, tensors in float32, single-threaded";
  info.context = {{"matmul", "own register-tiled kernels (engine/kernels.h), no BLAS"}};
  // As bench_engine (harness/main_engine.cc says why): freed large blocks go back to the system.
  info.before_work = [] { mallopt(M_MMAP_THRESHOLD, 256 * 1024); };
  return bp::backend_main<bp::CompiledBackend>(argc, argv, info);
}
