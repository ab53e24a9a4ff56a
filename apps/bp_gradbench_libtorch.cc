// apps/bp_gradbench_libtorch.cc: bp_gradbench_libtorch, the tensor forms of lstm and gmm on
// libtorch's ops for bp_gradbench --backend libtorch (apps/bp_gradbench.cc execs it), on one
// thread as GradBench times tools. No dialect library: LIBXSMM's BLAS wrappers beside libtorch's
// BLAS broke libtorch's products.
#include "apps/gradbench_backends.h"
#include "baselines/libtorch/backend.h"
#include "harness/gradbench/cli.h"

int main(int argc, char** argv) {
  torch::set_num_threads(1);
  return bp::gradbench::tool_main<
      bp::gradbench::LibtorchBackends<bp::LibtorchBackend, bp::LibtorchDoubleBackend>>(argc, argv);
}
