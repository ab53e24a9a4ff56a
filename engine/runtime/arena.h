// engine/runtime/arena.h: the bump allocator every tensor buffer comes from.
//
// A TensorGraph holds two: one for parameters and optimizer state (kept for the graph's life), one
// for a step's activations, gradients and scratch (reset after every step). Not a general
// allocator: nothing is freed one by one, and a pointer stays valid until reset() or a rewind()
// to before it.
//   Tests: engine/core/tensor_test.cc (steps reuse their memory; steady state allocates nothing).
#pragma once

#include <sys/mman.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <type_traits>
#include <vector>

namespace bp {

// An allocation the system refused, with its size and what it was for: a std::bad_alloc (so the
// callers that decide what out of memory means catch it as they would new's), whose what() is the
// line a run reports ("cannot allocate 4294967296 bytes for a step's arena block").
class AllocationFailed : public std::bad_alloc {
 public:
  AllocationFailed(size_t bytes, const char* what_for) {
    std::snprintf(text_, sizeof text_, "cannot allocate %zu bytes for %s", bytes, what_for);
  }
  const char* what() const noexcept override { return text_; }

 private:
  char text_[160];
};

// A bump allocator over blocks that never move, so pointers into it stay valid while a step
// grows it. A step that outgrows the blocks adds one as large as all of them; reset() and
// rewind() only move the cursor back, keeping every block: a step like the last one then lands
// on the same addresses, already paged in, and allocates nothing. (Replacing the blocks with
// one of their total size, as this arena did first, paged that block in again during the
// second step, and a segment rewound inside a step (engine/checkpoint/checkpoint.h) freed the block
// it had added and paged a new one in at the next: a Revolve step paid page faults for all of
// it, eight times its arithmetic.)
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
    // The current block, else the next one with room (the blocks after the cursor are empty);
    // a block left behind keeps its unused tail until the next reset or rewind.
    while (current_ < blocks_.size() && blocks_[current_].used + n > blocks_[current_].capacity)
      current_++;
    if (current_ == blocks_.size()) add_block(std::max(n, capacity() ? capacity() : kFirstBlock));
    Block& b = blocks_[current_];
    T* p = b.data + b.used;
    b.used += n, in_use_ += n;
    peak_ = std::max(peak_, in_use_);
    return p;
  }
  void reset() { rewind({0, 0, 0}); }
  // A point in the arena to come back to: rewind(mark) frees everything allocated after it (a
  // segment of a step, engine/checkpoint/checkpoint.h) for the allocations that follow.
  struct Mark {
    size_t block, used, in_use;
  };
  Mark mark() const {
    return {current_, current_ < blocks_.size() ? blocks_[current_].used : 0, in_use_};
  }
  void rewind(Mark m) {
    for (size_t i = m.block; i < blocks_.size(); i++) blocks_[i].used = 0;
    if (m.block < blocks_.size()) blocks_[m.block].used = m.used;
    current_ = m.block, in_use_ = m.in_use;
  }
  size_t capacity() const {
    size_t c = 0;
    for (const Block& b : blocks_) c += b.capacity;
    return c;
  }
  size_t used() const { return in_use_; }
  size_t peak_bytes() const { return peak_ * sizeof(T); }
  size_t num_blocks() const { return blocks_.size(); }

 private:
  static constexpr size_t kAlign = 64 / sizeof(T);
  static constexpr size_t kFirstBlock = size_t(1) << 16;  // elements
  struct Block {
    T* data;
    size_t capacity, used;
  };
  // A block of 64 MB or more is aligned to 2 MB and asks for transparent huge pages: its first
  // touch then costs one fault per 2 MB instead of one per 4 KB: the page faults of a step's
  // fresh memory are most of a cold step (dev/notes.md, "First touch of fresh pages"). With THP
  // off (`never`), madvise does nothing and the pages stay small.
  static constexpr size_t kHugePage = size_t(2) << 20, kHugeFrom = size_t(64) << 20;
  void add_block(size_t n) {
    const size_t align = n * sizeof(T) >= kHugeFrom ? kHugePage : 64;
    const size_t bytes = (n * sizeof(T) + align - 1) / align * align;
    void* p = std::aligned_alloc(align, bytes);
    if (!p) throw AllocationFailed(bytes, "an arena block");
    if (align == kHugePage) madvise(p, bytes, MADV_HUGEPAGE);
    blocks_.push_back({static_cast<T*>(p), n, 0});
  }
  std::vector<Block> blocks_;
  size_t current_ = 0;  // the block allocations come from
  size_t in_use_ = 0;   // elements allocated since the last reset, skipped tails not counted
  size_t peak_ = 0;
};

// One contiguous array of plain values grown by doubling with realloc: for large blocks glibc
// grows with mremap, which moves page mappings instead of copying them, so an old and a new block
// never coexist in resident memory as they do when std::vector grows (the compiled scalar
// program's capture, engine/compiled/compiled_scalar.h, as the eager tape's own growth).
template <class T>
class GrowingArray {
  static_assert(std::is_trivially_copyable_v<T>);

 public:
  GrowingArray() = default;
  GrowingArray(const GrowingArray&) = delete;
  GrowingArray& operator=(const GrowingArray&) = delete;
  ~GrowingArray() { std::free(data_); }

  [[gnu::always_inline]] void push_back(const T& x) {
    if (size_ == capacity_) [[unlikely]]
      reallocate(capacity_ < 64 ? 64 : 2 * capacity_);
    data_[size_++] = x;
  }
  // Grows with copies of `fill`, or drops the tail.
  void resize(size_t n, const T& fill = T{}) {
    if (n > capacity_) reallocate(n);
    for (size_t i = size_; i < n; i++) data_[i] = fill;
    size_ = n;
  }
  void release() {  // empty, its memory returned
    std::free(data_);
    data_ = nullptr, size_ = capacity_ = 0;
  }
  T* data() { return data_; }
  const T* data() const { return data_; }
  T& operator[](size_t i) { return data_[i]; }
  const T& operator[](size_t i) const { return data_[i]; }
  size_t size() const { return size_; }
  size_t capacity() const { return capacity_; }

 private:
  void reallocate(size_t capacity) {
    void* p = std::realloc(data_, capacity * sizeof(T));
    if (!p) throw AllocationFailed(capacity * sizeof(T), "a growing array");
    data_ = static_cast<T*>(p), capacity_ = capacity;
  }
  T* data_ = nullptr;
  size_t size_ = 0, capacity_ = 0;
};

}  // namespace bp
