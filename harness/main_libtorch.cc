// harness/main_libtorch.cc: bench_libtorch, every workload on libtorch eager (baselines/).
//
// Thread counts are fixed before any tensor exists: intra-op threads from --threads (default 1),
// inter-op threads 1. The BLAS libtorch resolved (Debian's libblas.so.3 alternative) is recorded,
// since the reference BLAS instead of OpenBLAS would make the baseline unfairly slow.
//
//   build/bench_libtorch --benchmark_filter=tiny_graph --threads=1
#include <unistd.h>

#include <climits>
#include <thread>

#include "baselines/libtorch_backend.h"
#include "harness/backend_main.h"

static_assert(bp::ScalarBackend<bp::LibtorchBackend>);

// Where the loader's libblas.so.3 symlink chain ends, e.g. .../openblas-pthread/libblas.so.3.
static std::string resolved_blas() {
  char path[PATH_MAX];
  if (realpath("/usr/lib/x86_64-linux-gnu/libblas.so.3", path)) return path;
  return "unknown";
}

int main(int argc, char** argv) {
  bp::BackendInfo info;
  info.version = "libtorch " BP_LIBTORCH_PACKAGE " (Debian libtorch-dev; headers say " TORCH_VERSION "), eager";
  info.max_threads = int(std::max(1u, std::thread::hardware_concurrency()));
  info.set_threads = [](int n) {
    torch::set_num_threads(n);
    torch::set_num_interop_threads(1);
  };
  info.context = {{"blas", resolved_blas()}};
  return bp::backend_main<bp::LibtorchBackend>(argc, argv, info);
}
