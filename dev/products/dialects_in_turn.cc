// dialects_in_turn.cc: a kernel row's op under every matmul dialect, called in turn call by call in
// one process (the order rotating every round), and each dialect's median ratio to the engine's
// over the paired calls. The kernel rows (bench_compiled --kernel_rows) time each dialect for a
// tenth of a second at a time, and this VM's minutes differ by more than the dialects do; a ratio
// of calls a few hundred microseconds apart does not see them.
// Built with the tree's flags and dialects (cmake -DBP_DEV=ON; make test does):
//   OPENBLAS_NUM_THREADS=1 BLIS_NUM_THREADS=1 build/dev/dialects_in_turn 1024 1024 0 101
//   [engine,blis]
// Arguments: N K relu rounds, for a linear (64, K) x (N, K)^T + bias (relu: 1 to apply it), and
// the dialects to call, comma-separated (all that can run it, when left out).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "engine/dialects/dialects.h"
#include "linear_buffers.h"
using Clock = std::chrono::steady_clock;
int main(int argc, char** argv) {
  if (argc != 5 && argc != 6)
    return std::fprintf(stderr, "usage: dialects_in_turn N K relu rounds [dialects]\n"), 2;
  const std::string only = argc == 6 ? "," + std::string(argv[5]) + "," : "";
  const int M = 64, N = atoi(argv[1]), K = atoi(argv[2]), rounds = atoi(argv[4]);
  bp::set_library_threads(1);
  const bp::OpArgs<float> shape = linear_shape(M, N, K, atoi(argv[3]) != 0);
  std::vector<const bp::Kernel<float>*> kernels;  // the engine's first: the one ratios are to
  for (const bp::Kernel<float>& k : bp::kernels_of<float>(bp::TensorOp::linear))
    if (k.in_build && k.priority > 0 && k.available(shape) &&
        (only.empty() || only.find("," + std::string(k.dialect) + ",") != std::string::npos))
      kernels.push_back(&k);
  if (kernels.empty() || std::string_view(kernels[0]->dialect) != "engine")
    return std::fprintf(stderr,
                        "dialects_in_turn: the engine must be among the dialects (the "
                        "ratios are to it)\n"),
           2;
  const bp::KernelBench<float> bench(bp::TensorOp::linear, shape, kernels);
  for (const bp::Kernel<float>* k : kernels) bench.run(*k);  // warm: caches, JIT
  std::vector<std::vector<double>> seconds(kernels.size());
  for (int r = 0; r < rounds; r++)
    for (size_t i = 0; i < kernels.size(); i++) {
      const size_t v = (i + size_t(r)) % kernels.size();
      const auto t0 = Clock::now();
      bench.run(*kernels[v]);
      seconds[v].push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    }
  std::printf("linear (64, %d) x (%d, %d)^T%s, %d rounds\n", K, N, K, shape.arg[0] ? " relu" : "",
              rounds);
  for (size_t v = 0; v < kernels.size(); v++) {
    std::vector<double> ratio, sorted = seconds[v];
    for (int r = 0; r < rounds; r++) ratio.push_back(seconds[v][r] / seconds[0][r]);
    std::sort(ratio.begin(), ratio.end());
    std::sort(sorted.begin(), sorted.end());
    std::printf("  %-9s median %9.1f us  best %9.1f us  to the engine's %.3f [%.3f %.3f]\n",
                kernels[v]->dialect, sorted[sorted.size() / 2] * 1e6, sorted[0] * 1e6,
                ratio[ratio.size() / 2], ratio[ratio.size() / 4], ratio[ratio.size() * 3 / 4]);
  }
}
