// pairs.cc: builds of the products (variant.cc, one per engine tree) and OpenBLAS's sgemm called in
// turn, call after call, in one process, so that what the VM does hits every variant alike.
//   pairs M N K trans_a trans_b calls
// Per variant: the best and the median time, GFLOP/s of the best, and the median with quartiles of
// the ratio to the first variant over paired calls; "BITS DIFFER" if its c is not the first's.
// The order of the calls rotates every round, so each variant comes first as often as the others:
// in a fixed order the same code called second ran faster than its copy called first
// (dev/notes.md, "Products in turn"), which would have flattered whatever was listed second. Run
// one tree twice (pairs.sh a=T b=T) to see the floor: its ratio is then 1.00 within its quartiles.
// make test builds it with this tree as its one variant (build/dev/pairs), so that it keeps
// compiling; pairs.sh builds it over the trees it is given.
// OPENBLAS_NUM_THREADS=1 keeps OpenBLAS on one core (pairs.sh sets it, and BLIS_NUM_THREADS=1
// for BLIS, which -DLIBRARY="blis" and -lblis put in OpenBLAS's place).
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#ifndef LIBRARY
#define LIBRARY "openblas"
#endif

#define DECLARE(n)                               \
  size_t scratch_##n(int, int, int, bool, bool); \
  void run_##n(float*, const float*, bool, const float*, bool, int, int, int, float*);
VARIANT_DECLARATIONS

int main(int argc, char** argv) {
  if (argc != 7) {
    std::fprintf(stderr, "usage: pairs M N K trans_a trans_b calls\n");
    return 2;
  }
  const int M = atoi(argv[1]), N = atoi(argv[2]), K = atoi(argv[3]), calls = atoi(argv[6]);
  const bool ta = atoi(argv[4]), tb = atoi(argv[5]);
  struct Variant {
    const char* name;
    size_t (*scratch)(int, int, int, bool, bool);
    void (*run)(float*, const float*, bool, const float*, bool, int, int, int, float*);
  };
  const std::vector<Variant> variants = {VARIANT_LIST};
  auto alloc = [](size_t n) { return (float*)std::aligned_alloc(64, (n * 4 + 63) / 64 * 64 + 64); };
  float *a = alloc(size_t(M) * K), *b = alloc(size_t(K) * N), *blas_c = alloc(size_t(M) * N);
  for (size_t i = 0; i < size_t(M) * K; i++) a[i] = float(rand()) / RAND_MAX - 0.5f;
  for (size_t i = 0; i < size_t(K) * N; i++) b[i] = float(rand()) / RAND_MAX - 0.5f;
  // One c and one scratch for all, so that no variant's buffers sit better in the caches or pages
  // than another's; each call writes c fresh. Each variant's c is compared after the rounds.
  size_t scratch_elems = 0;
  for (const Variant& v : variants)
    scratch_elems = std::max(scratch_elems, v.scratch(M, N, K, ta, tb));
  float *c = alloc(size_t(M) * N), *scratch = alloc(scratch_elems);
  std::vector<std::vector<double>> t(variants.size() + 1);
  using Clock = std::chrono::steady_clock;
  const size_t runners = variants.size() + 1;  // the variants, then the library
  for (int r = 0; r < calls; r++)
    for (size_t i = 0; i < runners; i++) {
      const size_t v = (i + size_t(r)) % runners;
      const auto t0 = Clock::now();
      if (v < variants.size())
        variants[v].run(c, a, ta, b, tb, M, N, K, scratch);
      else
        cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                    M, N, K, 1.f, a, ta ? M : K, b, tb ? K : N, 0.f, blas_c, N);
      t[v].push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    }
  std::vector<std::vector<float>> result;
  for (const Variant& v : variants) {
    v.run(c, a, ta, b, tb, M, N, K, scratch);
    result.emplace_back(c, c + size_t(M) * N);
  }
  for (size_t v = 0; v <= variants.size(); v++) {
    std::vector<double> sorted = t[v], ratio;
    for (int i = 0; i < calls; i++) ratio.push_back(t[v][i] / t[0][i]);
    std::sort(sorted.begin(), sorted.end());
    std::sort(ratio.begin(), ratio.end());
    const bool same =
        v == variants.size() || !std::memcmp(result[v].data(), result[0].data(), size_t(M) * N * 4);
    std::printf(
        "%5d %5d %5d ta%d tb%d %-8s best %9.1f us %5.1f GFLOP/s  median %9.1f us  "
        "ratio %.3f [%.3f %.3f]%s\n",
        M, N, K, ta, tb, v < variants.size() ? variants[v].name : LIBRARY, sorted[0] * 1e6,
        2.0 * M * N * K / sorted[0] * 1e-9, sorted[calls / 2] * 1e6, ratio[calls / 2],
        ratio[calls / 4], ratio[3 * calls / 4], same ? "" : "  BITS DIFFER");
  }
}
