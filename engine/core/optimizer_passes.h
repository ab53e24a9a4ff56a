// engine/core/optimizer_passes.h: the optimizer's passes over the flat buffers (SGD, AdamW, the
// finiteness check and the bandwidth probe), split over the pool in chunks. Kernels: compiled in
// each instruction-set unit (engine/core/op_table.h's make_optimizer_passes) and reached through
// optimizer_passes<T>() (engine/core/op_args.h); engine/core/optimizer.h says what they do.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <type_traits>

#include "engine/core/op_args.h"
#include "engine/core/ops.h"
#include "engine/kernels/bf16.h"
#include "engine/kernels/isa_namespace.h"
#include "engine/kernels/kernels.h"

namespace bp {
BP_KERNELS_BEGIN

// update(b, e) over [b, e) in blocks, each block's values then rounded into the bf16 copy while
// they are in cache (float only; a pass of its own would read every value again).
inline constexpr size_t kHalfBlock = 4096;
template <class T, class F>
void update_with_half(const FlatView<T>& f, size_t b, size_t e, F&& update) {
  if (!f.half) return update(b, e);
  for (size_t i = b; i < e; i += kHalfBlock) {
    const size_t j = std::min(e, i + kHalfBlock);
    update(i, j);
    if constexpr (std::is_same_v<T, float>) bf16::from_floats(f.half + i, f.values + i, j - i);
  }
}

// The passes over n elements of the flat buffers, split over the pool in chunks
// (engine/core/ops.h's for_chunks): elementwise, so the same bits at any split.
template <class T>
bool finite_pass(const T* grads, size_t n) {
  std::atomic<bool> finite{true};
  ops::for_chunks(n, [&](size_t b, size_t e) {
    if (!all_finite(grads + b, e - b)) finite.store(false, std::memory_order_relaxed);
  });
  return finite.load(std::memory_order_relaxed);
}
template <class T>
void sgd_pass(const FlatView<T>& f, T lr, size_t n) {
  ops::for_chunks(n, [&](size_t b, size_t e) {
    update_with_half(f, b, e,
                     [&](size_t i, size_t j) { sgd_update(f.values + i, f.grads + i, lr, j - i); });
  });
}
template <class T>
void adamw_pass(const FlatView<T>& f, const AdamWStep<T>& k, size_t n) {
  ops::for_chunks(n, [&](size_t b, size_t e) {
    update_with_half(f, b, e, [&](size_t i, size_t j) {
      adamw_update(f.values + i, f.grads + i, f.m + i, f.v + i, k, j - i);
    });
  });
}

// AdamW's bytes moved with an add of zero for arithmetic: 16 read and 12 written per element,
// the memory-bandwidth bound an update is measured against (bench_engine --optimizer=stream).
// Adding g * 0 keeps every value (the gradients are finite) and cannot be optimised away.
template <class T>
void stream_pass(const FlatView<T>& f, size_t n) {
  ops::for_chunks(n, [&](size_t b, size_t e) {
#pragma omp simd
    for (size_t j = b; j < e; j++) {
      const T zero = f.grads[j] * T(0);
      f.values[j] += zero, f.m[j] += zero, f.v[j] += zero;
    }
  });
}

BP_KERNELS_END
}  // namespace bp
