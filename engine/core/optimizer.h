// engine/core/optimizer.h: parameters, their gradients and the optimizer's state in flat buffers,
// and SGD and AdamW as one pass over them that never applies a step with a NaN or Inf gradient.
//
// Every trained parameter is a range of one flat buffer per role (its values, its gradient,
// AdamW's two moments), each range starting on a cache line: an update is one loop over a few
// long arrays, not a loop over tensors, and it splits evenly over threads.
//
// Exact skip, check first: every gradient is checked for NaN or Inf (engine/kernels/kernels.h's
// all_finite) before anything is written; a step with one is counted and changes nothing, so
// values, moments and the step count stay bitwise what they were; else the update runs in place.
// The compiled mode takes the same step over the same buffers. Two designs that would let the
// update start inside the backward were built and measured slower (dev/notes.md, "A sync-free
// optimizer: check first, update in place"): out of place into a second set of buffers committed
// by a swap (deferred commit), and each gradient checked in the backward as soon as it is final.
//
// Under mixed precision the values also have a bf16 copy (make_half), rewritten in the same pass,
// block by block, so that no step converts a weight.
//
// Not here: gradient clipping, loss scaling, other optimizers. Tests:
// engine/core/optimizer_test.cc.
#pragma once

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <span>
#include <type_traits>
#include <utility>

#include "engine/core/ops.h"
#include "engine/kernels/bf16.h"
#include "engine/kernels/kernels.h"
#include "engine/runtime/arena.h"

namespace bp {

struct AdamWConfig {  // torch.optim.AdamW's defaults, so both backends run the same update
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.01;
};

// The passes over the flat buffers (engine/core/optimizer_passes.h), compiled in each
// instruction-set unit as the ops are, through the tables of the level the process runs.
template <class T>
bool finite_pass(const T* grads, size_t n) {
  return optimizer_passes<T>().finite(grads, n);
}
template <class T>
void sgd_pass(const FlatView<T>& f, T lr, size_t n) {
  optimizer_passes<T>().sgd(f, lr, n);
}
template <class T>
void adamw_pass(const FlatView<T>& f, const AdamWStep<T>& k, size_t n) {
  optimizer_passes<T>().adamw(f, k, n);
}
template <class T>
void stream_pass(const FlatView<T>& f, size_t n) {
  optimizer_passes<T>().stream(f, n);
}

// The flat buffers of one graph's trained parameters. Parameters are appended before the first
// step (the buffers grow, and move, as they come); AdamW's moments are made at its first step.
template <class T>
class FlatParams {
 public:
  static constexpr size_t kAlign = 64 / sizeof(T);  // each parameter starts on a cache line

  // Appends a parameter holding `init`; returns its offset. Its padding up to the next cache
  // line is zero in every buffer, where every update keeps it zero.
  size_t add(std::span<const T> init) {
    const size_t at = size_, padded = round_up(init.size());
    value_.grow(at + padded), grad_.grow(at + padded);
    std::copy(init.begin(), init.end(), value_.data + at);
    size_ = at + padded;
    if constexpr (std::is_same_v<T, float>)
      if (keeps_half_)
        half_.grow(size_), bf16::from_floats(half_.data + at, value_.data + at, padded);
    return at;
  }
  static size_t round_up(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

  size_t size() const { return size_; }  // elements, padding included
  T* values() const { return value_.data; }
  T* grads() const { return grad_.data; }
  FlatView<T> view() const { return {value_.data, grad_.data, m_.data, v_.data, half_.data}; }
  void make_moments() {
    if (!m_.data) m_.grow(size_), v_.grow(size_);
  }
  // The values in bf16, for the products of Precision::bf16 (engine/core/ops_bf16.h): made from
  // the values from here on (those added later too), then rewritten by every update pass.
  void make_half() {
    static_assert(std::is_same_v<T, float>, "bf16 copies are of float32 parameters");
    keeps_half_ = true;
    if (!size_) return;
    half_.grow(size_);
    bf16::from_floats(half_.data, value_.data, size_);
  }
  const uint16_t* halves() const { return half_.data; }
  size_t bytes() const {
    return (2 + (m_.data ? 2 : 0)) * size_ * sizeof(T) + (half_.data ? size_ * 2 : 0);
  }

 private:
  // Pages of its own (mmap), grown by moving them (mremap): no copy, never two copies resident,
  // and what was never written reads as zero without a pass to zero it.
  template <class E>
  struct Buffer {
    E* data = nullptr;
    size_t bytes = 0;
    Buffer() = default;
    Buffer(const Buffer&) = delete;
    Buffer& operator=(const Buffer&) = delete;
    ~Buffer() {
      if (data) munmap(data, bytes);
    }
    void grow(size_t n) {
      const size_t page = 4096,
                   want = (std::max<size_t>(n, 1) * sizeof(E) + page - 1) / page * page;
      if (want <= bytes) return;
      void* p =
          data ? mremap(data, bytes, want, MREMAP_MAYMOVE)
               : mmap(nullptr, want, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (p == MAP_FAILED) throw AllocationFailed(want, "optimizer state");
      data = static_cast<E*>(p), bytes = want;
    }
  };
  Buffer<T> value_, grad_, m_, v_;
  Buffer<uint16_t> half_;
  size_t size_ = 0;
  bool keeps_half_ = false;
};

}  // namespace bp
