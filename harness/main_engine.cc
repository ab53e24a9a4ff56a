// harness/main_engine.cc: bench_engine, every workload on our engine. Does not link libtorch, so
// its peak RSS is the engine's own (a few MB) and not libtorch's ~170 MB floor.
//
//   build/bench_engine --benchmark_filter=tiny_graph      # or: --check_out=FILE, see backend_main.h
#include "engine/backend.h"
#include "harness/backend_main.h"

static_assert(bp::ScalarBackend<bp::EngineBackend>);

int main(int argc, char** argv) {
  bp::BackendInfo info;
  info.version = "backprop-bench engine (this repository): scalars in double, tensors in float32, "
                 "single-threaded";
  info.context = {{"matmul", "own register-tiled kernels (engine/tensor.h), no BLAS"}};
  return bp::backend_main<bp::EngineBackend>(argc, argv, info);
}
