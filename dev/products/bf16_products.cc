// bf16_products.cc: the three products of a linear layer (forward x w^T, dx = g w, dw = g^T x) on
// bfloat16 operands accumulated in float32 (engine/kernels/bf16.h), against the float32 product
// the eager engine runs on the same layouts (matmul_accumulate, transposed copies included): the
// linears of mlp_width 2048, char_mlp 1024, mini_gpt_wide and mini_gpt batch 1; each path the
// processor has (VDPBF16PS, the widened fallback), b packed or widened inside every call as a
// step does. Operands are bf16 already (a step rounds its activations once, in the forward). In
// turn, round after round, the median per call and its ratio to float32's. Built with the tree's
// flags (cmake -DBP_DEV=ON; make test does):
//   build/dev/bf16_products 9
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "engine/kernels/bf16.h"
#include "timing.h"

namespace {

struct Layer {
  const char* name;
  int rows, in, out;  // x (rows, in), w (out, in)
};
struct Product {
  const char* what;
  int M, K, N;
  bool trans_a, trans_b;
};

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::max(1, std::atoi(argv[1])) : 9;
  const Layer layers[] = {{"mlp_width 2048", 64, 2048, 2048},
                          {"char_mlp 1024", 64, 1024, 1024},
                          {"mini_gpt_wide fc", 2048, 128, 512},
                          {"mini_gpt 1 fc", 8, 24, 96}};
  std::printf("%-18s %-3s %-16s %11s %22s %22s\n", "layer", "", "M x K x N", "float32",
              "bf16 avx512_bf16", "bf16 widened");
  for (const Layer& l : layers) {
    const Product products[] = {{"fwd", l.rows, l.in, l.out, false, true},
                                {"dx", l.rows, l.out, l.in, false, false},
                                {"dw", l.out, l.rows, l.in, true, false}};
    for (const Product& p : products) {
      const int M = p.M, K = p.K, N = p.N;
      const int calls = std::max(1, int(2e7 / (double(M) * K * N)));
      std::vector<float> af(size_t(M) * K), bf(size_t(K) * N), c(size_t(M) * N, 0.f);
      for (size_t i = 0; i < af.size(); i++) af[i] = float(i % 13) * 0.1f - 0.6f;
      for (size_t i = 0; i < bf.size(); i++) bf[i] = float(i % 11) * 0.1f - 0.5f;
      std::vector<uint16_t> a(af.size()), b(bf.size());
      bp::bf16::from_floats(a.data(), af.data(), a.size());
      bp::bf16::from_floats(b.data(), bf.data(), b.size());
      std::vector<float> f32_scratch(bp::matmul_scratch_elems(M, N, K, p.trans_a, p.trans_b));
      std::vector<std::vector<double>> t(3);
      const bool dot = bp::bf16::has_dot_bf16();
      std::vector<float> scratch(std::max(
          bp::bf16::gemm_scratch_floats(M, K, N, p.trans_a, p.trans_b, bp::bf16::Path::dot_bf16),
          bp::bf16::gemm_scratch_floats(M, K, N, p.trans_a, p.trans_b, bp::bf16::Path::widened)));
      for (int r = 0; r < rounds; r++) {
        t[0].push_back(per_call(
            [&] {
              bp::matmul_accumulate(c.data(), af.data(), p.trans_a, bf.data(), p.trans_b, M, N, K,
                                    f32_scratch.data());
            },
            calls));
        for (int q = dot ? 0 : 1; q < 2; q++) {
          const bp::bf16::Path path = q == 0 ? bp::bf16::Path::dot_bf16 : bp::bf16::Path::widened;
          t[1 + q].push_back(per_call(
              [&] {
                bp::bf16::gemm(c.data(), {a.data(), p.trans_a, b.data(), p.trans_b}, M, K, N,
                               scratch.data(), path);
              },
              calls));
        }
      }
      const double f32 = median(t[0]);
      char shape[32], cell[2][32];
      std::snprintf(shape, sizeof shape, "%d x %d x %d", M, K, N);
      for (int q = 0; q < 2; q++)
        if (t[1 + q].empty())
          std::snprintf(cell[q], sizeof cell[q], "(no AVX512_BF16)");
        else
          std::snprintf(cell[q], sizeof cell[q], "%.1f us %.2fx", median(t[1 + q]) * 1e6,
                        median(t[1 + q]) / f32);
      std::printf("%-18s %-3s %-16s %8.1f us %22s %22s\n", l.name, p.what, shape, f32 * 1e6,
                  cell[0], cell[1]);
    }
  }
}
