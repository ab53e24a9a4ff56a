// engine/alloc_counter_test.h: counts operator new calls, for the tests that prove a steady-state
// step allocates nothing. Include it in exactly one test file of a binary (it replaces the global
// operator new and delete). The arenas' own blocks come from aligned_alloc/realloc; tests check
// those through the arenas' sizes and block counts instead.
#pragma once

#include <cstdlib>
#include <new>

// The replacement pair is malloc/free underneath, which GCC's mismatch check cannot see.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
inline long g_allocations = 0;
void* operator new(size_t n) {
  g_allocations++;
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
