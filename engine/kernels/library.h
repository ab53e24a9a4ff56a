// engine/kernels/library.h: matrix products from the libraries Debian packages, as product
// policies for the matmul dialects (engine/dialects/dialects.h).
//
// Each policy runs c (M, N) += op(a) op(b) for row-major buffers, as engine/kernels/products.h's
// TiledGemm does, and says for which element types and shapes it can: OpenBLAS (cblas), BLIS (its
// typed API, which takes any strides, so a transposed operand is only other strides), LIBXSMM (JIT
// small-matrix kernels: a shape it cannot generate is unavailable, never a silent fallback) and
// oneDNN (dnnl_sgemm: float only). A library the build did not find (CMake sets BP_HAVE_<NAME>)
// leaves a policy with in_build = false: its dialect is reported absent and forcing it is refused.
// None needs scratch but LIBXSMM's: the libraries pack operands in their own buffers.
//
// Loaded on first use: OpenBLAS, BLIS and oneDNN are opened with dlopen (RTLD_LOCAL) the first
// time a dialect of theirs is asked whether it can run, never at start: linked, their loading
// alone is megabytes of resident memory in every process, scalar graphs included; opened apart,
// BLIS's and OpenBLAS's cblas symbols cannot stand in for each other either. A library that does
// not open leaves its dialect unavailable. LIBXSMM comes only as a static archive (0.4 MB): linked.
//
// Threads: set_library_threads gives every library the run's thread count as it opens, so that
// a dialect never brings more cores to a comparison than the other backends have.
// Tests: engine/dialects/dialects_test.cc.
#pragma once

#include <dlfcn.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <string>
#include <type_traits>

#include "engine/kernels/products.h"

#if BP_HAVE_OPENBLAS
#include <openblas-pthread/cblas.h>
#endif
#if BP_HAVE_BLIS
#include <blis.h>
#endif
#if BP_HAVE_LIBXSMM
#include <libxsmm.h>
#endif
#if BP_HAVE_ONEDNN
#include <oneapi/dnnl/dnnl.h>
#endif

namespace bp {

// The thread count every library gets (set_library_threads).
inline int& library_threads() {
  static int threads = 1;
  return threads;
}

// Whether this process has run any library's code yet (opened one, or had LIBXSMM generate a
// kernel): auto then times candidates in a child process only while it has not
// (engine/dialects/dialects.h), since a library's threads do not survive fork().
inline bool& libraries_entered() {
  static bool entered = false;
  return entered;
}

// A shared library opened on first use, or null when it does not open (the reason on stderr,
// once). RTLD_LOCAL: its symbols stay its own.
// The thread counts go into the environment first: OpenBLAS starts its worker threads as it
// loads (idle ones still poll with sched_yield, seen in profiles), and OpenMP reads its count
// when libgomp loads.
inline void* open_library(const char* path) {
  const std::string threads = std::to_string(library_threads());
  for (const char* name : {"OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "BLIS_NUM_THREADS"})
    setenv(name, threads.c_str(), 1);
  libraries_entered() = true;
  void* handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!handle) std::fprintf(stderr, "warning: %s: dialect unavailable\n", dlerror());
  return handle;
}
template <class F>
F symbol_of(void* handle, const char* name) {
  return handle ? reinterpret_cast<F>(dlsym(handle, name)) : nullptr;
}
// OpenMP's thread count, for a library built on it (BLIS's and oneDNN's Debian builds).
inline void set_openmp_threads(void* handle, int threads) {
  if (auto set = symbol_of<void (*)(int)>(handle, "omp_set_num_threads")) set(threads);
}
// A BLAS-like library's float and double products and its thread setter, resolved once from the
// library at `path` and given library_threads() (and OpenMP's count too, when `openmp`); null
// when the library or any of the three is missing. Api: {sgemm, dgemm, set_threads} pointers.
template <class Api>
const Api* load_blas(const char* path, const char* sgemm, const char* dgemm,
                     const char* set_threads, bool openmp) {
  static Api a;
  void* h = open_library(path);
  a = {symbol_of<decltype(a.sgemm)>(h, sgemm), symbol_of<decltype(a.dgemm)>(h, dgemm),
       symbol_of<decltype(a.set_threads)>(h, set_threads)};
  if (!a.sgemm || !a.dgemm || !a.set_threads) return nullptr;
  a.set_threads(library_threads());
  if (openmp) set_openmp_threads(h, library_threads());
  return &a;
}

// A library's call failed at run time (oneDNN returns a status): one line, stop.
[[noreturn]] inline void library_failure(const char* library, int status, int32_t M, int32_t N,
                                         int32_t K) {
  std::fprintf(stderr, "%s gemm (M, N, K) = (%d, %d, %d) failed with status %d\n", library, M, N, K,
               status);
  std::abort();
}

// What a policy without its library compiles to: never available, never run.
struct AbsentGemm {
  static constexpr bool in_build = false;
  static constexpr bool library = true;
  template <class T>
  static void run(T*, const T*, bool, const T*, bool, int32_t, int32_t, int32_t, T*, bool) {
    std::abort();  // unreachable: dialects.h never selects a kernel that is not in the build
  }
  template <class T>
  static bool available(int32_t, int32_t, int32_t, bool, bool) {
    return false;
  }
  static size_t scratch_elems(int32_t, int32_t, int32_t, bool, bool) { return 0; }
};

// A library's product: its code and tables are resident once the library is opened (dialects.h:
// auto under a memory budget leaves them out).
struct LibraryGemmBase {
  static constexpr bool in_build = true;
  static constexpr bool library = true;
  static size_t scratch_elems(int32_t, int32_t, int32_t, bool, bool) { return 0; }
};

#if BP_HAVE_OPENBLAS
struct OpenBlasGemm : LibraryGemmBase {
  struct Api {
    decltype(&cblas_sgemm) sgemm;
    decltype(&cblas_dgemm) dgemm;
    decltype(&openblas_set_num_threads) set_threads;
  };
  static const Api* api() {  // null: it did not open
    static const Api* loaded = load_blas<Api>(BP_OPENBLAS_PATH, "cblas_sgemm", "cblas_dgemm",
                                              "openblas_set_num_threads", false);
    return loaded;
  }
  template <class T>
  static void run(T* c, const T* a, bool trans_a, const T* b, bool trans_b, int32_t M, int32_t N,
                  int32_t K, T*, bool fresh) {
    const CBLAS_TRANSPOSE ta = trans_a ? CblasTrans : CblasNoTrans,
                          tb = trans_b ? CblasTrans : CblasNoTrans;
    const T beta = fresh ? 0 : 1;  // BLAS reads no c when beta is 0
    if constexpr (std::is_same_v<T, float>)
      api()->sgemm(CblasRowMajor, ta, tb, M, N, K, 1.0f, a, trans_a ? M : K, b, trans_b ? K : N,
                   beta, c, N);
    else
      api()->dgemm(CblasRowMajor, ta, tb, M, N, K, 1.0, a, trans_a ? M : K, b, trans_b ? K : N,
                   beta, c, N);
  }
  template <class T>
  static bool available(int32_t, int32_t, int32_t, bool, bool) {
    return api() != nullptr;
  }
};
#else
using OpenBlasGemm = AbsentGemm;
#endif

#if BP_HAVE_BLIS
// BLIS takes a row stride and a column stride per operand: op(a)(i, k) = a[i rs + k cs].
struct BlisGemm : LibraryGemmBase {
  struct Api {
    decltype(&bli_sgemm) sgemm;
    decltype(&bli_dgemm) dgemm;
    decltype(&bli_thread_set_num_threads) set_threads;
  };
  static const Api* api() {  // null: it did not open
    static const Api* loaded =
        load_blas<Api>(BP_BLIS_PATH, "bli_sgemm", "bli_dgemm", "bli_thread_set_num_threads", true);
    return loaded;
  }
  template <class T>
  static void run(T* c, const T* a, bool trans_a, const T* b, bool trans_b, int32_t M, int32_t N,
                  int32_t K, T*, bool fresh) {
    T one = 1, beta = fresh ? 0 : 1;  // BLIS reads no c when beta is 0
    const inc_t rsa = trans_a ? 1 : K, csa = trans_a ? M : 1;
    const inc_t rsb = trans_b ? 1 : N, csb = trans_b ? K : 1;
    if constexpr (std::is_same_v<T, float>)
      api()->sgemm(BLIS_NO_TRANSPOSE, BLIS_NO_TRANSPOSE, M, N, K, &one, const_cast<T*>(a), rsa, csa,
                   const_cast<T*>(b), rsb, csb, &beta, c, N, 1);
    else
      api()->dgemm(BLIS_NO_TRANSPOSE, BLIS_NO_TRANSPOSE, M, N, K, &one, const_cast<T*>(a), rsa, csa,
                   const_cast<T*>(b), rsb, csb, &beta, c, N, 1);
  }
  template <class T>
  static bool available(int32_t, int32_t, int32_t, bool, bool) {
    return api() != nullptr;
  }
};
#else
using BlisGemm = AbsentGemm;
#endif

#if BP_HAVE_LIBXSMM
// LIBXSMM is column-major: the row-major c (M, N) is c^T (N, M) column-major, and
// c^T += op(b)^T op(a)^T, so b goes first. A kernel is generated (JIT) on first dispatch of a
// shape and cached by LIBXSMM; dispatch returns null for what it cannot generate. LIBXSMM 1.17
// generates no kernel with its first operand transposed, so a transposed b is copied (K, N) into
// scratch first, as the engine's tiled kernel does.
struct XsmmGemm {
  static constexpr bool in_build = true;
  static constexpr bool library = true;  // linked, but its code registry grows with each shape
  template <class T>
  static auto kernel(bool trans_a, int32_t M, int32_t N, int32_t K, bool fresh = false) {
    const libxsmm_blasint m = N, n = M, k = K;
    const libxsmm_blasint lda = N, ldb = trans_a ? M : K, ldc = N;
    const int flags = trans_a ? LIBXSMM_GEMM_FLAG_TRANS_B : 0;
    const T one = 1, beta = fresh ? 0 : 1;  // a kernel of beta 0 reads no c
    libraries_entered() = true;
    if constexpr (std::is_same_v<T, float>)
      return libxsmm_smmdispatch(m, n, k, &lda, &ldb, &ldc, &one, &beta, &flags, nullptr);
    else
      return libxsmm_dmmdispatch(m, n, k, &lda, &ldb, &ldc, &one, &beta, &flags, nullptr);
  }
  // The kernels asked for last, by shape: LIBXSMM's dispatch hashes the whole descriptor on every
  // call, where a step asks for the same few dozen shapes over and over. Per thread, as LIBXSMM's
  // own dispatch may be called from any.
  template <class T>
  static auto cached_kernel(bool trans_a, int32_t M, int32_t N, int32_t K, bool fresh) {
    struct Entry {
      int32_t M = -1, N = 0, K = 0;
      bool trans_a = false, fresh = false;
      decltype(kernel<T>(false, 0, 0, 0)) f = nullptr;
    };
    thread_local Entry cache[256];
    Entry& e =
        cache[(uint32_t(M) * 73 + uint32_t(N) * 31 + uint32_t(K) * 7 + trans_a * 2 + fresh) % 256];
    if (e.M != M || e.N != N || e.K != K || e.trans_a != trans_a || e.fresh != fresh)
      e = {M, N, K, trans_a, fresh, kernel<T>(trans_a, M, N, K, fresh)};
    return e.f;
  }
  template <class T>
  static void run(T* c, const T* a, bool trans_a, const T* b, bool trans_b, int32_t M, int32_t N,
                  int32_t K, T* scratch, bool fresh) {
    cached_kernel<T>(trans_a, M, N, K, fresh)(b_as_rows(b, trans_b, N, K, scratch), a, c);
  }
  template <class T>
  static bool available(int32_t M, int32_t N, int32_t K, bool trans_a, bool) {
    return kernel<T>(trans_a, M, N, K) && kernel<T>(trans_a, M, N, K, true);
  }
  static size_t scratch_elems(int32_t, int32_t N, int32_t K, bool, bool trans_b) {
    return trans_b ? scratch_round(size_t(K) * N) : 0;
  }
};
#else
using XsmmGemm = AbsentGemm;
#endif

#if BP_HAVE_ONEDNN
struct DnnlGemm : LibraryGemmBase {
  static decltype(&dnnl_sgemm) api() {  // null: it did not open
    static const decltype(&dnnl_sgemm) loaded = [] {
      void* h = open_library(BP_ONEDNN_PATH);
      set_openmp_threads(h, library_threads());
      return symbol_of<decltype(&dnnl_sgemm)>(h, "dnnl_sgemm");
    }();
    return loaded;
  }
  template <class T>
  static void run(T* c, const T* a, bool trans_a, const T* b, bool trans_b, int32_t M, int32_t N,
                  int32_t K, T*, bool fresh) {
    if constexpr (std::is_same_v<T, float>) {
      const dnnl_status_t s = api()(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', M, N, K, 1.0f, a,
                                    trans_a ? M : K, b, trans_b ? K : N, fresh ? 0.0f : 1.0f, c, N);
      if (s != dnnl_success) library_failure("oneDNN", int(s), M, N, K);
    } else {
      std::abort();  // unreachable: not available for double
    }
  }
  template <class T>
  static bool available(int32_t, int32_t, int32_t, bool, bool) {
    return std::is_same_v<T, float> && api();  // oneDNN 2.6 has no double gemm
  }
};
#else
using DnnlGemm = AbsentGemm;
#endif

// The run's thread count for every library, set before any opens (backend_main does, at start):
// each takes it as it opens (BLIS and oneDNN through OpenMP, on which Debian builds them).
inline void set_library_threads(int threads) { library_threads() = threads; }

}  // namespace bp
