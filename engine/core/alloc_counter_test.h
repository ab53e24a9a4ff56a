// engine/core/alloc_counter_test.h: counts every heap allocation of the process, for the tests that
// prove a steady-state step allocates nothing. Include it in exactly one test file of a binary;
// those tests skip themselves under AddressSanitizer (kCountingAllocations).
//
// It replaces malloc, calloc, realloc, aligned_alloc, posix_memalign and memalign (operator new
// calls malloc, so it is counted too) with wrappers around glibc's own __libc_* entry points. A
// tape that grows with realloc, or an arena that adds a block with aligned_alloc, is therefore
// seen like any `new`; the tests also show that the counter does see each of them.
#pragma once

#include <cerrno>
#include <cstddef>

inline long g_allocations = 0;  // constant-initialized: valid before any constructor runs

#if defined(__SANITIZE_ADDRESS__)
// AddressSanitizer replaces malloc and friends itself (make sanitize); the plain build counts.
inline constexpr bool kCountingAllocations = false;
#else
inline constexpr bool kCountingAllocations = true;

extern "C" {
void* __libc_malloc(size_t);
void* __libc_calloc(size_t, size_t);
void* __libc_realloc(void*, size_t);
void* __libc_memalign(size_t, size_t);

void* malloc(size_t n) {
  g_allocations++;
  return __libc_malloc(n);
}
void* calloc(size_t n, size_t size) {
  g_allocations++;
  return __libc_calloc(n, size);
}
void* realloc(void* p, size_t n) {
  g_allocations++;
  return __libc_realloc(p, n);
}
void* aligned_alloc(size_t alignment, size_t n) {
  g_allocations++;
  return __libc_memalign(alignment, n);
}
void* memalign(size_t alignment, size_t n) {
  g_allocations++;
  return __libc_memalign(alignment, n);
}
// noexcept as glibc and GCC's mm_malloc.h declare it, whichever header a unit includes after this
// (the x86-64-v2 build's unity file met mm_malloc.h's declaration second, and refused a mismatch).
int posix_memalign(void** out, size_t alignment, size_t n) noexcept {
  g_allocations++;
  *out = __libc_memalign(alignment, n);
  return *out ? 0 : ENOMEM;
}
}
#endif
