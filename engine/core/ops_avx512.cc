// engine/core/ops_avx512.cc: the op tables again, every kernel compiled for AVX-512 (F, BW, VL,
// DQ, CD: x86-64-v4), in the kernel namespace `avx512` (engine/kernels/isa_namespace.h). The
// process takes them where it runs AVX-512 (engine/core/ops.cc, engine/runtime/isa.h); BP_ISA=avx2
// keeps the baseline's. Same arithmetic, wider vectors: products, elementwise ops and the bf16
// products give the baseline's bits; a sum vectorised by `#pragma omp simd` adds in another order.
//
// How a unit above the baseline stays safe: what is not a kernel (the standard library, the
// thread pool, OpArgs and the tables' interface) is included first, at the baseline, so that no
// inline function the rest of the program shares is compiled here for AVX-512 (the linker keeps
// one copy of each, from whichever unit it meets first). Only then does the target rise, for the
// kernel headers alone, by `#pragma GCC target` with the instruction sets and no `arch=`: GCC
// inlines a baseline function into an AVX-512 one only when their arch is the same.
// harness/tests/isa_symbols.py checks this object: every symbol it defines for the linker to
// share is in namespace avx512.
#define BP_KERNEL_ISA avx512
#define BP_KERNEL_AVX512 1

#include <immintrin.h>
#include <sched.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <limits>
#include <string>
#include <string_view>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "engine/core/op_args.h"
#include "engine/runtime/isa.h"
#include "engine/runtime/threads.h"

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx512cd")
#include "engine/core/op_table.h"
#pragma GCC pop_options

namespace bp {

namespace {
constinit const OpRuleTable<float> avx512_f32 = make_op_rules<float>();
constinit const OpRuleTable<double> avx512_f64 = make_op_rules<double>();
constinit const OpRuleTable<float> avx512_bf16 = make_op_rules_bf16();
constinit const OptimizerPasses<float> avx512_optimizer_f32 = make_optimizer_passes<float>();
constinit const OptimizerPasses<double> avx512_optimizer_f64 = make_optimizer_passes<double>();
}  // namespace

const OpTables& avx512_op_tables() {
  static const OpTables tables{"avx512",     &avx512_f32,           &avx512_f64,
                               &avx512_bf16, &avx512_optimizer_f32, &avx512_optimizer_f64};
  return tables;
}

}  // namespace bp
