// engine/core/optimizer.h: parameters, their gradients and the optimizer's state in flat buffers,
// and SGD and AdamW as one fused pass over them that commits only a finite step.
//
// Every trained parameter is a range of one flat buffer per role (its values, its gradient,
// AdamW's two moments), each range starting on a cache line: an update is one loop over a few
// long arrays, not a loop over tensors, and it splits evenly over threads.
//
// Sync-free, exact skip, by deferred commit: the pass reads the values, gradients and moments,
// writes the new values and moments into a second set of buffers, and checks every gradient for
// NaN or Inf in the same loop (engine/kernels/kernels.h). One decision ends the step: all finite,
// and the two sets swap (pointers only); else nothing swaps, so values, moments and the step
// count stay bitwise what they were, and the step is counted as skipped. Since the pass never
// writes what it reads, it can run piece by piece while the backward still reads the values (the
// compiled mode issues each parameter's piece as soon as its gradient is final) and still be
// dropped for free. The price is memory: a second copy of the values, and of AdamW's moments
// (rollback would need the same copy, written as well as read). Gradients stay where they are,
// readable after the step. dev/notes.md, "A sync-free fused optimizer".
//
// Not here: gradient clipping, loss scaling, other optimizers. Tests: engine/core/tensor_test.cc.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <span>
#include <utility>

#include "engine/core/threads.h"
#include "engine/kernels/kernels.h"

namespace bp {

// The buffers one update reads and writes, each `size` elements (null where the optimizer has
// none: SGD keeps no moments).
template <class T>
struct FlatView {
  const T *values = nullptr, *grads = nullptr, *m = nullptr, *v = nullptr;
  T *next_values = nullptr, *next_m = nullptr, *next_v = nullptr;
};

// The fused passes over elements [lo, hi), split over the pool in chunks of whole cache lines;
// false if any gradient there is NaN or Inf. Elementwise: the same bits at any split.
template <class T, class F>
bool for_flat_chunks(size_t lo, size_t hi, F&& f) {
  constexpr size_t kChunk = 64 / sizeof(T);
  std::atomic<bool> finite{true};
  const size_t n = hi - lo;
  parallel_for(int64_t((n + kChunk - 1) / kChunk), split_thresholds().elems / int64_t(kChunk),
               [&](int64_t c0, int64_t c1) {
                 const size_t b = lo + size_t(c0) * kChunk,
                              e = std::min(hi, lo + size_t(c1) * kChunk);
                 if (!f(b, e - b)) finite.store(false, std::memory_order_relaxed);
               });
  return finite.load(std::memory_order_relaxed);
}
template <class T>
bool sgd_pass(const FlatView<T>& f, T lr, size_t lo, size_t hi) {
  return for_flat_chunks<T>(lo, hi, [&](size_t b, size_t n) {
    return sgd_update(f.values + b, f.grads + b, f.next_values + b, lr, n);
  });
}
template <class T>
bool adamw_pass(const FlatView<T>& f, const AdamWStep<T>& k, size_t lo, size_t hi) {
  return for_flat_chunks<T>(lo, hi, [&](size_t b, size_t n) {
    return adamw_update(f.values + b, f.grads + b, f.m + b, f.v + b, f.next_values + b,
                        f.next_m + b, f.next_v + b, k, n);
  });
}

// The flat buffers of one graph's trained parameters. Parameters are appended before the first
// step (the buffers grow, and move, as they come); the update's buffers are made at its first
// step.
template <class T>
class FlatParams {
 public:
  static constexpr size_t kAlign = 64 / sizeof(T);  // each parameter starts on a cache line

  // Appends a parameter holding `init`; returns its offset. Its padding up to the next cache
  // line is zero in every buffer, where every update keeps it zero.
  size_t add(std::span<const T> init) {
    const size_t at = size_, padded = round_up(init.size());
    if (at + padded > capacity_) {
      const size_t capacity = std::max({2 * capacity_, at + padded, size_t(1) << 12});
      value_.grow(at, capacity), grad_.grow(at, capacity);
      capacity_ = capacity;
    }
    std::copy(init.begin(), init.end(), value_.data + at);
    size_ = at + padded;
    return at;
  }
  static size_t round_up(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

  size_t size() const { return size_; }  // elements, padding included
  T* values() const { return value_.data; }
  T* grads() const { return grad_.data; }
  bool has_moments() const { return m_.data != nullptr; }
  FlatView<T> view() const {
    return {value_.data,      grad_.data,   m_.data,     v_.data,
            next_value_.data, next_m_.data, next_v_.data};
  }
  // Bytes held, for the arena figures: every buffer made so far.
  size_t bytes() const {
    size_t n = 0;
    for (const Buffer* b : {&value_, &grad_, &m_, &v_, &next_value_, &next_m_, &next_v_})
      n += b->capacity;
    return n * sizeof(T);
  }

  // The buffers an update writes (and AdamW's moments, zero), made once.
  void prepare(bool adamw) {
    if (!next_value_.data) next_value_.grow(0, size_);
    if (adamw && !m_.data)
      m_.grow(0, size_), v_.grow(0, size_), next_m_.grow(0, size_), next_v_.grow(0, size_);
  }
  // The new values (and moments) become the current ones.
  void commit(bool adamw) {
    std::swap(value_, next_value_);
    if (adamw) std::swap(m_, next_m_), std::swap(v_, next_v_);
  }

 private:
  struct Buffer {
    T* data = nullptr;
    size_t capacity = 0;
    Buffer() = default;
    Buffer(const Buffer&) = delete;
    Buffer& operator=(const Buffer&) = delete;
    Buffer(Buffer&& o) noexcept : data(std::exchange(o.data, nullptr)), capacity(o.capacity) {}
    Buffer& operator=(Buffer&& o) noexcept {
      std::swap(data, o.data), std::swap(capacity, o.capacity);
      return *this;
    }
    ~Buffer() { std::free(data); }
    // `capacity` elements, the first `keep` copied, the rest zero.
    void grow(size_t keep, size_t n) {
      T* p = static_cast<T*>(
          std::aligned_alloc(64, (std::max<size_t>(n, 1) * sizeof(T) + 63) / 64 * 64));
      if (!p) throw std::bad_alloc();  // as `new` would: the caller decides what it means
      if (keep) std::memcpy(p, data, keep * sizeof(T));
      std::memset(p + keep, 0, (n - keep) * sizeof(T));
      std::free(data);
      data = p, capacity = n;
    }
  };
  Buffer value_, grad_, m_, v_, next_value_, next_m_, next_v_;
  size_t size_ = 0, capacity_ = 0;
};

}  // namespace bp
