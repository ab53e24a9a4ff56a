// bits.cc: does a library's sgemm add each element's k terms in order? Its c (a b^T, M x N x K,
// one thread) against the in-order chain of fused multiply-adds that every path of the engine
// keeps; prints how many elements are bit for bit that chain. By chance alone some are.
// Built with the tree's flags against BLIS's cblas (cmake -DBP_DEV=ON; make test does):
//   BLIS_NUM_THREADS=1 build/dev/bits 64 10 2048
#include <cblas.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: bits M N K\n");
    return 2;
  }
  const int M = atoi(argv[1]), N = atoi(argv[2]), K = atoi(argv[3]);
  std::vector<float> a(size_t(M) * K), bt(size_t(N) * K), c(size_t(M) * N);
  for (float& x : a) x = float(rand()) / RAND_MAX - 0.5f;
  for (float& x : bt) x = float(rand()) / RAND_MAX - 0.5f;
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.f, a.data(), K, bt.data(), K, 0.f,
              c.data(), N);
  int same = 0;
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++) {
      float s = 0;
      for (int k = 0; k < K; k++) s = std::fma(a[size_t(i) * K + k], bt[size_t(j) * K + k], s);
      same += s == c[size_t(i) * N + j];
    }
  std::printf("%d x %d x %d b^T: %d of %d elements of c bitwise the in-order fused chain\n", M, N,
              K, same, M * N);
}
