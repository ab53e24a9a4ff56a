// harness/kernel_rows.h: `bench_compiled --kernel_rows`, the matmul dialects kernel by kernel on
// the shapes of real steps, and the core's FMA peak beside them in the same process.
//
// For each instance given, the workload is set up on the compiled backend under auto and stepped
// once; each matmul or linear of its program with a shape not seen before gets a row per dialect
// that can run it (the reference left out, as auto leaves it out):
//   kernel/<instance>/<op>[<operand shapes>]/<dialect>
// Each iteration is the op's forward and backward (its three products) on buffers of its shapes,
// as the step runs them. Counters: flops (per iteration, 2 M N K over the products, so GFLOP/s is
// flops over the time), auto (1 on the dialect auto chose for that shape) and auto_seconds (what
// auto measured for the dialect while choosing; 0 where it stopped timing a slow one early).
// Then one row, peak/fma_f32/threads:1: fused multiply-adds on registers only, 16 independent
// chains of the widest vector the build targets, the ceiling any kernel is judged against.
// bench_run runs this after the step benchmarks (kernels.json); plots/plot.py draws it.
#pragma once

#include <benchmark/benchmark.h>
#include <immintrin.h>

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "engine/compiled.h"
#include "engine/dialects.h"
#include "harness/names.h"
#include "harness/protocol.h"
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

// The products' multiply-adds, twice: a forward and both operand gradients.
inline double matmul_flops(TensorOp op, const OpArgs<float>& a) {
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
        if (family_of(k.op) == OpFamily::matmul) out.push_back({id, k.op, k.shape, k.choice});
    }
  });
  return out;
}

// 16 chains of FMAs, each an independent register: more than latency x throughput on every x86
// core with FMA, so the loop runs at the units' peak.
__attribute__((noinline)) inline double fma_peak_loop(int64_t rounds) {
#if defined(__AVX512F__)
  using V = __m512;
  constexpr int kLanes = 16;
  auto fma = [](V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); };
  auto set = [](float x) { return _mm512_set1_ps(x); };
  auto sum = [](V v) {
    float f[16];
    _mm512_storeu_ps(f, v);
    float t = 0;
    for (float x : f) t += x;
    return t;
  };
#elif defined(__FMA__)
  using V = __m256;
  constexpr int kLanes = 8;
  auto fma = [](V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); };
  auto set = [](float x) { return _mm256_set1_ps(x); };
  auto sum = [](V v) {
    float f[8];
    _mm256_storeu_ps(f, v);
    return f[0] + f[1] + f[2] + f[3] + f[4] + f[5] + f[6] + f[7];
  };
#else
  using V = float;
  constexpr int kLanes = 1;
  auto fma = [](V a, V b, V c) { return a * b + c; };
  auto set = [](float x) { return x; };
  auto sum = [](V v) { return v; };
#endif
  (void)kLanes;
  V acc[16];
  for (int i = 0; i < 16; i++) acc[i] = set(float(i) * 1e-3f);
  const V mul = set(0.999999f), add = set(1e-7f);
  for (int64_t r = 0; r < rounds; r++)
    for (int i = 0; i < 16; i++) acc[i] = fma(acc[i], mul, add);
  float total = 0;
  for (int i = 0; i < 16; i++) total += sum(acc[i]);
  return double(total);
}
inline constexpr int kFmaPeakLanes =
#if defined(__AVX512F__)
    16;
#elif defined(__FMA__)
    8;
#else
    1;
#endif

// Registers the rows; the caller runs Google Benchmark. Shapes met twice are measured once.
template <class Corpus>
void register_kernel_rows(const std::vector<InstanceSpec>& instances, const Corpus& corpus) {
  std::set<std::string> seen;
  for (const InstanceSpec& spec : instances)
    for (MatmulShape& m : matmul_shapes_of(spec, corpus)) {
      const std::string shape =
          std::string(tensor_op_names[int(m.op)]) + "[" + operand_shapes(m.shape) +
          (m.shape.arg[0] ? m.op == TensorOp::linear ? ",relu" : ",t" : "") + "]";
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
              bench.run(k);  // warm: caches, JIT
              for (auto _ : state) bench.run(k);
              state.counters["flops"] = flops;
              state.counters["gflops"] =
                  benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
              state.counters["auto"] = chosen;
              state.counters["auto_seconds"] = auto_seconds;
            })
            ->Unit(benchmark::kMicrosecond);
      }
    }
  benchmark::RegisterBenchmark("peak/fma_f32/threads:1", [](benchmark::State& state) {
    constexpr int64_t kRounds = 1 << 20;
    for (auto _ : state) {
      int64_t rounds = kRounds;  // opaque to the compiler: the loop cannot be folded or hoisted
      benchmark::DoNotOptimize(rounds);
      benchmark::DoNotOptimize(fma_peak_loop(rounds));
    }
    const double flops = double(kRounds) * 16 * kFmaPeakLanes * 2;
    state.counters["flops"] = flops;
    state.counters["gflops"] =
        benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  })->Unit(benchmark::kMicrosecond);
}

}  // namespace bp
