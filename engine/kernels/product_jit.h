// engine/kernels/product_jit.h: small matrix products as x86-64 code made for their exact shape,
// the `generated` matmul dialect (engine/dialects/dialects.cc) that the compiled mode may choose
// per op. The eager engine runs engine/kernels/products.h.
//
// Why: on a small product (mini_gpt's 8 x 24 x 72, a weight gradient 8 deep) the tiled kernel's
// general paths cost more than the arithmetic: a band packed for 8 values of k, edge tiles copied,
// a call per tile, strides read from memory. LIBXSMM's kernels made for the shape bought 16-29% of
// such steps but keep 8-11 MB resident (dev/notes.md, "What each matmul library costs in resident
// memory"). Here each shape gets one function: tiles, strides and trip counts are constants in its
// code, the last columns a masked vector, nothing packed, nothing copied but a transposed b.
//
// Arithmetic: c (M, N) (+)= op(a) b, b (K, N) row-major (a stored transposed is other strides; a
// transposed b is copied first, as the tiled kernel copies it). Each element of c adds its k terms
// in order, one fused multiply-add each, from c or from +0 (fresh): the bits of the tiled kernel,
// whatever the tile, so a program that takes this dialect still computes the eager engine's bits
// (engine/kernels/product_jit_test.cc).
//
// Instruction sets, chosen at run time in one binary from engine/runtime/isa.h (BP_ISA=avx2 makes
// the AVX2 code on an AVX-512 machine): AVX-512F (32 zmm: up to 4 vectors by up to
// 16 rows of accumulators, the edge a k-mask), else AVX2 with FMA (16 ymm: 2 vectors by 6 rows, the
// edge vmaskmovps). Neither: the dialect is unavailable.
//
// Code: emitted through xbyak into a buffer, then copied into the process's CodePages
// (engine/runtime/code_memory.h: one reserved range, never writable and executable at once; pages
// are sealed before any kernel in them first runs). Where the system refuses (a W^X policy, mmap
// refused) the dialect says so in one line and is unavailable; the tiled kernel runs, same bits.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "engine/kernels/products.h"
#include "engine/runtime/code_memory.h"
#include "engine/runtime/isa.h"

namespace bp {

#if defined(__x86_64__)
inline constexpr bool kProductJitBuilt = true;
#else
inline constexpr bool kProductJitBuilt = false;
#endif

namespace product_jit {

enum class Isa : uint8_t { none, avx2, avx512 };
inline const char* isa_name(Isa i) {
  return i == Isa::avx512 ? "avx512" : i == Isa::avx2 ? "avx2" : "none";
}
// What the process runs (engine/runtime/isa.h: the processor's best, capped by BP_ISA).
inline Isa processor_isa() {
  switch (bp::isa()) {
    case bp::Isa::avx512: return Isa::avx512;
    case bp::Isa::avx2: return Isa::avx2;
    default: return Isa::none;
  }
}
// The set kernels are made for: the process's, or a lesser one the tests ask for (AVX2 on an
// AVX-512 machine); never one the processor lacks.
inline Isa& isa_wanted() {
  static Isa wanted = Isa::none;  // none: the processor's best
  return wanted;
}
inline Isa isa() {
  const Isa best = processor_isa();
  const Isa w = isa_wanted();
  return w == Isa::none || best == Isa::none ? best : std::min(w, best);
}

// One kernel's shape: c (M, N) (+)= op(a) (M, K) b (K, N); op(a)(i, k) = a[i * rs + k * cs] with
// rs = trans_a ? 1 : K, cs = trans_a ? a_rows : 1 (a_rows: the rows of the whole product, of
// which this kernel runs M; 0 for M); b's and c's rows N apart. Epilogues, for linear's forward:
// bias, c starts as the row `bias` (N floats) on every row, the bits of copying it there first;
// relu, each element leaves through relu_of (engine/core/op_args.h: NaN and -0 pass).
struct Shape {
  int32_t M, N, K;
  bool trans_a, fresh;
  Isa isa;
  int32_t a_rows = 0;
  bool bias = false, relu = false;
  int32_t rs() const { return trans_a ? 1 : K; }
  int32_t cs() const { return trans_a ? (a_rows ? a_rows : M) : 1; }
  auto key() const { return std::tuple(M, N, K, trans_a, fresh, isa, cs(), bias, relu); }
  bool operator<(const Shape& o) const { return key() < o.key(); }
  bool operator==(const Shape& o) const { return key() == o.key(); }
};
using KernelFn = void (*)(float* c, const float* a, const float* b, const float* bias);

// ---- the tiling: column blocks of nb vectors, each over groups of row tiles ----
struct RowGroup {
  int32_t rows, tiles;  // `tiles` tiles of `rows` rows, one after another
};
struct ColumnBlock {
  int32_t first_vector, vectors;
  RowGroup groups[2];  // rows r + 1 then r: M split as evenly as the registers allow
};
struct Tiling {
  int32_t lanes, vectors, tail;  // tail: lanes of the last vector that are columns of c (1-lanes)
  std::vector<ColumnBlock> blocks;
  double cycles = 0;  // a rough count, to choose among tilings
};
// Rows of accumulators a block of nb vectors can hold: beside them, nb vectors of b and a's
// broadcast (AVX-512: 32 registers; one vector's broadcast is folded into its multiply-add), and
// AVX2's edge mask (16). A broadcast loaded once for nb multiply-adds, not folded into each, took
// 8 x 72 x 24 from 1.18x LIBXSMM's time to 0.89x (dev/notes.md, "Generated products").
inline int32_t most_rows(Isa isa, int32_t nb) {
  return isa == Isa::avx512 ? std::min(16, (nb == 1 ? 32 : 31) / nb - 1) : (14 - nb) / nb;
}
inline Tiling tiling_for(const Shape& s, int32_t nb_most) {
  Tiling t;
  t.lanes = s.isa == Isa::avx512 ? 16 : 8;
  t.vectors = (s.N + t.lanes - 1) / t.lanes;
  t.tail = s.N - (t.vectors - 1) * t.lanes;
  const int32_t blocks = (t.vectors + nb_most - 1) / nb_most;
  for (int32_t b = 0, v = 0; b < blocks; b++) {
    const int32_t nb = t.vectors / blocks + (b < t.vectors % blocks);
    const int32_t most = most_rows(s.isa, nb);
    const int32_t tiles = (s.M + most - 1) / most, r = s.M / tiles, longer = s.M % tiles;
    t.blocks.push_back({v, nb, {{r + 1, longer}, {r, tiles - longer}}});
    v += nb;
    // per k of a tile: r * nb multiply-adds (two a cycle), one chain step (4 cycles of latency),
    // nb loads of b and r of a, three a cycle
    for (const RowGroup& g : t.blocks.back().groups) {
      const double loads = nb + g.rows;
      const double per_k = std::max({g.rows * nb / 2.0, 4.0, loads / 3.0});
      t.cycles += g.tiles * (s.K * per_k + 2.0 * g.rows * nb + 12);
    }
  }
  return t;
}
inline Tiling best_tiling(const Shape& s) {
  Tiling best = tiling_for(s, 1);
  for (int32_t nb = 2; nb <= (s.isa == Isa::avx512 ? 4 : 2); nb++) {
    Tiling t = tiling_for(s, nb);
    if (t.cycles < best.cycles) best = std::move(t);
  }
  return best;
}

// A kernel's code, at most (a larger one is not made: its shape runs on the tiled kernel).
inline constexpr size_t kMaxKernelBytes = 64 << 10;

// ---- the instructions the kernels use, emitted through xbyak (engine/runtime/code_memory.h) ----
// Registers by number, as x86-64 numbers them.
enum Gpr : int {
  rax = 0,
  rcx = 1,
  rdx = 2,
  rbx = 3,
  rsi = 6,
  rdi = 7,
  r8 = 8,
  r9 = 9,
  r10 = 10,
  r11 = 11
};
struct Mem {  // [base + disp]
  int base;
  int32_t disp;
};
class Assembler {
 public:
  Assembler(uint8_t* buffer, size_t capacity) : w_(buffer, capacity) {}
  size_t size() const { return w_.getSize(); }
  using Label = Xbyak::Label;
  void bind(Label& l) { w_.L(l); }

  // AVX-512: vmovups loads (masked: zeroing) and stores, vpxord, vfmadd231ps (with one float of
  // memory broadcast), vmaxps, vbroadcastss, kmovw.
  void zload(int dst, Mem m, int mask) {
    mask ? w_.vmovups(z(dst) | k(mask) | Xbyak::util::T_z, at(m)) : w_.vmovups(z(dst), at(m));
  }
  void zstore(Mem m, int src, int mask) {
    mask ? w_.vmovups(at(m) | k(mask), z(src)) : w_.vmovups(at(m), z(src));
  }
  void zzero(int r) { w_.vpxord(z(r), z(r), z(r)); }
  void zfma_bcast(int acc, int b, Mem a) { w_.vfmadd231ps(z(acc), z(b), broadcast(a)); }
  void zfma(int acc, int x, int y) { w_.vfmadd231ps(z(acc), z(x), z(y)); }
  void zmax(int dst, int x, int y) { w_.vmaxps(z(dst), z(x), z(y)); }  // x > y ? x : y
  void zbroadcast(int dst, Mem m) { w_.vbroadcastss(z(dst), at(m)); }
  void kmovw_eax(int mask) { w_.kmovw(k(mask), w_.eax); }
  // AVX2 with FMA (256 bits)
  void yload(int dst, Mem m) { w_.vmovups(y(dst), at(m)); }
  void ystore(Mem m, int src) { w_.vmovups(at(m), y(src)); }
  void yload_masked(int dst, int mask, Mem m) { w_.vmaskmovps(y(dst), y(mask), at(m)); }
  void ystore_masked(Mem m, int mask, int src) { w_.vmaskmovps(at(m), y(mask), y(src)); }
  void yzero(int r) { w_.vxorps(y(r), y(r), y(r)); }
  void ybroadcast(int dst, Mem m) { w_.vbroadcastss(y(dst), at(m)); }
  void yfma(int acc, int x, int y_) { w_.vfmadd231ps(y(acc), y(x), y(y_)); }
  void ymax(int dst, int x, int y_) { w_.vmaxps(y(dst), y(x), y(y_)); }
  void vzeroupper() { w_.vzeroupper(); }
  // General registers (64-bit but for the 32-bit counters, which zero-extend).
  void lea(int dst, Mem m) { w_.lea(g(dst), w_.ptr[g(m.base) + m.disp]); }
  void mov(int dst, int src) { w_.mov(g(dst), g(src)); }
  void add(int r, int32_t imm) { w_.add(g(r), imm); }
  void mov32(int r, uint32_t imm) { w_.mov(Xbyak::Reg32(r), imm); }
  void mov64(int r, uint64_t imm) { w_.mov(g(r), imm); }
  void dec32(int r) { w_.dec(Xbyak::Reg32(r)); }
  void jnz(Label& l) { w_.jnz(l, Xbyak::CodeGenerator::T_NEAR); }
  void push_rbx() { w_.push(w_.rbx); }
  void pop_rbx() { w_.pop(w_.rbx); }
  void ret() { w_.ret(); }

 private:
  static Xbyak::Reg64 g(int r) { return Xbyak::Reg64(r); }
  static Xbyak::Ymm y(int r) { return Xbyak::Ymm(r); }
  static Xbyak::Zmm z(int r) { return Xbyak::Zmm(r); }
  static Xbyak::Opmask k(int r) { return Xbyak::Opmask(r); }
  Xbyak::Address at(Mem m) { return w_.ptr[g(m.base) + m.disp]; }
  Xbyak::Address broadcast(Mem m) { return w_.ptr_b[g(m.base) + m.disp]; }
  CodeWriter w_;
};

// The lanes of AVX2's edge mask: the mask of t lanes is the 8 floats from kMaskLanes + 8 - t.
alignas(64) inline const int32_t kMaskLanes[16] = {-1, -1, -1, -1, -1, -1, -1, -1,
                                                   0,  0,  0,  0,  0,  0,  0,  0};

// The code of one kernel: void f(float* c [rdi], const float* a [rsi], const float* b [rdx],
// const float* bias [rcx]). rcx: a's rows of the current tile; r11: c's; r8, r9: a and b at the
// current k; r10: k loop; rax: row tiles; rbx (saved): the bias.
class Generator {
 public:
  explicit Generator(const Shape& s)
      : s_(s),
        t_(best_tiling(s)),
        rs_(s.rs()),
        cs_(s.cs()),
        buffer_(new uint8_t[kMaxKernelBytes]),
        as_(buffer_.get(), kMaxKernelBytes) {}
  // The kernel's code; empty where it would be over kMaxKernelBytes.
  std::vector<uint8_t> run() {
    try {
      emit();
    } catch (const Xbyak::Error&) {  // past the buffer
      return {};
    }
    return std::vector<uint8_t>(buffer_.get(), buffer_.get() + as_.size());
  }

 private:
  void emit() {
    const bool z = s_.isa == Isa::avx512;
    if (s_.bias) as_.push_rbx(), as_.mov(rbx, rcx);
    if (t_.tail < t_.lanes) {  // the last vector's mask
      if (z) {
        as_.mov32(rax, (1u << t_.tail) - 1);
        as_.kmovw_eax(kEdgeMask);
      } else {
        as_.mov64(rax, uint64_t(reinterpret_cast<uintptr_t>(kMaskLanes + 8 - t_.tail)));
        as_.yload(kAvx2Mask, {rax, 0});
      }
    }
    for (const ColumnBlock& blk : t_.blocks) {
      as_.lea(r11, {rdi, blk.first_vector * t_.lanes * 4});
      as_.mov(rcx, rsi);
      for (const RowGroup& g : blk.groups) {
        if (g.tiles == 0) continue;
        if (g.tiles > 1) as_.mov32(rax, uint32_t(g.tiles));
        Assembler::Label top;
        as_.bind(top);
        tile(blk, g.rows);
        as_.add(r11, g.rows * s_.N * 4);
        as_.add(rcx, g.rows * rs_ * 4);
        if (g.tiles > 1) as_.dec32(rax), as_.jnz(top);
      }
    }
    if (s_.bias) as_.pop_rbx();
    as_.vzeroupper();
    as_.ret();
  }

  static constexpr int kEdgeMask = 1, kAvx512Broadcast = 31, kAvx2Broadcast = 14, kAvx2Mask = 15;
  static constexpr int32_t kUnrollAll = 8, kUnroll = 4;  // k steps: all inline up to 8, else 4
  bool masked(const ColumnBlock& blk, int v) const {
    return t_.tail < t_.lanes && blk.first_vector + v == t_.vectors - 1;
  }
  void load(int reg, Mem m, bool edge) {
    if (s_.isa == Isa::avx512)
      as_.zload(reg, m, edge ? kEdgeMask : 0);
    else if (edge)
      as_.yload_masked(reg, kAvx2Mask, m);
    else
      as_.yload(reg, m);
  }
  void store(Mem m, int reg, bool edge) {
    if (s_.isa == Isa::avx512)
      as_.zstore(m, reg, edge ? kEdgeMask : 0);
    else if (edge)
      as_.ystore_masked(m, kAvx2Mask, reg);
    else
      as_.ystore(m, reg);
  }
  // One tile: `rows` rows of c from r11, the block's vectors, its k loop from rcx (a) and b.
  void tile(const ColumnBlock& blk, int32_t rows) {
    const int32_t nb = blk.vectors, vbytes = t_.lanes * 4;
    const auto acc = [&](int i, int v) { return i * nb + v; };
    const int bvec = rows * nb;  // b's vectors after the accumulators
    for (int i = 0; i < rows; i++)
      for (int v = 0; v < nb; v++) {
        if (s_.bias)
          load(acc(i, v), {rbx, (blk.first_vector + v) * vbytes}, masked(blk, v));
        else if (s_.fresh)
          s_.isa == Isa::avx512 ? as_.zzero(acc(i, v)) : as_.yzero(acc(i, v));
        else
          load(acc(i, v), {r11, i * s_.N * 4 + v * vbytes}, masked(blk, v));
      }
    as_.mov(r8, rcx);
    as_.lea(r9, {rdx, blk.first_vector * vbytes});
    const auto step = [&](int32_t u) {  // k = (the loop's k) + u
      for (int v = 0; v < nb; v++) load(bvec + v, {r9, u * s_.N * 4 + v * vbytes}, masked(blk, v));
      for (int i = 0; i < rows; i++) {
        const Mem a{r8, (i * rs_ + u * cs_) * 4};
        if (s_.isa == Isa::avx512 && nb >= 2) {  // a in a register: one load for nb products
          as_.zbroadcast(kAvx512Broadcast, a);
          for (int v = 0; v < nb; v++) as_.zfma(acc(i, v), kAvx512Broadcast, bvec + v);
        } else if (s_.isa == Isa::avx512) {
          for (int v = 0; v < nb; v++) as_.zfma_bcast(acc(i, v), bvec + v, a);
        } else {
          as_.ybroadcast(kAvx2Broadcast, a);
          for (int v = 0; v < nb; v++) as_.yfma(acc(i, v), kAvx2Broadcast, bvec + v);
        }
      }
    };
    if (s_.K <= kUnrollAll) {
      for (int32_t u = 0; u < s_.K; u++) step(u);
    } else {
      as_.mov32(r10, uint32_t(s_.K / kUnroll));
      Assembler::Label top;
      as_.bind(top);
      for (int32_t u = 0; u < kUnroll; u++) step(u);
      as_.add(r8, kUnroll * cs_ * 4);
      as_.add(r9, kUnroll * s_.N * 4);
      as_.dec32(r10);
      as_.jnz(top);
      for (int32_t u = 0; u < s_.K % kUnroll; u++) step(u);
    }
    const int zero = s_.isa == Isa::avx512 ? kAvx512Broadcast : kAvx2Broadcast;
    if (s_.relu) s_.isa == Isa::avx512 ? as_.zzero(zero) : as_.yzero(zero);
    for (int i = 0; i < rows; i++)
      for (int v = 0; v < nb; v++) {
        if (s_.relu)  // 0 > x ? 0 : x, which keeps NaN and -0 as relu_of does
          s_.isa == Isa::avx512 ? as_.zmax(acc(i, v), zero, acc(i, v))
                                : as_.ymax(acc(i, v), zero, acc(i, v));
        store({r11, i * s_.N * 4 + v * vbytes}, acc(i, v), masked(blk, v));
      }
  }

  Shape s_;
  Tiling t_;
  int32_t rs_, cs_;
  std::unique_ptr<uint8_t[]> buffer_;  // the code, then copied into CodePages
  Assembler as_;
};

// Shapes this generator takes: small float products (at most kMostMacs multiply-adds, 512
// columns), whose code stays small (a tile's k loop is inline, one per row group and column
// block). Larger ones are the packed kernels' and the libraries': nothing here is packed, and on
// mini_gpt_wide's 2048-row products (10^8 multiply-adds) the step ran 5% slower with them
// although each was as fast or faster timed alone (dev/notes.md, "Generated products").
inline constexpr int64_t kMostMacs = int64_t(1) << 22;
inline bool takes(int32_t M, int32_t N, int32_t K) {
  return M >= 1 && K >= 1 && N >= 1 && N <= 512 && int64_t(M) * N * K <= kMostMacs;
}

// Every kernel made in this process, by shape; made on first request, kept for the process.
class Registry {
 public:
  // The kernel of `s`, made now if it is new; null where it cannot be (the one line printed once).
  // Sealed: ready to run (a kernel is only sealed at its first run: see CodePages).
  KernelFn kernel(const Shape& s, bool sealed) {
    std::lock_guard<std::mutex> hold(mutex_);
    if (!refused_.empty() || s.isa == Isa::none) return nullptr;
    auto it = made_.find(s);
    if (it == made_.end()) {
      const std::vector<uint8_t> code = Generator(s).run();
      if (code.empty()) return nullptr;  // over kMaxKernelBytes
      uint8_t* at = pages_.place(code.data(), code.size(), &refused_);
      if (!at) return refuse(), nullptr;
      it = made_.emplace(s, at).first;
      name_for_perf(s, at, code.size());
    }
    if (sealed && !pages_.seal(it->second, &refused_)) return refuse(), nullptr;
    return reinterpret_cast<KernelFn>(it->second);
  }
  size_t kernels() {
    std::lock_guard<std::mutex> hold(mutex_);
    return made_.size();
  }
  size_t code_bytes() {
    std::lock_guard<std::mutex> hold(mutex_);
    return pages_.bytes_used();
  }
  // Tests: behave as on a system that refuses executable pages.
  void refuse_for_tests(bool refuse) {
    std::lock_guard<std::mutex> hold(mutex_);
    refused_ = refuse ? "refused by the test" : "";
    if (refuse) this->refuse();
  }

 private:
  // With BP_PERF_MAP=1 in the environment, each kernel is named in /tmp/perf-<pid>.map, where
  // `perf report` looks for the names of generated code (dev/kernel_shares.sh sets it).
  static void name_for_perf(const Shape& s, const uint8_t* at, size_t bytes) {
    static const bool wanted = [] {
      const char* v = std::getenv("BP_PERF_MAP");
      return v && std::string(v) == "1";
    }();
    if (!wanted) return;
    const std::string path = "/tmp/perf-" + std::to_string(getpid()) + ".map";
    if (FILE* f = std::fopen(path.c_str(), "a")) {
      std::fprintf(f, "%llx %zx bp_generated_product_%dx%dx%d%s%s%s%s_%s\n",
                   (unsigned long long)reinterpret_cast<uintptr_t>(at), bytes, s.M, s.N, s.K,
                   s.trans_a ? "_ta" : "", s.fresh ? "_fresh" : "", s.bias ? "_bias" : "",
                   s.relu ? "_relu" : "", isa_name(s.isa));
      std::fclose(f);
    }
  }
  void refuse() {
    made_.clear();
    std::fprintf(stderr, "generated products: %s; the engine's tiled products run instead\n",
                 refused_.c_str());
  }
  std::mutex mutex_;
  CodePages pages_;
  std::map<Shape, uint8_t*> made_;
  std::string refused_;
};
inline Registry& registry() {
  static Registry r;
  return r;
}

// The kernels a thread ran last, by shape: the registry's map and lock are for making them. 256
// slots, the shape's fields mixed (a step asks for a few dozen shapes; with 64 slots and a weak
// mix, mini_gpt's collided and went to the locked map on every call).
inline KernelFn cached_kernel(const Shape& s) {
  struct Entry {
    Shape shape{-1, 0, 0, false, false, Isa::none};
    KernelFn f = nullptr;
  };
  thread_local Entry cache[256];
  uint64_t h = uint64_t(uint32_t(s.M)) << 32 ^ uint64_t(uint32_t(s.N)) << 16 ^ uint32_t(s.K);
  h = (h ^ uint64_t(uint32_t(s.cs())) << 40 ^
       uint64_t(s.trans_a | s.fresh << 1 | s.bias << 2 | s.relu << 3 | int(s.isa) << 4)) *
      0x9E3779B97F4A7C15ull;
  Entry& e = cache[h >> 56];
  if (!(e.shape == s) || !e.f) e = {s, registry().kernel(s, true)};
  return e.f;
}

}  // namespace product_jit

// The product policy of the `generated` dialect (engine/dialects/dialects.cc): the kernels above,
// for small float products. A transposed b is copied (K, N) into scratch first. A product the pool
// splits (gemm_split_of) is split as the tiled kernel splits it, by bands of rows, each band its
// own kernel on its own thread; one split by columns is not taken. Where no kernel is found at run
// time, the tiled kernel's in-place loop runs: same bits.
struct GeneratedGemm {
  static constexpr bool in_build = kProductJitBuilt;
  static constexpr bool library = false;
  static constexpr bool side_by_side = true;
  static constexpr bool column_splits = false;  // (engine/core/ops.h, products_side_by_side)
  template <class T>
  static void run(T* c, const T* a, bool trans_a, const T* b, bool trans_b, int32_t M, int32_t N,
                  int32_t K, T* scratch, bool fresh) {
    b = b_as_rows(b, trans_b, N, K, scratch);
    const GemmSplit split = gemm_split_of(M, K, N);
    const auto part = [&](int32_t first, int32_t end) {
      T* cp = c + size_t(first) * N;
      const T* ap = a + (trans_a ? size_t(first) : size_t(first) * K);
      if constexpr (std::is_same_v<T, float>) {
        const product_jit::Shape s{end - first,    N, K, trans_a, fresh, product_jit::isa(),
                                   trans_a ? M : 0};
        if (product_jit::KernelFn f = product_jit::cached_kernel(s)) return f(cp, ap, b, nullptr);
      }
      gemm_in_place(cp, N, ap, trans_a ? 1 : K, trans_a ? M : 1, b, N, end - first, K, N, fresh);
    };
    if (split.parts == 1 || !split.by_rows) return part(0, M);
    thread_pool().run(split.parts, [&](int p, int) {
      const auto [first, end] = gemm_part(split, p, M, N);
      if (first < end) part(first, end);
    });
  }
  template <class T>
  static bool available(int32_t M, int32_t N, int32_t K, bool trans_a, bool) {
    if constexpr (!std::is_same_v<T, float>) {
      return false;
    } else {
      if (!product_jit::takes(M, N, K)) return false;
      const GemmSplit split = gemm_split_of(M, K, N);
      if (split.parts > 1 && !split.by_rows) return false;
      const product_jit::Isa isa = product_jit::isa();
      for (int p = 0; p < split.parts; p++) {
        const auto [first, end] = split.parts == 1 ? std::pair(0, M) : gemm_part(split, p, M, N);
        for (bool fresh : {false, true})
          if (first < end && !product_jit::registry().kernel(
                                 {end - first, N, K, trans_a, fresh, isa, trans_a ? M : 0}, false))
            return false;
      }
      return true;
    }
  }
  static size_t scratch_elems(int32_t, int32_t N, int32_t K, bool, bool trans_b) {
    return trans_b ? scratch_round(size_t(K) * N) : 0;
  }
  // linear's forward in one kernel, the bias and the relu in its tiles (no pass to copy the bias
  // rows in, none to apply the relu): out (N, OC) = relu(x (N, C) w^T + bias), w (OC, C). False
  // where it does not apply (the product split over threads, or no kernel): ops::linear_forward
  // then runs the product and its passes. Same bits either way.
  template <class T>
  static bool linear_forward(T* out, const T* x, const T* w, const T* bias, int32_t N, int32_t OC,
                             int32_t C, bool relu, T* scratch) {
    if constexpr (!std::is_same_v<T, float>) {
      return false;
    } else {
      const product_jit::KernelFn f = takes_linear(N, OC, C)
                                          ? product_jit::cached_kernel(linear_shape(N, OC, C, relu))
                                          : nullptr;
      if (!f) return false;
      transpose(scratch, w, OC, C);
      f(out, x, scratch, bias);
      return true;
    }
  }
  // Makes that kernel while the program is compiled (ops::products_available), so that a first
  // step, a warm start's above all, does not.
  template <class T>
  static void linear_forward_ready(int32_t N, int32_t OC, int32_t C, bool relu) {
    if constexpr (std::is_same_v<T, float>)
      if (takes_linear(N, OC, C))
        product_jit::registry().kernel(linear_shape(N, OC, C, relu), false);
  }

 private:
  static bool takes_linear(int32_t N, int32_t OC, int32_t C) {
    return gemm_split_of(N, C, OC).parts == 1;
  }
  static product_jit::Shape linear_shape(int32_t N, int32_t OC, int32_t C, bool relu) {
    product_jit::Shape s{N, OC, C, false, false, product_jit::isa()};
    s.bias = true, s.relu = relu;
    return s;
  }
};

}  // namespace bp
