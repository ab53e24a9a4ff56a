// harness/common/isa_cap.h: bench_run --isa, one instruction-set level for every backend. Each
// library that picks its kernels at run time has its own documented cap, read from the
// environment when it starts; the runner sets all of them in each backend process:
//   ours          BP_ISA               (engine/runtime/isa.h)
//   libtorch, PyTorch, TorchScript: ATen's kernels  ATEN_CPU_CAPABILITY  (avx2, avx512)
//   oneDNN (ours as a dialect, torch's inside)       DNNL_MAX_CPU_ISA     (AVX2, AVX512_CORE_BF16)
//   OpenBLAS (ours as a dialect, torch's BLAS)       OPENBLAS_CORETYPE    (Haswell, SkylakeX)
//   libxsmm (ours as a dialect)                      LIBXSMM_TARGET       (hsw, skx, cpx)
// BLIS needs none: Debian's build holds no AVX-512 kernels (its configurations are zen3, zen2,
// zen, haswell, sandybridge and generic), so it never runs above avx2.
//
// Without --isa a run caps every library at the processor's best level (default_isa_level), so
// that all run the same instruction sets. `native` sets nothing: each library makes its own
// choice, as it ships (torch 1.13's ATen runs its AVX2 kernels on an AVX-512 Zen 5 unless told
// otherwise), and whatever the caller's environment already says is kept and recorded. The levels
// are the engine's: avx2 is x86-64-v3 (AVX2, FMA), avx512 is x86-64-v4 (AVX-512 F, BW, VL, DQ, CD),
// with AVX512_BF16 where the processor has it (our bf16 products use it at that level, so the
// libraries may too).
//   Tests: harness/runner/results_test.cc (IsaCap*), harness/tests/test_run.py (--isa).
#pragma once

#include <algorithm>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "harness/common/text.h"

namespace bp {

inline constexpr const char* kIsaLevels = "avx2, avx512, native";
// The variables a cap sets: recorded, with their values, in every result (isa_cap_in_effect).
inline constexpr const char* kIsaCapVariables[] = {
    "BP_ISA", "ATEN_CPU_CAPABILITY", "DNNL_MAX_CPU_ISA", "OPENBLAS_CORETYPE", "LIBXSMM_TARGET"};

inline bool is_isa_level(std::string_view level) {
  return level == "avx2" || level == "avx512" || level == "native";
}

// The /proc/cpuinfo flags of `level` that `cpu_flags` (its "flags" line) lacks, space-separated;
// "" when it has them all (always for native).
inline std::string isa_level_missing(std::string_view level, const std::string& cpu_flags) {
  std::vector<const char*> needs;
  if (level == "avx2" || level == "avx512") needs = {"avx2", "fma"};
  if (level == "avx512")
    needs.insert(needs.end(), {"avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512cd"});
  const std::vector<std::string> has = fields(cpu_flags, ' ');
  std::string missing;
  for (const char* f : needs)
    if (std::find(has.begin(), has.end(), f) == has.end())
      missing += (missing.empty() ? "" : " ") + std::string(f);
  return missing;
}

// bench_run's level when --isa is not given: the processor's best of avx2 and avx512, so that
// every backend runs at the same one; native (no cap) on a processor with neither.
inline std::string default_isa_level(const std::string& cpu_flags) {
  for (const char* level : {"avx512", "avx2"})
    if (isa_level_missing(level, cpu_flags).empty()) return level;
  return "native";
}

// The environment of a backend process under `level` ("VAR=value" each); none for native.
inline std::vector<std::string> isa_cap_environment(std::string_view level,
                                                    const std::string& cpu_flags) {
  if (level == "avx2")
    return {"BP_ISA=avx2", "ATEN_CPU_CAPABILITY=avx2", "DNNL_MAX_CPU_ISA=AVX2",
            "OPENBLAS_CORETYPE=Haswell", "LIBXSMM_TARGET=hsw"};
  if (level != "avx512") return {};
  const std::vector<std::string> has = fields(cpu_flags, ' ');
  const bool bf16 = std::find(has.begin(), has.end(), "avx512_bf16") != has.end();
  return {"BP_ISA=avx512", "ATEN_CPU_CAPABILITY=avx512", "DNNL_MAX_CPU_ISA=AVX512_CORE_BF16",
          bf16 ? "OPENBLAS_CORETYPE=Cooperlake" : "OPENBLAS_CORETYPE=SkylakeX",
          bf16 ? "LIBXSMM_TARGET=cpx" : "LIBXSMM_TARGET=skx"};
}

// What this process's environment caps, as its results record it: "BP_ISA=avx2 ..." or "none
// (each library's own choice)".
inline std::string isa_cap_in_effect() {
  std::string out;
  for (const char* name : kIsaCapVariables)
    if (const char* value = std::getenv(name); value && *value)
      out += (out.empty() ? "" : " ") + std::string(name) + "=" + value;
  return out.empty() ? "none (each library's own choice)" : out;
}

}  // namespace bp
