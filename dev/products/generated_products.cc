// generated_products.cc: the products alone (no op around them) of mini_gpt's linears, batch 1 and
// 32: the code generated for each shape (engine/kernels/product_jit.h) on each instruction set the
// processor has, LIBXSMM's kernel and the engine's tiled kernel, each called 2000 times in a row,
// in turn, round after round; the median time per call over rounds and each one's ratio to
// LIBXSMM's (where the build has it). Built with the tree's flags and dialects (cmake -DBP_DEV=ON;
// make test does):
//   build/dev/generated_products 15
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "engine/dialects/dialects.h"
#include "timing.h"
namespace jit = bp::product_jit;

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::max(1, atoi(argv[1])) : 15;
  struct Product {
    int M, N, K;
    bool trans_a;
  };
  // c (M, N) += op(a) b: per linear, the forward (b copied transposed first, by every kernel
  // alike, so left out), dx and dW (trans_a), at batch 1 (8 rows) and 32 (256 rows).
  const Product products[] = {{8, 72, 24, false},   {8, 24, 72, false},   {72, 24, 8, true},
                              {8, 96, 24, false},   {8, 24, 96, false},   {96, 24, 8, true},
                              {256, 72, 24, false}, {256, 24, 72, false}, {72, 24, 256, true}};
  for (const Product& p : products) {
    std::vector<float> a(size_t(p.M) * p.K, 0.5f), b(size_t(p.K) * p.N, 0.25f),
        c(size_t(p.M) * p.N, 0.f);
    std::vector<float> scratch(bp::matmul_scratch_elems(p.M, p.N, p.K, p.trans_a, false) + 16);
    std::vector<std::pair<std::string, std::vector<double>>> times;
    std::vector<std::function<void()>> calls;
#if BP_HAVE_LIBXSMM
    auto x = bp::XsmmGemm::cached_kernel<float>(p.trans_a, p.M, p.N, p.K, false);
    times.push_back({"libxsmm", {}});
    calls.push_back([&, x] { x(b.data(), a.data(), c.data()); });
#endif
    for (jit::Isa isa : {jit::Isa::avx512, jit::Isa::avx2}) {
      if (jit::processor_isa() < isa) continue;
      const jit::KernelFn f = jit::registry().kernel({p.M, p.N, p.K, p.trans_a, false, isa}, true);
      if (!f) continue;
      times.push_back({jit::isa_name(isa), {}});
      calls.push_back([&, f] { f(c.data(), a.data(), b.data(), nullptr); });
    }
    times.push_back({"tiled", {}});
    calls.push_back([&] {
      bp::matmul_accumulate(c.data(), a.data(), p.trans_a, b.data(), false, p.M, p.N, p.K,
                            scratch.data());
    });
    for (int r = 0; r < rounds; r++)
      for (size_t i = 0; i < calls.size(); i++) {
        const size_t k = (i + r) % calls.size();  // the order rotates every round
        times[k].second.push_back(per_call(calls[k], 2000));
      }
    std::printf("%3d x %3d x %3d%s:", p.M, p.N, p.K, p.trans_a ? " (a^T)" : "      ");
    for (const auto& [name, t] : times) {
      std::printf(" %s %.1f ns", name.c_str(), median(t) * 1e9);
      if (times[0].first == "libxsmm" && name != "libxsmm")
        std::printf(" (%.2fx)", median(t) / median(times[0].second));
    }
    std::printf("\n");
  }
}
