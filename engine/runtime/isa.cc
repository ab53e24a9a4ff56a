// engine/runtime/isa.cc: the processor's features, read once, and the cap BP_ISA
// (engine/runtime/isa.h says what each level is and who asks).
#include "engine/runtime/isa.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace bp {

const char* isa_name(Isa i) {
  return i == Isa::avx512 ? "avx512" : i == Isa::avx2 ? "avx2" : "portable";
}

Isa CpuFeatures::best() const {
  if (avx512f && avx512bw && avx512vl && avx512dq && avx512cd && avx2 && fma) return Isa::avx512;
  if (avx && avx2 && fma) return Isa::avx2;
  return Isa::portable;
}

std::string CpuFeatures::missing(Isa level) const {
  std::string out;
  const auto need = [&](bool has, const char* name) {
    if (!has) out += (out.empty() ? "" : " ") + std::string(name);
  };
  if (level >= Isa::avx2) need(avx, "avx"), need(avx2, "avx2"), need(fma, "fma");
  if (level >= Isa::avx512) {
    need(avx512f, "avx512f"), need(avx512bw, "avx512bw"), need(avx512vl, "avx512vl");
    need(avx512dq, "avx512dq"), need(avx512cd, "avx512cd");
  }
  return out;
}

const CpuFeatures& cpu_features() {
  static const CpuFeatures features = [] {
    CpuFeatures f;
#if defined(__x86_64__)
    __builtin_cpu_init();
    f.avx = __builtin_cpu_supports("avx"), f.avx2 = __builtin_cpu_supports("avx2");
    f.fma = __builtin_cpu_supports("fma");
    f.avx512f = __builtin_cpu_supports("avx512f"), f.avx512bw = __builtin_cpu_supports("avx512bw");
    f.avx512vl = __builtin_cpu_supports("avx512vl"),
    f.avx512dq = __builtin_cpu_supports("avx512dq");
    f.avx512cd = __builtin_cpu_supports("avx512cd");
    f.avx512bf16 = __builtin_cpu_supports("avx512bf16");
#endif
    return f;
  }();
  return features;
}

Isa build_baseline() {
#if defined(__AVX512F__)
  return Isa::avx512;
#elif defined(__AVX2__) && defined(__FMA__)
  return Isa::avx2;
#else
  return Isa::portable;
#endif
}

Isa build_best() {
#if defined(BP_AVX512_UNIT)
  return Isa::avx512;
#else
  return build_baseline();
#endif
}

bool isa_from(const char* cap, const CpuFeatures& features, Isa* level, std::string* error,
              Isa built) {
  const Isa best = std::min(features.best(), built);
  const std::string valid = best == Isa::avx512 ? "avx2, avx512, native"
                            : best == Isa::avx2 ? "avx2, native"
                                                : "native";
  if (!cap || !*cap || std::strcmp(cap, "native") == 0) {
    *level = best;
    return true;
  }
  Isa asked;
  if (std::strcmp(cap, "avx2") == 0) {
    asked = Isa::avx2;
  } else if (std::strcmp(cap, "avx512") == 0) {
    asked = Isa::avx512;
  } else {
    *error = "'" + std::string(cap) + "' is not a level (valid here: " + valid + ")";
    return false;
  }
  if (asked > features.best()) {
    *error = std::string(cap) + " needs what this processor lacks: " + features.missing(asked) +
             " (valid here: " + valid + ")";
    return false;
  }
  if (asked > built) {
    *error = std::string(cap) + ": this build holds no kernels above " + isa_name(built) +
             " (CMakeLists.txt: BP_ARCH; valid here: " + valid + ")";
    return false;
  }
  // Below the build's baseline nothing can run: the whole binary is compiled for it.
  if (asked < build_baseline()) {
    *error = std::string(cap) + " is below this build's baseline, " + isa_name(build_baseline()) +
             " (CMakeLists.txt: BP_ARCH)";
    return false;
  }
  *level = asked;
  return true;
}

Isa isa() {
  static const Isa level = [] {
    Isa l = Isa::portable;
    std::string error;
    if (!isa_from(std::getenv("BP_ISA"), cpu_features(), &l, &error)) {
      std::fprintf(stderr, "BP_ISA: %s\n", error.c_str());
      std::exit(2);
    }
    return l;
  }();
  return level;
}

std::string isa_description() {
  const Isa best = cpu_features().best();
  if (isa() == best) return isa_name(best);
  const char* cap = std::getenv("BP_ISA");
  const std::string why = isa() == build_best() && (!cap || !*cap || !std::strcmp(cap, "native"))
                              ? std::string("this build's kernels go no higher")
                              : std::string("BP_ISA=") + cap;
  return std::string(isa_name(isa())) + " (" + why + " on a processor with " + isa_name(best) + ")";
}

bool isa_has_dot_bf16() { return isa() == Isa::avx512 && cpu_features().avx512bf16; }

// A binary built for more than the processor has would die on its first such instruction with
// SIGILL, wherever that falls. This runs before any other initializer of the program (priority
// 101) and is compiled for the plainest x86-64, so it can say so in one line instead.
#if defined(__x86_64__)
namespace {
__attribute__((constructor(101), target("arch=x86-64,no-avx,no-avx2,no-fma"))) void
refuse_a_processor_below_the_build() {
  __builtin_cpu_init();
  bool ok = true;
#if defined(__AVX2__) && defined(__FMA__)
  ok = ok && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#endif
#if defined(__AVX512F__)
  ok = ok && __builtin_cpu_supports("avx512f");
#endif
  if (ok) return;
  static const char line[] =
      "backprop-bench: this build's baseline (CMakeLists.txt: BP_ARCH) needs instructions this "
      "processor lacks; rebuild on it: make clean && make\n";
  (void)!write(2, line, sizeof line - 1);
  _exit(2);
}
}  // namespace
#endif

}  // namespace bp
