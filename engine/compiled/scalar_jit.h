// engine/compiled/scalar_jit.h: a compiled scalar step as x86-64 machine code (the compiled mode's
// scalar graphs, engine/compiled/compiled_scalar.h).
//
// The threaded program of compiled_scalar.h still passes every value through memory: each
// handler loads its operands, stores its result and jumps to the next, and on a small graph the
// step is a chain of such round trips (dev/notes.md, "Generated x86-64 code"). Here
// the same instructions become straight-line AVX code, generated once at compile time: one
// function, no dispatch, and the values and gradients the next instructions need stay in
// registers. Every result is still written through to the values and gradients arrays, which
// hold the step's state exactly as the threaded program leaves it.
//
// Arithmetic: each instruction emits the operations of its op's rule in engine/core/scalar.h, in
// the rule's order, with the rule's fused multiply-adds (madd) as FMA instructions and nothing
// reassociated, so results are bitwise those of the threaded program and the eager tape
// (engine/compiled/compiled_test.cc). exp, log, tanh and non-integer powers call the rule's own
// C++.
//
// Registers: rbx holds the values array, rbp the gradients (callee-saved, so calls keep them);
// xmm0-xmm13 cache values and gradients, least recently used evicted (a write-through cache:
// nothing needs spilling), xmm14-15 are scratch; a call forgets the cache. The values array
// carries three constants after its nodes (kJitConstants: 1.0, the sign bit, 0.0).
//
// The rules are thus written twice, once in C++ and once here as instructions; what ties them is
// the test, bitwise, of every op through both executors against the eager tape.
//
// Not here: when to generate (compiled_scalar.h: at a step's second run, so that a first step
// pays none of it, and only within the eager tape's memory: build() stops at its byte budget);
// steps beyond kJitMaxInstructions (their code outgrows the caches and gains little for megabytes
// of memory: the threaded program runs them); other ISAs (the threaded program runs there: x86-64
// with AVX and FMA only, built for them and run where engine/runtime/isa.h says so). Tests:
// engine/compiled/compiled_test.cc (bitwise against the eager tape: every op on both executors,
// every scalar workload).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "engine/core/scalar.h"
#include "engine/runtime/code_memory.h"
#include "engine/runtime/isa.h"

namespace bp {

// Built where the rules' madd is a fused multiply-add (a baseline with FMA: x86-64-v3), which the
// generated code must repeat; run where the process runs AVX2 or more (engine/runtime/isa.h).
#if defined(__x86_64__) && defined(__AVX__) && defined(__FMA__)
inline constexpr bool kScalarJitBuilt = true;
#else
inline constexpr bool kScalarJitBuilt = false;
#endif
inline bool scalar_jit_runs() { return kScalarJitBuilt && isa() >= Isa::avx2; }
inline constexpr size_t kJitMaxInstructions = 1 << 16;
inline constexpr uint32_t kJitConstants = 3;  // after the nodes: 1.0, -0.0 (the sign bit), 0.0

// One instruction of a compiled scalar step, as compiled_scalar.h lists it.
struct ScalarJitInstr {
  enum Kind : uint8_t { forward, backward, start_backward } kind;
  ScalarOp op;
  ScalarGrads grads;  // backward: which operands' gradients it updates
  uint32_t out, a, b;
  double exponent;  // pow: the constant's value (the guard keeps it fixed)
};

namespace scalar_jit {
// The rules' C++ for what calls out (same templates as every other executor).
inline double call_exp(double x) { return scalar_forward<ScalarOp::exp>(x, x); }
inline double call_log(double x) { return scalar_forward<ScalarOp::log>(x, x); }
inline double call_tanh(double x) { return scalar_forward<ScalarOp::tanh>(x, x); }
inline double call_pow(double x, double k) { return scalar_pow(x, k); }
// scalar_pow's integer path: |n| <= 16 multiplications; otherwise std::pow, called.
inline bool inline_power(double k) {
  if (!(k >= -16 && k <= 16)) return false;  // NaN too
  const int n = int(k);
  return double(n) == k && n <= 16 && n >= -16;
}

// An operand: a register, or a slot of the values (rbx) or gradients (rbp) array.
struct Operand {
  int reg = -1;  // xmm register, or -1 for memory
  uint8_t base = 3;
  int32_t disp = 0;
};
inline constexpr uint8_t kValues = 3, kGrads = 5;  // rbx, rbp: their ModRM numbers
inline constexpr int kCached = 14, kScratch0 = 14, kScratch1 = 15;

// Its own encoder, of the dozen instructions it needs, not xbyak, which the products emit through
// (engine/runtime/code_memory.h): a step's code is generated at its second run, from one to 65536
// instructions, and xbyak took 16 ns an instruction against 0.9 here, twice the jit_seconds of
// scalar_chain 1000 (asmjit 10-24 ns: dev/notes.md, "One place for generated code").
// Bytes into the code's own mapping, with room made before each instruction of the step (kRoom:
// what the longest one can emit, start_backward's 64 stores), so that each byte is one store.
// Room past the mapping's end is refused, which is how a step over its byte budget stops.
inline constexpr size_t kRoom = 1024;
class Emitter {
 public:
  Emitter(uint8_t* code, size_t capacity) : code_(code), capacity_(capacity) {}
  bool room() const { return size_ + kRoom <= capacity_; }
  size_t size() const { return size_; }
  void byte(uint8_t b) { code_[size_++] = b; }
  void bytes(std::initializer_list<uint8_t> bs) {
    for (uint8_t b : bs) byte(b);
  }
  void u32(uint32_t v) {
    for (int i = 0; i < 4; i++) byte(uint8_t(v >> (8 * i)));
  }
  void u64(uint64_t v) {
    for (int i = 0; i < 8; i++) byte(uint8_t(v >> (8 * i)));
  }
  // A VEX-encoded instruction (Intel SDM vol. 2, 2.3): map 1 = 0F, 2 = 0F38; pp 0 none, 1 66,
  // 2 F3, 3 F2. reg is ModRM.reg; src1 goes in VEX.vvvv, inverted (0 where the instruction has
  // none, which encodes 1111); rm is a register or [base + disp8/disp32].
  void vex(int map, int pp, bool w, uint8_t opcode, int reg, int src1, const Operand& rm) {
    const bool r_ext = reg >= 8, b_ext = rm.reg >= 8;
    const uint8_t vvvv = uint8_t(~src1 & 15);
    if (map == 1 && !w && !b_ext) {
      byte(0xC5);
      byte(uint8_t((r_ext ? 0 : 0x80) | (vvvv << 3) | pp));
    } else {
      byte(0xC4);
      byte(uint8_t((r_ext ? 0 : 0x80) | 0x40 | (b_ext ? 0 : 0x20) | map));
      byte(uint8_t((w ? 0x80 : 0) | (vvvv << 3) | pp));
    }
    byte(opcode);
    modrm(reg & 7, rm);
  }
  void modrm(int reg, const Operand& rm) {
    if (rm.reg >= 0) {
      byte(uint8_t(0xC0 | (reg << 3) | (rm.reg & 7)));
    } else if (rm.disp >= -128 && rm.disp < 128) {
      byte(uint8_t(0x40 | (reg << 3) | rm.base));
      byte(uint8_t(int8_t(rm.disp)));
    } else {
      byte(uint8_t(0x80 | (reg << 3) | rm.base));
      u32(uint32_t(rm.disp));
    }
  }
  // Scalar double arithmetic, dst = src1 op src2 (F2 0F xx).
  void sd(uint8_t opcode, int dst, int src1, const Operand& src2) {
    vex(1, 3, false, opcode, dst, src1, src2);
  }
  void add(int d, int s1, const Operand& s2) { sd(0x58, d, s1, s2); }
  void mul(int d, int s1, const Operand& s2) { sd(0x59, d, s1, s2); }
  void sub(int d, int s1, const Operand& s2) { sd(0x5C, d, s1, s2); }
  void div(int d, int s1, const Operand& s2) { sd(0x5E, d, s1, s2); }
  void max(int d, int s1, const Operand& s2) { sd(0x5F, d, s1, s2); }
  void load(int d, const Operand& m) { vex(1, 3, false, 0x10, d, 0, m); }   // vmovsd d, m64
  void store(const Operand& m, int s) { vex(1, 3, false, 0x11, s, 0, m); }  // vmovsd m64, s
  void copy(int d, int s) { vex(1, 0, false, 0x28, d, 0, Operand{s}); }     // vmovaps d, s
  void xorpd(int d, int s1, const Operand& s2) { vex(1, 1, false, 0x57, d, s1, s2); }
  void andpd(int d, int s1, const Operand& s2) { vex(1, 1, false, 0x54, d, s1, s2); }
  void cmp_nle(int d, int s1, const Operand& s2) {  // vcmpsd d, s1, s2, NLE_UQ (true on NaN)
    sd(0xC2, d, s1, s2);
    byte(0x16);
  }
  // d = s1 * s2 + d (vfmadd231sd), d = -(s1 * s2) + d (vfnmadd231sd): madd's single rounding.
  void fmadd(int d, int s1, const Operand& s2) { vex(2, 1, true, 0xB9, d, s1, s2); }
  void fnmadd(int d, int s1, const Operand& s2) { vex(2, 1, true, 0xBD, d, s1, s2); }
  void call(const void* f) {
    bytes({0x48, 0xB8});  // mov rax, imm64
    u64(uint64_t(reinterpret_cast<uintptr_t>(f)));
    bytes({0xFF, 0xD0});  // call rax
  }

 private:
  uint8_t* code_;
  size_t capacity_, size_ = 0;
};

// Which xmm register holds which slot (a value, a gradient, or a constant after the values),
// least recently used first out.
class RegisterCache {
 public:
  explicit RegisterCache(uint32_t num_values) : reg_of_(2 * size_t(num_values), -1) {}
  int find(const Operand& m) const { return reg_of_[key(m)]; }
  // A register for a new slot, none of those in `keep` (operands of the instruction at hand).
  int take(std::initializer_list<int> keep) {
    int best = -1;
    for (int r = 0; r < kCached; r++) {
      bool kept = false;
      for (int k : keep) kept |= k == r;
      if (kept) continue;
      if (held_[r] < 0) return r;
      if (best < 0 || used_[r] < used_[best]) best = r;
    }
    return best;
  }
  void hold(int r, const Operand& m) {
    const size_t k = key(m);
    if (reg_of_[k] >= 0) drop(reg_of_[k]);  // one register per slot
    drop(r);
    held_[r] = int64_t(k), reg_of_[k] = int8_t(r), used_[r] = ++clock_;
  }
  void touch(int r) { used_[r] = ++clock_; }
  void drop(int r) {
    if (held_[r] >= 0) reg_of_[size_t(held_[r])] = -1;
    held_[r] = -1;
  }
  void forget() {
    for (int r = 0; r < kCached; r++) drop(r);
  }

 private:
  // Values and constants first, then gradients (keys for as many, though the constants have none).
  size_t key(const Operand& m) const {
    return size_t(m.disp / 8) + (m.base == kGrads ? reg_of_.size() / 2 : 0);
  }
  std::vector<int8_t> reg_of_;  // by slot: its register, or -1
  int64_t held_[kCached] = {-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1};
  uint64_t used_[kCached] = {};
  uint64_t clock_ = 0;
};

// Generates the step's code (see the top of the file).
class Generator {
 public:
  Generator(uint32_t num_values, uint8_t* code, size_t capacity)
      : e_(code, capacity),
        cache_(num_values + kJitConstants),
        one_(value(num_values)),
        sign_(value(num_values + 1)),
        zero_(value(num_values + 2)) {}

  // Returns the code's size, or 0 where it would outgrow its capacity. `for_each_instruction`
  // calls its argument with each instruction of the step in turn.
  template <class ForEach>
  size_t run(ForEach&& for_each_instruction, uint32_t num_grads) {
    if (!e_.room()) return 0;
    e_.bytes({0x53, 0x55});              // push rbx; push rbp
    e_.bytes({0x48, 0x83, 0xEC, 0x08});  // sub rsp, 8: calls find the stack 16-byte aligned
    e_.bytes({0x48, 0x89, 0xFB});        // mov rbx, rdi (values)
    e_.bytes({0x48, 0x89, 0xF5});        // mov rbp, rsi (gradients)
    bool fits = true;
    for_each_instruction([&](const ScalarJitInstr& in) {
      if (!(fits = fits && e_.room())) return;
      switch (in.kind) {
        case ScalarJitInstr::forward: forward(in); break;
        case ScalarJitInstr::backward: backward(in); break;
        case ScalarJitInstr::start_backward: start_backward(in, num_grads); break;
      }
    });
    if (!fits || !e_.room()) return 0;
    e_.bytes({0x48, 0x83, 0xC4, 0x08});  // add rsp, 8
    e_.bytes({0x5D, 0x5B, 0xC3});        // pop rbp; pop rbx; ret
    return e_.size();
  }

 private:
  static Operand value(uint32_t i) { return {-1, kValues, int32_t(i * 8)}; }
  static Operand grad(uint32_t i) { return {-1, kGrads, int32_t(i * 8)}; }

  // An operand as a source: its register when cached, else its memory.
  Operand source(const Operand& m) {
    const int r = cache_.find(m);
    if (r < 0) return m;
    cache_.touch(r);
    return Operand{r};
  }
  // An operand in a register (loaded and cached if it was not), none of `keep` evicted.
  int in_register(const Operand& m, std::initializer_list<int> keep) {
    if (const int r = cache_.find(m); r >= 0) {
      cache_.touch(r);
      return r;
    }
    const int r = cache_.take(keep);
    e_.load(r, m);
    cache_.hold(r, m);
    return r;
  }
  // A register for an intermediate: taken from the cache, which forgets what it held.
  int temp(std::initializer_list<int> keep) {
    const int r = cache_.take(keep);
    cache_.drop(r);
    return r;
  }
  // The result in register r is slot m's new content: written through, and cached.
  void result(int r, const Operand& m) {
    e_.store(m, r);
    cache_.hold(r, m);
  }
  void to_xmm0(const Operand& m) {
    const Operand src = source(m);
    if (src.reg < 0)
      e_.load(0, src);
    else if (src.reg != 0)
      e_.copy(0, src.reg);
  }
  // Into register d (from the cache's, or kScratch1): scalar_pow(x, k) for an inline k, with
  // scalar_pow's operations: 1, times the base |k| times, the base x or 1 / x.
  void power(int d, int xr, double k) {
    const int n = int(k);
    e_.load(d, one_);
    int base = xr;
    if (n < 0) {
      e_.load(kScratch1, one_);
      e_.div(kScratch1, kScratch1, Operand{xr});
      base = kScratch1;
    }
    for (int i = 0; i < (n < 0 ? -n : n); i++) e_.mul(d, d, Operand{base});
  }
  // xmm0 = f(v[x]), or scalar_pow(v[x], v[k] - minus_one), through a call (the cache is lost).
  void call_unary(double (*f)(double), uint32_t x) {
    to_xmm0(value(x));
    e_.call(reinterpret_cast<const void*>(f));
    cache_.forget();
  }
  void call_power(uint32_t x, uint32_t k, bool minus_one) {
    to_xmm0(value(x));
    e_.load(1, value(k));
    if (minus_one) e_.sub(1, 1, one_);  // y - 1, as the rule computes it
    e_.call(reinterpret_cast<const void*>(call_pow));
    cache_.forget();
  }

  void forward(const ScalarJitInstr& in) {
    const Operand out = value(in.out);
    switch (in.op) {
      case ScalarOp::add:
      case ScalarOp::sub:
      case ScalarOp::mul:
      case ScalarOp::div: {
        const int x = in_register(value(in.a), {});
        const Operand y = source(value(in.b));
        const int d = temp({x, y.reg});
        const uint8_t opcode = in.op == ScalarOp::add   ? 0x58
                               : in.op == ScalarOp::sub ? 0x5C
                               : in.op == ScalarOp::mul ? 0x59
                                                        : 0x5E;
        e_.sd(opcode, d, x, y);
        result(d, out);
        return;
      }
      case ScalarOp::neg: {
        const int x = in_register(value(in.a), {});
        const int d = temp({x});
        e_.xorpd(d, x, sign_);  // reads 16 bytes: the sign bit, then 0.0
        result(d, out);
        return;
      }
      case ScalarOp::relu: {  // MAXSD(0, x) is 0 > x ? 0 : x: NaN and -0 pass, as x < 0 ? 0 : x
        const int x = in_register(value(in.a), {});
        const int d = temp({x});
        e_.load(kScratch0, zero_);
        e_.max(d, kScratch0, Operand{x});
        result(d, out);
        return;
      }
      case ScalarOp::pow:
        if (inline_power(in.exponent)) {
          const int x = in_register(value(in.a), {});
          const int d = temp({x});
          power(d, x, in.exponent);
          result(d, out);
        } else {
          call_power(in.a, in.b, false);
          result(0, out);
        }
        return;
      case ScalarOp::exp: call_unary(call_exp, in.a), result(0, out); return;
      case ScalarOp::log: call_unary(call_log, in.a), result(0, out); return;
      case ScalarOp::tanh: call_unary(call_tanh, in.a), result(0, out); return;
      case ScalarOp::leaf:
      case ScalarOp::count: return;
    }
  }

  void start_backward(const ScalarJitInstr& in, uint32_t num_grads) {
    // Every gradient zeroed, as the tape zeroes its nodes: stores when few, memset when many.
    cache_.forget();
    if (num_grads <= 64) {
      e_.xorpd(kScratch0, kScratch0, Operand{kScratch0});
      for (uint32_t i = 0; i < num_grads; i++) e_.store(grad(i), kScratch0);
    } else {
      e_.bytes({0x48, 0x89, 0xEF});  // mov rdi, rbp
      e_.bytes({0x31, 0xF6});        // xor esi, esi
      e_.bytes({0x48, 0xBA});        // mov rdx, imm64
      e_.u64(uint64_t(num_grads) * 8);
      e_.call(reinterpret_cast<const void*>(&std::memset));
    }
    const int g = in_register(grad(in.out), {});  // d(root)/d(root) = 0 + 1, as the tape adds it
    e_.add(g, g, one_);
    result(g, grad(in.out));
  }

  void backward(const ScalarJitInstr& in) {
    const bool to_x = in.grads != ScalarGrads::rhs, to_y = in.grads != ScalarGrads::lhs;
    const Operand dx = grad(in.a), dy = grad(in.b);
    switch (in.op) {
      case ScalarOp::add:
      case ScalarOp::sub: {
        const int g = in_register(grad(in.out), {});
        if (to_x) accumulate(dx, g, false);
        if (to_y) accumulate(dy, g, in.op == ScalarOp::sub);
        return;
      }
      case ScalarOp::neg: accumulate(dx, in_register(grad(in.out), {}), true); return;
      case ScalarOp::mul: {  // dx = madd(g, y, dx); dy = madd(g, x, dy)
        const int g = in_register(grad(in.out), {});
        if (to_x) fused(dx, g, in_register(value(in.b), {g}));
        if (to_y) fused(dy, g, in_register(value(in.a), {g}));
        return;
      }
      case ScalarOp::div: {  // inv_y = 1 / y; dx = madd(g, inv_y, dx); dy = madd(-(g out), inv_y,
                             // dy)
        const int g = in_register(grad(in.out), {});
        const int y = in_register(value(in.b), {g});
        const int inv = temp({g, y});
        e_.load(inv, one_);
        e_.div(inv, inv, Operand{y});
        if (to_x) fused(dx, g, inv);
        if (to_y) {
          const int out = in_register(value(in.out), {g, inv});
          e_.mul(kScratch0, g, Operand{out});
          const int d = in_register(dy, {g, inv, out});
          e_.fnmadd(d, kScratch0, Operand{inv});
          result(d, dy);
        }
        return;
      }
      case ScalarOp::pow: {  // if y != 0: dx = madd(g y, scalar_pow(x, y - 1), dx)
        if (in.exponent == 0) return;
        int p = 0;
        if (inline_power(in.exponent - 1)) {
          const int x = in_register(value(in.a), {});
          p = temp({x});
          power(p, x, in.exponent - 1);
        } else {
          call_power(in.a, in.b, true);  // into xmm0; the cache is empty
          p = temp({0});
          e_.copy(p, 0);
        }
        const int g = in_register(grad(in.out), {p});
        const int k = in_register(value(in.b), {p, g});
        e_.mul(kScratch0, g, Operand{k});
        const int d = in_register(dx, {p, g, k});
        e_.fmadd(d, kScratch0, Operand{p});
        result(d, dx);
        cache_.drop(p);
        return;
      }
      case ScalarOp::exp: {  // dx = madd(g, out, dx)
        const int g = in_register(grad(in.out), {});
        fused(dx, g, in_register(value(in.out), {g}));
        return;
      }
      case ScalarOp::log: {  // dx += g / x
        const int g = in_register(grad(in.out), {});
        e_.div(kScratch0, g, source(value(in.a)));
        const int d = in_register(dx, {g});
        e_.add(d, d, Operand{kScratch0});
        result(d, dx);
        return;
      }
      case ScalarOp::tanh: {  // dx = madd(g, madd(-out, out, 1), dx)
        const int g = in_register(grad(in.out), {});
        const int out = in_register(value(in.out), {g});
        e_.load(kScratch0, one_);
        e_.fnmadd(kScratch0, out, Operand{out});
        const int d = in_register(dx, {g, out});
        e_.fmadd(d, g, Operand{kScratch0});
        result(d, dx);
        return;
      }
      case ScalarOp::relu: {  // dx += out <= 0 ? 0 : g (NaN passes g)
        const int g = in_register(grad(in.out), {});
        const int out = in_register(value(in.out), {g});
        e_.cmp_nle(kScratch0, out, zero_);
        e_.andpd(kScratch0, kScratch0, Operand{g});
        const int d = in_register(dx, {g, out});
        e_.add(d, d, Operand{kScratch0});
        result(d, dx);
        return;
      }
      case ScalarOp::leaf:
      case ScalarOp::count: return;
    }
  }
  // slot = slot + g, or slot - g.
  void accumulate(const Operand& slot, int g, bool subtract) {
    const int d = in_register(slot, {g});
    if (subtract)
      e_.sub(d, d, Operand{g});
    else
      e_.add(d, d, Operand{g});
    result(d, slot);
  }
  // slot = madd(g, f, slot), g and f in registers.
  void fused(const Operand& slot, int g, int f) {
    const int d = in_register(slot, {g, f});
    e_.fmadd(d, g, Operand{f});
    result(d, slot);
  }

  Emitter e_;
  RegisterCache cache_;
  Operand one_, sign_, zero_;
};
}  // namespace scalar_jit

// The generated function over one values and one gradients array; empty when not built.
class ScalarJit {
 public:
  // Generates the step's `instructions` (for_each_instruction calls its argument with each in
  // turn) over a values array of `num_values` slots followed by kJitConstants constants, and
  // `num_grads` gradients. Returns false, leaving this empty, where it cannot run: not built for
  // this machine, too long, code over `max_bytes`, or no executable memory.
  template <class ForEach>
  bool build(size_t instructions, ForEach&& for_each_instruction, uint32_t num_values,
             uint32_t num_grads, size_t max_bytes) {
    if (!scalar_jit_runs() || instructions > kJitMaxInstructions ||
        uint64_t(num_values) + kJitConstants >= (uint64_t(1) << 28))  // slots as 32-bit offsets
      return false;
    // Generated straight into pages mapped for it alone (engine/runtime/code_memory.h), as many as
    // it writes (reserved for the longest code it could be, up to max_bytes; the tail is given
    // back): no second copy of the code, in a buffer or a program list, outlives the build.
    const size_t reserved = std::min(max_bytes, (instructions + 2) * scalar_jit::kRoom);
    std::string why;
    CodeMapping code;
    if (reserved == 0 || !code.reserve(reserved, &why)) return false;
    const size_t n = scalar_jit::Generator(num_values, code.data(), reserved)
                         .run(for_each_instruction, num_grads);
    if (n == 0 || !code.seal(n, &why)) return false;
    code_ = std::move(code);
    return true;
  }
  bool built() const { return code_.sealed(); }
  size_t code_bytes() const { return code_.sealed() ? code_.bytes() : 0; }
  void run(double* values, double* grads) const {
    reinterpret_cast<void (*)(double*, double*)>(code_.data())(values, grads);
  }

 private:
  CodeMapping code_;
};

}  // namespace bp
