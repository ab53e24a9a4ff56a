// engine/runtime/code_memory.h: where generated machine code lives, for both code generators
// (engine/kernels/product_jit.h's small products, engine/compiled/scalar_jit.h's scalar steps),
// and the assembler the products emit through (xbyak, Debian's libxbyak-dev, what oneDNN emits
// through; the scalar steps keep an encoder of their own, 18 times quicker on their dozen
// instructions: scalar_jit.h says why).
//
// One policy, W^X: no page is ever writable and executable at once. Code is written into
// read-write pages, then those pages are made read-execute ("sealed") before any of it runs, and
// nothing is written to a sealed page again. Two shapes of it:
// - CodeMapping: one step's code in a mapping of its own, reserved for the most it may take,
//   written in place (no second copy), the tail given back and the rest sealed; unmapped with it.
// - CodePages: many small kernels for the process's life in one reserved range, filled a page at
//   a time; a kernel is copied in, and the pages are sealed before a kernel in them first runs.
// Where the system refuses (a W^X policy that forbids making pages executable, mmap refused), each
// says why in `why` and the caller runs its portable code instead.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>

// xbyak's mnemonics and(), or(), xor(), not() are C++'s alternative tokens: its own names with
// a trailing underscore are used instead.
#ifndef XBYAK_NO_OP_NAMES
#define XBYAK_NO_OP_NAMES
#endif
#include <xbyak/xbyak.h>

namespace bp {

inline size_t code_page_round(size_t n) {
  const size_t page = size_t(sysconf(_SC_PAGESIZE));
  return (n + page - 1) / page * page;
}

// Makes [at, at + bytes) read-execute, and the instruction cache see what was written there.
inline bool seal_code(uint8_t* at, size_t bytes, std::string* why) {
  if (bytes == 0) return true;
  if (mprotect(at, bytes, PROT_READ | PROT_EXEC) != 0) {
    *why = std::string("mprotect read-execute: ") + std::strerror(errno);
    return false;
  }
  __builtin___clear_cache(reinterpret_cast<char*>(at), reinterpret_cast<char*>(at + bytes));
  return true;
}

class CodeMapping {
 public:
  CodeMapping() = default;
  CodeMapping(const CodeMapping&) = delete;
  CodeMapping& operator=(const CodeMapping&) = delete;
  CodeMapping(CodeMapping&& o) noexcept { *this = std::move(o); }
  CodeMapping& operator=(CodeMapping&& o) noexcept {
    std::swap(base_, o.base_), std::swap(mapped_, o.mapped_), std::swap(sealed_, o.sealed_);
    return *this;
  }
  ~CodeMapping() {
    if (base_) munmap(base_, mapped_);
  }
  // Read-write pages for at most `bytes` of code (address space only until written).
  bool reserve(size_t bytes, std::string* why) {
    mapped_ = code_page_round(std::max<size_t>(bytes, 1));
    void* p = mmap(nullptr, mapped_, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
      mapped_ = 0;
      *why = std::string("mmap: ") + std::strerror(errno);
      return false;
    }
    base_ = static_cast<uint8_t*>(p);
    return true;
  }
  uint8_t* data() const { return base_; }
  size_t capacity() const { return mapped_; }
  // The first `used` bytes are the code: the pages past them given back, the rest sealed.
  bool seal(size_t used, std::string* why) {
    const size_t kept = code_page_round(used);
    if (kept < mapped_) munmap(base_ + kept, mapped_ - kept), mapped_ = kept;
    if (!seal_code(base_, kept, why)) return false;
    sealed_ = true;
    return true;
  }
  bool sealed() const { return sealed_; }
  size_t bytes() const { return mapped_; }

 private:
  uint8_t* base_ = nullptr;
  size_t mapped_ = 0;
  bool sealed_ = false;
};

class CodePages {
 public:
  static constexpr size_t kReserved = size_t(16) << 20;
  ~CodePages() {
    if (base_) munmap(base_, kReserved);
  }
  // Copies `bytes` of code in (read-write pages past the sealed ones); null where the system
  // refuses, with `why` set.
  uint8_t* place(const uint8_t* code, size_t bytes, std::string* why) {
    if (!base_ && !reserve(why)) return nullptr;
    if (used_ + bytes > kReserved) return *why = "16 MB of generated code is full", nullptr;
    const size_t end = code_page_round(used_ + bytes);
    if (end > writable_ && mprotect(base_ + writable_, end - writable_, PROT_READ | PROT_WRITE)) {
      *why = std::string("mprotect read-write: ") + std::strerror(errno);
      return nullptr;
    }
    writable_ = std::max(writable_, end);
    uint8_t* at = base_ + used_;
    std::memcpy(at, code, bytes);
    used_ += bytes;
    return at;
  }
  // Makes every written page read-execute: before a kernel in them first runs. Later kernels
  // start on the next page.
  bool seal(const uint8_t* code, std::string* why) {
    if (code < base_ + sealed_) return true;
    const size_t end = code_page_round(used_);
    if (!seal_code(base_ + sealed_, end - sealed_, why)) return false;
    sealed_ = writable_ = used_ = end;
    return true;
  }
  size_t bytes_used() const { return used_; }

 private:
  bool reserve(std::string* why) {
    void* p =
        mmap(nullptr, kReserved, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) return *why = std::string("mmap: ") + std::strerror(errno), false;
    base_ = static_cast<uint8_t*>(p);
    return true;
  }
  uint8_t* base_ = nullptr;
  size_t used_ = 0, writable_ = 0, sealed_ = 0;
};

// An assembler writing into `buffer` (never executable itself: the code is then sealed where it
// is, or copied into CodePages). Past `capacity` it throws Xbyak::Error, which the generators
// catch as "too large".
class CodeWriter : public Xbyak::CodeGenerator {
 public:
  CodeWriter(uint8_t* buffer, size_t capacity) : Xbyak::CodeGenerator(capacity, buffer) {}
};

}  // namespace bp
