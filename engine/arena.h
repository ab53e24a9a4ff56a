// engine/arena.h: the bump allocator every tensor buffer comes from.
//
// A TensorGraph holds two: one for parameters and optimizer state (kept for the graph's life), one
// for a step's activations, gradients and scratch (reset after every step). Not a general
// allocator: nothing is freed one by one, and a pointer stays valid until reset().
//   Tests: engine/tensor_test.cc (steps reuse their memory; steady state allocates nothing).
#pragma once

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

namespace bp {

// A bump allocator over blocks that never move, so pointers into it stay valid while a step
// grows it. reset() frees everything at once and, if the step needed several blocks, replaces
// them with one block of their total size: from the second step on, one block, no allocation.
template <class T>
class Arena {
 public:
  Arena() = default;
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;
  ~Arena() {
    for (Block& b : blocks_) std::free(b.data);
  }

  // n zeroed elements, 64-byte aligned (whole cache lines, and vector loads never split).
  T* alloc(size_t n) {
    T* p = alloc_uninitialized(n);
    std::memset(p, 0, n * sizeof(T));
    return p;
  }
  // Scratch that the caller overwrites entirely (transposed copies for matmul).
  T* alloc_uninitialized(size_t n) {
    n = (n + kAlign - 1) / kAlign * kAlign;
    if (blocks_.empty() || blocks_.back().used + n > blocks_.back().capacity)
      add_block(std::max(n, capacity() ? capacity() : size_t(1) << 16));
    Block& b = blocks_.back();
    T* p = b.data + b.used;
    b.used += n;
    peak_ = std::max(peak_, used());
    return p;
  }
  void reset() {
    if (blocks_.size() > 1) {
      const size_t total = capacity();
      for (Block& b : blocks_) std::free(b.data);
      blocks_.clear();
      add_block(total);
    }
    if (!blocks_.empty()) blocks_.back().used = 0;
  }
  // A point in the arena to come back to: rewind(mark) frees everything allocated after it (a
  // segment of a step, engine/checkpoint.h), releasing the blocks added since.
  struct Mark {
    size_t blocks, used;
  };
  Mark mark() const { return {blocks_.size(), blocks_.empty() ? 0 : blocks_.back().used}; }
  void rewind(Mark m) {
    while (blocks_.size() > std::max<size_t>(m.blocks, 1)) {
      std::free(blocks_.back().data);
      blocks_.pop_back();
    }
    if (!blocks_.empty()) blocks_.back().used = m.blocks ? m.used : 0;
  }
  size_t capacity() const {
    size_t c = 0;
    for (const Block& b : blocks_) c += b.capacity;
    return c;
  }
  size_t used() const {
    size_t u = 0;
    for (const Block& b : blocks_) u += b.used;
    return u;
  }
  size_t peak_bytes() const { return peak_ * sizeof(T); }
  size_t num_blocks() const { return blocks_.size(); }

 private:
  static constexpr size_t kAlign = 64 / sizeof(T);
  struct Block {
    T* data;
    size_t capacity, used;
  };
  void add_block(size_t n) {
    void* p = std::aligned_alloc(64, (n * sizeof(T) + 63) / 64 * 64);
    if (!p) throw std::bad_alloc();  // as `new` would: the caller decides what it means
    blocks_.push_back({static_cast<T*>(p), n, 0});
  }
  std::vector<Block> blocks_;
  size_t peak_ = 0;
};

}  // namespace bp
