// engine/dialects/kernels.h: every op's kernels and how a program asks for them: the op families,
// a Kernel (one dialect's forward and backward of an op, and whether it can run a shape), the
// tables of them (made once in engine/dialects/dialects.cc), a DialectSpec (`--dialect`: by
// priority, by timing, some families forced), a node's KernelChoice, and the buffers a kernel is
// timed on. How the choice is made is engine/dialects/dialects.h (DialectSelector).
#pragma once

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <new>
#include <optional>
#include <set>
#include <span>
#include <sstream>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "engine/core/ops.h"
#include "engine/core/ops_bf16.h"
#include "engine/dialects/kernels_reference.h"
#include "engine/kernels/library.h"
#include "engine/kernels/product_jit.h"
#include "engine/runtime/arena.h"
#include "engine/runtime/threads.h"

namespace bp {

enum class OpFamily : uint8_t {
  matmul,
  attention,
  layernorm,
  softmax,
  cross_entropy,
  eltwise,
  count
};
inline constexpr const char* op_family_names[] = {"matmul",  "attention",     "layernorm",
                                                  "softmax", "cross_entropy", "eltwise"};
static_assert(std::size(op_family_names) == size_t(OpFamily::count), "name every family");

// The family whose dialects serve `op`, or count for ops with one kernel.
inline OpFamily family_of(TensorOp op) {
  switch (op) {
    case TensorOp::matmul:
    case TensorOp::linear: return OpFamily::matmul;
    case TensorOp::attention: return OpFamily::attention;
    case TensorOp::layernorm: return OpFamily::layernorm;
    case TensorOp::softmax: return OpFamily::softmax;
    case TensorOp::cross_entropy: return OpFamily::cross_entropy;
    case TensorOp::add:
    case TensorOp::mul:
    case TensorOp::tanh:
    case TensorOp::relu:
    case TensorOp::gelu:
    case TensorOp::exp:
    case TensorOp::log: return OpFamily::eltwise;
    default: return OpFamily::count;
  }
}

template <class T>
struct Kernel {
  const char* dialect;
  int priority;                         // `priority` picks the highest available
  bool in_build;                        // its library was found when this binary was built
  bool library;                         // runs a library's code: resident memory once it is used
  bool (*available)(const OpArgs<T>&);  // can run this shape in T (asked only when in_build)
  void (*forward)(const OpArgs<T>&);
  void (*backward)(const OpArgs<T>&);
  size_t (*forward_scratch)(const OpArgs<T>&);
  size_t (*backward_scratch)(const OpArgs<T>&);
  uint8_t backward_fresh = 0;  // the din[k] (bit k) its backward can write fresh (OpArgs::fresh)
};

// An op the bf16 table replaces, under Precision::bf16: its kernel is that table's
// (engine/core/ops_bf16.h), chosen by the precision, not a dialect among the float32 ones and
// never timed against them.
template <class T>
bool bf16_op(TensorOp op, const OpArgs<T>& a) {
  return a.precision == Precision::bf16 && replaced_in_bf16(op);
}
// That kernel (its dialect is named "bf16" in results and plans), or null for an op without one
// or in double.
template <class T>
const Kernel<T>* bf16_kernel_of(TensorOp op);

// Every kernel of `op`, the engine's first. The tables are made once, in the engine's library
// (engine/dialects/dialects.cc, for float and double): no other translation unit compiles the
// library kernels they point to.
template <class T>
std::span<const Kernel<T>> kernels_of(TensorOp op);

// The dialect names of a family, each once, in table order; and whether one is in the build.
template <class T>
std::vector<std::string> dialects_of(OpFamily f) {
  std::vector<std::string> names;
  for (size_t i = 0; i < size_t(TensorOp::count); i++)
    if (family_of(TensorOp(i)) == f)
      for (const Kernel<T>& k : kernels_of<T>(TensorOp(i)))
        if (std::find(names.begin(), names.end(), k.dialect) == names.end())
          names.push_back(k.dialect);
  return names;
}
template <class T>
bool dialect_in_build(OpFamily f, std::string_view name) {
  for (size_t i = 0; i < size_t(TensorOp::count); i++)
    if (family_of(TensorOp(i)) == f)
      for (const Kernel<T>& k : kernels_of<T>(TensorOp(i)))
        if (k.dialect == name) return k.in_build;
  return false;
}

// How kernels are chosen: by priority or by timing, with some families forced.
struct DialectSpec {
  bool timed = false;
  std::array<std::string, size_t(OpFamily::count)> forced;  // "" where not forced
  std::string text = "priority";                            // as given, for results
};

// "priority" | "auto" | FAMILY:NAME, comma-separated (e.g. "auto,matmul:blis"). An unknown
// family or name, or a dialect this build lacks: nullopt and one line in *error.
template <class T = float>
std::optional<DialectSpec> parse_dialect_spec(std::string_view text, std::string* error) {
  DialectSpec spec;
  spec.text = std::string(text);
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    const std::string_view item = text.substr(start, comma - start);
    start = comma + 1;
    if (item == "auto" || item == "priority") {
      spec.timed = item == "auto";
      continue;
    }
    const size_t colon = item.find(':');
    const std::string_view family = item.substr(0, colon);
    const auto f = std::find(std::begin(op_family_names), std::end(op_family_names), family);
    if (colon == std::string_view::npos || f == std::end(op_family_names)) {
      std::string families;
      for (const char* n : op_family_names)
        families += std::string(families.empty() ? "" : ", ") + n;
      *error = "'" + std::string(item) +
               "': expected auto, priority or FAMILY:NAME with FAMILY one of " + families;
      return std::nullopt;
    }
    const OpFamily fam = OpFamily(f - std::begin(op_family_names));
    const std::string_view name = item.substr(colon + 1);
    const std::vector<std::string> names = dialects_of<T>(fam);
    if (std::find(names.begin(), names.end(), name) == names.end()) {
      std::string valid;
      for (const std::string& n : names) valid += (valid.empty() ? "" : ", ") + n;
      *error = "'" + std::string(item) + "': no dialect " + std::string(name) + " for " +
               std::string(family) + "; its dialects are " + valid;
      return std::nullopt;
    }
    if (!dialect_in_build<T>(fam, name)) {
      *error = "'" + std::string(item) + "': " + std::string(name) +
               " was not found when this binary was built (install its Debian -dev package, "
               "harness/install-deps.sh does, and rebuild)";
      return std::nullopt;
    }
    spec.forced[size_t(fam)] = std::string(name);
  }
  return spec;
}

// A forced dialect that cannot run a node of the program.
struct DialectError {
  std::string message;
};

// One node's choice: the kernel, and what auto measured (seconds per forward and backward of
// each timed candidate, in priority order; empty when nothing was timed).
template <class T>
struct KernelChoice {
  const Kernel<T>* kernel;
  std::vector<std::pair<const char*, double>> seconds;
};

// "(64, 256) (1024, 256) -> (64, 1024)": an op's operand and output shapes, for messages.
template <class T>
std::string shape_text(TensorOp op, const OpArgs<T>& a) {
  std::string s = tensor_op_names[int(op)];
  for (int k = 0; k < 3; k++)
    if (a.in_rows[k])
      s += " (" + std::to_string(a.in_rows[k]) + ", " + std::to_string(a.in_cols[k]) + ")";
  return s + " -> (" + std::to_string(a.rows) + ", " + std::to_string(a.cols) + ")";
}

// Buffers of one op's shapes with every pointer of its OpArgs set, for running kernels apart from
// any program: auto's timing, and the kernel benchmarks (studies/kernels/kernel_rows.h). Operands
// are positive (log's too) and indices 0 (valid for any operand); scratch fits every kernel given.
template <class T>
struct KernelBench {
  OpArgs<T> args;
  KernelBench(TensorOp op, const OpArgs<T>& shape, const std::vector<const Kernel<T>*>& kernels)
      : args(shape) {
    OpArgs<T>& a = args;
    const size_t n = size_t(a.rows) * a.cols;
    a.out = take(n, 0), a.dout = take(n, T(0.01));
    a.aux = take(op_rules<T>()[int(op)].aux_elems(a), 0);
    for (int k = 0; k < 3; k++)
      if (a.in_rows[k]) {
        const size_t m = size_t(a.in_rows[k]) * a.in_cols[k];
        a.in[k] = take(m, T(0.5));
        a.din[k] = take(m, 0);
      }
    size_t scratch = 0;
    for (const Kernel<T>* k : kernels)
      scratch = std::max({scratch, k->forward_scratch(a), k->backward_scratch(a)});
    a.scratch = take(scratch, 0);
    indices.assign(size_t(std::max(shape.index.size, 0)), 0);
    if (shape.index.size) a.index = {indices.data(), shape.index.size};
  }
  // One forward and backward, as a compiled step after zero_grad runs them: each gradient the
  // kernel can write fresh written so (OpArgs::fresh), the op being its only writer here.
  void run(const Kernel<T>& k) const {
    k.forward(args);
    if (!k.backward) return;
    OpArgs<T> b = args;
    b.fresh = k.backward_fresh;
    k.backward(b);
  }

 private:
  // On whole cache lines, as every buffer of a step is (the planned arena, the eager arena):
  // a vector's large buffers start 16 bytes into a page, where every 64-byte load of an AVX-512
  // kernel spans two lines, and the kernel rows would time kernels slower than the step runs them.
  static constexpr size_t kAlign = 64;
  struct Free {
    void operator()(T* p) const { std::free(p); }
  };
  T* take(size_t n, T from) {
    n = std::max<size_t>(n, 1);
    const size_t bytes = (n * sizeof(T) + kAlign - 1) / kAlign * kAlign;
    T* v = storage.emplace_back(static_cast<T*>(std::aligned_alloc(kAlign, bytes))).get();
    if (!v) throw AllocationFailed(bytes, "a kernel timing's operands");
    for (size_t i = 0; i < n; i++) v[i] = from + T(0.5) * T((i * 7919) % 1024) / 1024;
    return v;
  }
  std::deque<std::unique_ptr<T, Free>> storage;
  std::vector<int32_t> indices;
};

}  // namespace bp
