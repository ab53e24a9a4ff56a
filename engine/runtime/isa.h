// engine/runtime/isa.h: which instruction set the engine runs, decided once per process: the
// processor's features read once, capped by BP_ISA. Every kernel family (the op tables,
// engine/core/ops.cc and ops_avx512.cc; the bf16 products, engine/kernels/bf16.h) and both code
// generators (engine/kernels/product_jit.h, engine/compiled/scalar_jit.h) ask isa() and nothing
// else, as OpenBLAS, oneDNN and PyTorch's dispatcher read the processor once and pick each kernel
// at run time.
//
// Levels: portable (x86-64-v2: SSE4.2, no AVX), avx2 (x86-64-v3: AVX2, FMA), avx512 (x86-64-v4:
// AVX-512 F, BW, VL, DQ, CD). The build's baseline (CMakeLists.txt: BP_ARCH, x86-64-v3 wherever
// the building processor has AVX2 and FMA) is the level every unit is compiled for; code above it
// sits in units of its own (engine/core/ops_avx512.cc), run only where isa() allows.
//
// BP_ISA=avx2|avx512|native in the environment caps the level, so that an AVX-512 machine runs
// (and its tests cover) the AVX2 kernels and generated code; a level the processor lacks, or a
// value that is none of these, stops the process in one line (exit 2). The level is recorded in
// every result (harness/common/environment.h).
//
// Tests: engine/runtime/isa_test.cc; `make check` runs the kernel, JIT and compiled tests again
// under BP_ISA=avx2 (CMakeLists.txt).
#pragma once

#include <cstdint>
#include <string>

namespace bp {

enum class Isa : uint8_t { portable, avx2, avx512 };
const char* isa_name(Isa i);

// What the processor has, read once (CPUID through GCC's __builtin_cpu_supports).
struct CpuFeatures {
  bool avx = false, avx2 = false, fma = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512dq = false, avx512cd = false;
  bool avx512bf16 = false;
  Isa best() const;                      // the highest level all of whose features are here
  std::string missing(Isa level) const;  // the features of `level` it lacks, space-separated
};
const CpuFeatures& cpu_features();

// The level the baseline of this build is compiled for (BP_ARCH): code at or below it runs on any
// processor the binary starts on.
Isa build_baseline();

// The highest level this build holds kernels for: avx512 where the AVX-512 unit is built (a
// baseline of x86-64-v3), else the baseline's (x86-64-v2: portable code only).
Isa build_best();

// The level a cap asks for on a processor with `features`, in a build whose kernels go up to
// `built`: "native" or empty (or null) is the best both allow; a level the processor lacks, one
// above `built`, or an unknown name is an error with the reason in `error`.
bool isa_from(const char* cap, const CpuFeatures& features, Isa* level, std::string* error,
              Isa built = build_best());

// The level this process runs: the processor's best, capped by the build's (build_best) and by
// BP_ISA, decided at the first call.
// A bad BP_ISA stops the process: "BP_ISA: ..." on stderr, exit 2.
Isa isa();
// The same, as a result records it: "avx512", or "avx2 (BP_ISA=avx2 on a processor with avx512)".
std::string isa_description();

// A bf16 dot product in hardware: AVX512_BF16 (with F, BW, VL) and the level avx512.
bool isa_has_dot_bf16();

}  // namespace bp
