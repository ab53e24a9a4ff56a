// bf16_products.cc: products on bfloat16 operands accumulated in float32 (engine/kernels/bf16.h)
// against the float32 tiled kernel on the same shapes (char_mlp 1024's and mlp_width 2048's
// linears, mini_gpt_wide's, mini_gpt batch 1's): each path the processor has (VDPBF16PS, the
// widened fallback), b packed or widened inside every call as a step's weights would be; in
// turn, round after round, the median per call and its ratio to float32's. Built with the
// tree's flags (cmake -DBP_DEV=ON; make test does):
//   build/dev/bf16_products 9
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "engine/kernels/bf16.h"
#include "timing.h"

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::max(1, std::atoi(argv[1])) : 9;
  const int shapes[][3] = {{64, 1024, 1024}, {64, 2048, 2048}, {256, 128, 512}, {8, 24, 72}};
  std::printf("%-16s %12s %22s %22s\n", "M x K x N", "float32", "bf16 avx512_bf16", "bf16 widened");
  for (const auto& s : shapes) {
    const int M = s[0], K = s[1], N = s[2];
    const int calls = std::max(1, int(2e7 / (double(M) * K * N)));
    std::vector<float> af(size_t(M) * K), bf(size_t(K) * N), c(size_t(M) * N, 0.f);
    for (size_t i = 0; i < af.size(); i++) af[i] = float(i % 13) * 0.1f - 0.6f;
    for (size_t i = 0; i < bf.size(); i++) bf[i] = float(i % 11) * 0.1f - 0.5f;
    std::vector<uint16_t> a(af.size()), b(bf.size());
    bp::bf16::from_floats(a.data(), af.data(), a.size());
    bp::bf16::from_floats(b.data(), bf.data(), b.size());
    std::vector<float> pack(bp::gemm_pack_elems(M, K, N));
    std::vector<std::vector<double>> t(3);
    const bool dot = bp::bf16::has_dot_bf16();
    std::vector<float> scratch(
        std::max(bp::bf16::gemm_scratch_floats(M, K, N, false, bp::bf16::Path::dot_bf16),
                 bp::bf16::gemm_scratch_floats(M, K, N, false, bp::bf16::Path::widened)));
    for (int r = 0; r < rounds; r++) {
      t[0].push_back(per_call(
          [&] {
            bp::gemm(c.data(), af.data(), K, 1, bf.data(), M, K, N, pack.data(), false, false);
          },
          calls));
      for (int p = dot ? 0 : 1; p < 2; p++) {
        const bp::bf16::Path path = p == 0 ? bp::bf16::Path::dot_bf16 : bp::bf16::Path::widened;
        t[1 + p].push_back(per_call(
            [&] {
              bp::bf16::gemm(c.data(), {a.data(), false, b.data(), false}, M, K, N, scratch.data(),
                             path);
            },
            calls));
      }
    }
    const double f32 = median(t[0]);
    char name[32], cell[2][32];
    std::snprintf(name, sizeof name, "%d x %d x %d", M, K, N);
    for (int p = 0; p < 2; p++)
      if (t[1 + p].empty())
        std::snprintf(cell[p], sizeof cell[p], "(no AVX512_BF16)");
      else
        std::snprintf(cell[p], sizeof cell[p], "%.1f us %.2fx", median(t[1 + p]) * 1e6,
                      median(t[1 + p]) / f32);
    std::printf("%-16s %9.1f us %22s %22s\n", name, f32 * 1e6, cell[0], cell[1]);
  }
}
