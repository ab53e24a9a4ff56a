// studies/kernels/kernel_rows.h: `bench_compiled --kernel_rows`, the matmul dialects kernel by
// kernel on the shapes of real steps, the causal attention's kernel beside them, and the core's
// FMA peak in the same process.
//
// For each instance given, the workload is set up on the compiled backend under auto and stepped
// once; each matmul or linear of its program with a shape not seen before gets a row per dialect
// that can run it (the reference left out, as auto leaves it out):
//   kernel/<instance>/<op>[<operand shapes>]/<dialect>
// Each iteration is the op's forward and backward (its three products) on buffers of its shapes,
// as the step runs them. Counters: flops (per iteration, 2 M N K over the products, so GFLOP/s is
// flops over the time; an attention's, its six products over the causal triangle, 6 B C T (T+1),
// softmax and its gradient not counted), auto (1 on the dialect auto chose for that shape) and
// auto_seconds (what auto measured for the dialect while choosing; 0 where it stopped timing a slow
// one early). After every timed iteration the FMA loop below runs on every thread of the pool for
// about as long, timed apart, so that each kernel is judged against the peak of the same minutes
// (this machine's speed drifts by tens of percent between minutes): fma_gflops_per_core, and
// fraction_of_fma, the kernel's GFLOP/s per thread over it.
// Then one row, peak/fma_f32/threads:1: fused multiply-adds on registers only, independent chains
// of the widest vector the process runs (16 with AVX-512, 12 with AVX2), the ceiling any kernel
// is judged against.
// bench_run runs this after the step benchmarks (kernels.json); plots/plot.py draws it.
#pragma once

#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "engine/compiled/backend.h"
#include "engine/dialects/dialects.h"
#include "engine/kernels/products.h"
#include "engine/runtime/isa.h"
#include "engine/runtime/threads.h"
#include "harness/common/names.h"
#include "harness/common/protocol.h"
#include "workloads/registry.h"

namespace bp {

// One op shape of a step, as auto saw it.
struct MatmulShape {
  std::string instance;
  TensorOp op;
  OpArgs<float> shape;
  KernelChoice<float> choice;
};

inline std::string operand_shapes(const OpArgs<float>& a) {
  std::string s;
  for (int k = 0; k < 3; k++)
    if (a.in_rows[k]) {
      if (k) s += ',';
      s += std::to_string(a.in_rows[k]);
      s += 'x';
      s += std::to_string(a.in_cols[k]);
    }
  return s;
}

// The products' multiply-adds, twice: a forward and both operand gradients. An attention of
// B sequences of T positions and C channels (args B, T, H): per head and sequence, Q K^T and P V
// forward, dP, dV, dQ and dK back, each over the causal triangle's T (T + 1) / 2 entries of d = C /
// H: 6 B C T (T + 1) in all.
inline double matmul_flops(TensorOp op, const OpArgs<float>& a) {
  if (op == TensorOp::attention)
    return 6.0 * a.arg[0] * double(a.cols) * a.arg[1] * (double(a.arg[1]) + 1);
  double f = 0;
  for (const ops::Product& p : ops::products_of(a, op == TensorOp::linear))
    f += 2.0 * p.M * p.N * p.K;
  return f;
}

template <class Corpus>
std::vector<MatmulShape> matmul_shapes_of(const InstanceSpec& spec, const Corpus& corpus) {
  std::vector<MatmulShape> out;
  for_each_workload([&]<class W>() {
    if constexpr (!ScalarWorkload<W>) {
      if (W::name != spec.workload) return;
      CompiledBackend backend;
      std::string unused;
      backend.dialects = *parse_dialect_spec<float>("auto", &unused);
      typename W::template Run<CompiledBackend> run(backend, *spec.size, corpus);
      run.step(backend);
      const std::string id = instance_id(*find_workload(W::name), *spec.size);
      for (const auto& k : backend.program.kernels())
        if (family_of(k.op) == OpFamily::matmul || k.op == TensorOp::attention)
          out.push_back({id, k.op, program_ir::args_of<float>(k.shape), k.choice});
    }
  });
  return out;
}

// Chains of FMAs, each an independent register: more than latency x throughput on every x86
// core with FMA (4 x 2), so the loop runs at the units' peak, and with the two constant operands
// within the vector registers: with AVX2's 16 registers, 16 chains and 2 constants spilled three
// chains to the stack, and the "peak" read far below the units' (dev/notes.md, "The FMA peak
// that spilled"). The loop is the level's the process runs (engine/runtime/isa.h), as the kernels
// judged against it are: 512 bits where it runs AVX-512, 256 where AVX2, scalar otherwise (the
// baseline's alone read half the peak on an AVX-512 machine).
inline constexpr int kFmaChainsAvx512 = 16, kFmaChainsAvx2 = 12, kFmaChainsPortable = 8;
__attribute__((noinline, target("avx512f"))) inline double fma_peak_loop_avx512(int64_t rounds) {
  __m512 acc[kFmaChainsAvx512];
  for (int i = 0; i < kFmaChainsAvx512; i++) acc[i] = _mm512_set1_ps(float(i) * 1e-3f);
  const __m512 mul = _mm512_set1_ps(0.999999f), add = _mm512_set1_ps(1e-7f);
  for (int64_t r = 0; r < rounds; r++)
    for (int i = 0; i < kFmaChainsAvx512; i++) acc[i] = _mm512_fmadd_ps(acc[i], mul, add);
  float total = 0;
  for (int i = 0; i < kFmaChainsAvx512; i++) total += _mm512_reduce_add_ps(acc[i]);
  return double(total);
}
__attribute__((noinline, target("avx2,fma"))) inline double fma_peak_loop_avx2(int64_t rounds) {
  __m256 acc[kFmaChainsAvx2];
  for (int i = 0; i < kFmaChainsAvx2; i++) acc[i] = _mm256_set1_ps(float(i) * 1e-3f);
  const __m256 mul = _mm256_set1_ps(0.999999f), add = _mm256_set1_ps(1e-7f);
  for (int64_t r = 0; r < rounds; r++)
    for (int i = 0; i < kFmaChainsAvx2; i++) acc[i] = _mm256_fmadd_ps(acc[i], mul, add);
  float total = 0, lanes[8];
  for (int i = 0; i < kFmaChainsAvx2; i++) {
    _mm256_storeu_ps(lanes, acc[i]);
    for (float x : lanes) total += x;
  }
  return double(total);
}
__attribute__((noinline)) inline double fma_peak_loop_portable(int64_t rounds) {
  float acc[kFmaChainsPortable];
  for (int i = 0; i < kFmaChainsPortable; i++) acc[i] = float(i) * 1e-3f;
  for (int64_t r = 0; r < rounds; r++)
    for (int i = 0; i < kFmaChainsPortable; i++) acc[i] = acc[i] * 0.999999f + 1e-7f;
  float total = 0;
  for (float x : acc) total += x;
  return double(total);
}

// The loop of the level this process runs: the function, and the flops of one of its rounds.
struct FmaPeak {
  double (*loop)(int64_t rounds);
  double flops_per_round;
};
inline const FmaPeak& fma_peak() {
  static const FmaPeak peak =
      isa() >= Isa::avx512 ? FmaPeak{fma_peak_loop_avx512, kFmaChainsAvx512 * 16 * 2.0}
      : isa() >= Isa::avx2 ? FmaPeak{fma_peak_loop_avx2, kFmaChainsAvx2 * 8 * 2.0}
                           : FmaPeak{fma_peak_loop_portable, kFmaChainsPortable * 2.0};
  return peak;
}

// The FMA loop on every thread of the pool at once, `rounds` rounds each: its seconds, and the
// flops of one thread's share.
inline double fma_loop_seconds(int64_t rounds) {
  const auto started = std::chrono::steady_clock::now();
  thread_pool().run(thread_pool().size(),
                    [&](int, int) { benchmark::DoNotOptimize(fma_peak().loop(rounds)); });
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
}
inline double fma_loop_flops(int64_t rounds) { return double(rounds) * fma_peak().flops_per_round; }

// One kernel row: the op's forward and backward timed (manual time), the FMA loop after each.
inline void time_kernel_row(benchmark::State& state, const KernelBench<float>& bench,
                            const Kernel<float>& k, double flops) {
  bench.run(k);  // warm: caches, JIT
  auto started = std::chrono::steady_clock::now();
  bench.run(k);
  const double once =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  // (at least 64 rounds, not the probe's 4096: mini_gpt's products take under a microsecond, and
  // a loop of 4096 rounds after each made its rows take minutes)
  constexpr int64_t kProbeRounds = 1 << 12, kLeastRounds = 64;
  const double round_seconds = fma_loop_seconds(kProbeRounds) / kProbeRounds;
  const int64_t rounds = std::max<int64_t>(kLeastRounds, int64_t(once / round_seconds));
  double kernel_seconds = 0, fma_seconds = 0;
  for (auto _ : state) {
    started = std::chrono::steady_clock::now();
    bench.run(k);
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    state.SetIterationTime(s);
    kernel_seconds += s;
    fma_seconds += fma_loop_seconds(rounds);
  }
  const double n = double(state.iterations()), threads = thread_pool().size();
  const double fma_per_core = fma_loop_flops(rounds) * n / fma_seconds * 1e-9;
  state.counters["fma_gflops_per_core"] = fma_per_core;
  state.counters["fraction_of_fma"] = flops * n / kernel_seconds * 1e-9 / threads / fma_per_core;
  state.counters["threads"] = threads;
}

// Registers the rows; the caller runs Google Benchmark. Shapes met twice are measured once.
template <class Corpus>
void register_kernel_rows(const std::vector<InstanceSpec>& instances, const Corpus& corpus) {
  std::set<std::string> seen;
  for (const InstanceSpec& spec : instances)
    for (MatmulShape& m : matmul_shapes_of(spec, corpus)) {
      const std::string flags = m.op == TensorOp::attention
                                    ? fmt::format(",heads={}", m.shape.arg[2])
                                : m.shape.arg[0] ? m.op == TensorOp::linear ? ",relu" : ",t"
                                                 : "";
      const std::string shape =
          std::string(tensor_op_names[int(m.op)]) + "[" + operand_shapes(m.shape) + flags + "]";
      if (!seen.insert(shape).second) continue;
      for (const Kernel<float>& k : kernels_of<float>(m.op)) {
        if (!k.in_build || !k.available(m.shape) || k.priority == 0) continue;
        double auto_seconds = 0;
        for (const auto& [name, s] : m.choice.seconds)
          if (name == std::string(k.dialect)) auto_seconds = s;
        const bool chosen = m.choice.kernel == &k;
        const double flops = matmul_flops(m.op, m.shape);
        const TensorOp op = m.op;
        const OpArgs<float> shape_args = m.shape;
        benchmark::RegisterBenchmark(
            ("kernel/" + m.instance + "/" + shape + "/" + k.dialect).c_str(),
            [&k, op, shape_args, flops, chosen, auto_seconds](benchmark::State& state) {
              const KernelBench<float> bench(op, shape_args, {&k});
              time_kernel_row(state, bench, k, flops);
              state.counters["flops"] = flops;
              state.counters["gflops"] =
                  benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
              state.counters["auto"] = chosen;
              state.counters["auto_seconds"] = auto_seconds;
            })
            ->UseManualTime()
            ->Unit(benchmark::kMicrosecond);
      }
    }
  benchmark::RegisterBenchmark("peak/fma_f32/threads:1", [](benchmark::State& state) {
    constexpr int64_t kRounds = 1 << 20;
    for (auto _ : state) {
      int64_t rounds = kRounds;  // opaque to the compiler: the loop cannot be folded or hoisted
      benchmark::DoNotOptimize(rounds);
      benchmark::DoNotOptimize(fma_peak().loop(rounds));
    }
    const double flops = double(kRounds) * fma_peak().flops_per_round;
    state.counters["flops"] = flops;
    state.counters["gflops"] =
        benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  })->Unit(benchmark::kMicrosecond);
}

}  // namespace bp
