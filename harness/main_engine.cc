// harness/main_engine.cc: bench_engine, every workload on our engine. Does not link libtorch, so
// its peak RSS is the engine's own (a few MB) and not libtorch's ~170 MB floor.
//
//   build/bench_engine --benchmark_filter=tiny_graph      # more in harness/backend_main.h
#include <malloc.h>

#include "engine/backend.h"
#include "harness/backend_main.h"

int main(int argc, char** argv) {
  bp::BackendInfo info;
  info.version =
      "backprop-bench engine (this repository): scalars in double, tensors in float32, "
      "single-threaded";
  info.context = {{"matmul", "own register-tiled kernels (engine/tensor.h), no BLAS"}};
  // glibc raises its mmap threshold each time a large mmapped block is freed, after which large
  // blocks come from the heap and are kept when freed. Google Benchmark builds each benchmark's
  // setup several times, so freed arenas piled up in RSS (mini_gpt batch:64: 30.5 MB peak with a
  // 13 MB arena). A fixed threshold returns them. Only here: the baselines run with the allocator
  // as their users get it (libtorch's CPU allocator does not cache, and with this setting paid an
  // mmap and page faults for every large tensor of every step: char_mlp hidden:1024 7.4 ms).
  info.before_work = [] { mallopt(M_MMAP_THRESHOLD, 256 * 1024); };
  return bp::backend_main<bp::EngineBackend>(argc, argv, info);
}
