// row_vs_products.cc: the kernel row's op against its bare products, in turn in one process. A
// linear (64, K) x (N, K)^T + bias as `bench_compiled --kernel_rows` runs it (KernelBench: the
// engine dialect's forward then backward, gradients written fresh), and the same three products
// called bare on their own buffers (as op_sequence.cc), the order swapped every round: medians and
// GFLOP/s over the op's 6 M N K flops. What the op adds to its products is the difference.
//   build/dev/row_vs_products 1024 1024 101   (cmake -DBP_DEV=ON; make test builds it)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "engine/dialects/dialects.h"
#include "linear_buffers.h"
using Clock = std::chrono::steady_clock;
int main(int argc, char** argv) {
  if (argc != 4) return std::fprintf(stderr, "usage: row_vs_products N K rounds\n"), 2;
  const int M = 64, N = atoi(argv[1]), K = atoi(argv[2]), rounds = atoi(argv[3]);
  const bp::OpArgs<float> shape = linear_shape(M, N, K, false);
  const bp::Kernel<float>* engine = nullptr;
  for (const bp::Kernel<float>& k : bp::kernels_of<float>(bp::TensorOp::linear))
    if (std::string_view(k.dialect) == "engine") engine = &k;
  const bp::KernelBench<float> row(bp::TensorOp::linear, shape, {engine});
  LinearBuffers buffers(M, N, K);
  auto [x, w, y, dy, dx, dw, scratch] = buffers;
  auto products = [&] {
    bp::matmul_accumulate(y, x, false, w, true, M, N, K, scratch, false);
    bp::matmul_accumulate(dx, dy, false, w, false, M, K, N, scratch, true);
    bp::matmul_accumulate(dw, dy, true, x, false, N, K, M, scratch, true);
  };
  row.run(*engine), products();  // warm
  std::vector<double> t[2];
  for (int r = 0; r < rounds; r++)
    for (int v0 = 0; v0 < 2; v0++) {
      const int v = (v0 + r) % 2;
      const auto t0 = Clock::now();
      if (v == 0)
        row.run(*engine);
      else
        products();
      t[v].push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    }
  const double flops = 6.0 * M * N * K;
  for (int v = 0; v < 2; v++) {
    std::sort(t[v].begin(), t[v].end());
    std::printf("%-16s median %8.1f us %5.1f GFLOP/s, best %5.1f GFLOP/s\n",
                v ? "products, bare" : "the row's op", t[v][t[v].size() / 2] * 1e6,
                flops / t[v][t[v].size() / 2] * 1e-9, flops / t[v][0] * 1e-9);
  }
}
