// flushed.cc: does the products' slow half wait on memory? A linear op's three products (as
// op_sequence.cc), each called with its large operand warm from the call before, or flushed from
// every cache level first (clflush: w for the forward and dx = g w, dw for dw = g^T x), in turn,
// the order swapped every round: GFLOP/s at p10, median, p90 and best.
//   build/dev/flushed 64 1024 1024 201        (cmake -DBP_DEV=ON; make test builds it)
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "linear_buffers.h"
using Clock = std::chrono::steady_clock;
static void flush(const float* p, size_t n) {
  for (size_t i = 0; i < n; i += 16) _mm_clflush(p + i);
  _mm_mfence();
}
int main(int argc, char** argv) {
  if (argc != 5) return std::fprintf(stderr, "usage: flushed M N K rounds\n"), 2;
  const int M = atoi(argv[1]), N = atoi(argv[2]), K = atoi(argv[3]), rounds = atoi(argv[4]);
  LinearBuffers buffers(M, N, K);
  auto [x, w, y, dy, dx, dw, scratch] = buffers;
  std::vector<double> t[2][3];  // [flushed][product]
  auto timed = [](auto&& call) {
    const auto t0 = Clock::now();
    call();
    return std::chrono::duration<double>(Clock::now() - t0).count();
  };
  for (int r = 0; r < rounds; r++)
    for (int v0 = 0; v0 < 2; v0++) {
      const int v = (v0 + r) % 2;
      if (v) flush(w, size_t(N) * K);
      t[v][0].push_back(
          timed([&] { bp::matmul_accumulate(y, x, false, w, true, M, N, K, scratch, false); }));
      if (v) flush(w, size_t(N) * K);
      t[v][1].push_back(
          timed([&] { bp::matmul_accumulate(dx, dy, false, w, false, M, K, N, scratch, true); }));
      if (v) flush(dw, size_t(N) * K);
      t[v][2].push_back(
          timed([&] { bp::matmul_accumulate(dw, dy, true, x, false, N, K, M, scratch, true); }));
    }
  const char* names[3] = {"fwd (x w^T)", "dx (g w)", "dw (g^T x)"};
  const double flops = 2.0 * M * N * K;
  for (int p = 0; p < 3; p++) {
    std::printf("%-12s", names[p]);
    for (int v = 0; v < 2; v++) {
      std::vector<double> q = t[v][p];
      std::sort(q.begin(), q.end());
      auto rate = [&](double s) { return flops / s * 1e-9; };
      std::printf(" | %-7s p10 %5.1f med %5.1f p90 %5.1f best %5.1f", v ? "flushed" : "warm",
                  rate(q[q.size() * 9 / 10]), rate(q[q.size() / 2]), rate(q[q.size() / 10]),
                  rate(q[0]));
    }
    std::printf("\n");
  }
}
