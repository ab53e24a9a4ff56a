// op_sequence.cc: a linear op's three products as a step runs them, one after the other on shared
// buffers (forward x w^T, dx = g w, dw = g^T x; x (M, K), w (N, K)), the engine's against a cblas
// in turn, the order swapped every round: medians, and GFLOP/s of medians and bests.
// Built against BLIS's cblas (cmake -DBP_DEV=ON; make test does):
//   BLIS_NUM_THREADS=1 build/dev/op_sequence 64 10 2048
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "linear_buffers.h"
using Clock = std::chrono::steady_clock;
int main(int argc, char** argv) {
  if (argc != 4) return std::fprintf(stderr, "usage: op_sequence M N K\n"), 2;
  const int M = atoi(argv[1]), N = atoi(argv[2]), K = atoi(argv[3]), rounds = 201;
  LinearBuffers buffers(M, N, K);
  auto [x, w, y, dy, dx, dw, scratch] = buffers;
  std::vector<double> t[2][3];
  for (int r = 0; r < rounds; r++)
    for (int v0 = 0; v0 < 2; v0++) {
      const int v = (v0 + r) % 2;
      double s[3];
      auto t0 = Clock::now();
      if (v == 0)
        bp::matmul_accumulate(y, x, false, w, true, M, N, K, scratch, false);
      else
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.f, x, K, w, K, 1.f, y, N);
      auto t1 = Clock::now();
      if (v == 0)
        bp::matmul_accumulate(dx, dy, false, w, false, M, K, N, scratch, true);
      else
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, K, N, 1.f, dy, N, w, K, 0.f, dx,
                    K);
      auto t2 = Clock::now();
      if (v == 0)
        bp::matmul_accumulate(dw, dy, true, x, false, N, K, M, scratch, true);
      else
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, N, K, M, 1.f, dy, N, x, K, 0.f, dw, K);
      auto t3 = Clock::now();
      s[0] = std::chrono::duration<double>(t1 - t0).count();
      s[1] = std::chrono::duration<double>(t2 - t1).count();
      s[2] = std::chrono::duration<double>(t3 - t2).count();
      for (int p = 0; p < 3; p++) t[v][p].push_back(s[p]);
    }
  const char* names[3] = {"fwd (x w^T)", "dx (g w)", "dw (g^T x)"};
  for (int p = 0; p < 3; p++) {
    double med[2];
    for (int v = 0; v < 2; v++) {
      auto q = t[v][p];
      std::sort(q.begin(), q.end());
      med[v] = q[q.size() / 2];
    }
    double best[2];
    for (int v = 0; v < 2; v++) best[v] = *std::min_element(t[v][p].begin(), t[v][p].end());
    const double fl = 2.0 * M * N * K;
    printf(
        "%-12s engine median %7.1f us %5.1f GF/s best %5.1f GF/s | lib median %7.1f us %5.1f GF/s "
        "best %5.1f GF/s\n",
        names[p], med[0] * 1e6, fl / med[0] * 1e-9, fl / best[0] * 1e-9, med[1] * 1e6,
        fl / med[1] * 1e-9, fl / best[1] * 1e-9);
  }
}
