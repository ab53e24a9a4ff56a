// engine/blas.h: OpenBLAS's cblas_sgemm, loaded on first use with dlopen.
//
// The engine's own kernels win on small matrices (no call overhead, no packing); OpenBLAS's
// packed, assembly-tuned sgemm wins on large ones. It is loaded only when a matmul crosses
// kBlasMinMacs, so scalar benchmarks and small models never map it (their RSS stays the engine's).
// Single-threaded, like the rest of the engine. BACKPROP_BENCH_ENGINE_BLAS=0 disables it, to
// measure the engine's own kernels alone; blas_status() says which applies, for the results.
#pragma once

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <string>

namespace bp {

// Multiply-adds from which a float matmul goes to OpenBLAS (measured on char_mlp and mlp_width:
// README, "Kernels").
inline constexpr double kBlasMinMacs = 1 << 21;

// cblas.h's row-major constants; Debian's libopenblas0 uses 32-bit ints (LP64).
enum { kCblasRowMajor = 101, kCblasNoTrans = 111, kCblasTrans = 112 };
using SgemmFn = void (*)(int order, int trans_a, int trans_b, int M, int N, int K, float alpha,
                         const float* A, int lda, const float* B, int ldb, float beta, float* C,
                         int ldc);

struct BlasLibrary {
  SgemmFn sgemm = nullptr;
  std::string status;
};

inline bool blas_disabled() {
  const char* flag = std::getenv("BACKPROP_BENCH_ENGINE_BLAS");
  return flag && std::strcmp(flag, "0") == 0;
}

// What the engine will do, without loading anything (for the results' context).
inline std::string blas_policy() {
  return blas_disabled() ? "own kernels only (BACKPROP_BENCH_ENGINE_BLAS=0)"
                         : "own kernels; OpenBLAS cblas_sgemm (dlopen on first use, 1 thread) "
                           "for float matmuls of >= 2^21 multiply-adds";
}

inline const BlasLibrary& blas_library() {
  static const BlasLibrary lib = [] {
    BlasLibrary l;
    if (blas_disabled()) {
      l.status = blas_policy();
      return l;
    }
    setenv("OPENBLAS_NUM_THREADS", "1", 0);  // read by OpenBLAS when it loads
    void* handle = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_LOCAL);
    if (handle) l.sgemm = reinterpret_cast<SgemmFn>(dlsym(handle, "cblas_sgemm"));
    if (auto set = handle ? reinterpret_cast<void (*)(int)>(dlsym(handle, "openblas_set_num_threads"))
                          : nullptr)
      set(1);
    l.status = l.sgemm ? "own kernels; OpenBLAS cblas_sgemm (1 thread) from 2^21 multiply-adds"
                       : "own kernels only (libopenblas.so.0 not loadable)";
    return l;
  }();
  return lib;
}

}  // namespace bp
