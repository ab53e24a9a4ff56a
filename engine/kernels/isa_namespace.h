// engine/kernels/isa_namespace.h: the namespace that the kernel headers (kernels.h, products.h,
// bf16.h, engine/core/ops.h, ops_bf16.h, op_table.h) put their code in, one per instruction-set
// unit, so that the same inline kernels compiled for two levels in one program are two sets of
// functions, not one name with two bodies of which the linker keeps either.
//
// A unit compiled above the build's baseline (engine/core/ops_avx512.cc) defines BP_KERNEL_ISA
// before it includes anything; every other unit gets `baseline`. Only code in these namespaces may
// be compiled above the baseline: such a unit includes everything else (the standard library, the
// thread pool, OpArgs) first, at the baseline (engine/core/ops_avx512.cc says how, and
// harness/tests/isa_symbols.py checks its object file for a symbol outside its namespace).
#pragma once

#if !defined(BP_KERNEL_ISA)
#define BP_KERNEL_ISA baseline
#endif
#define BP_KERNELS_BEGIN inline namespace BP_KERNEL_ISA {
#define BP_KERNELS_END }

// What this unit's kernels may use: the baseline's instruction sets (-march) or, in a unit above
// it, those it raises. GCC's `#pragma GCC target` does not define __AVX512F__ and its kin, so such
// a unit says so itself (BP_KERNEL_AVX512, before it includes anything) and the kernels test these.
#if defined(__AVX512F__) && !defined(BP_KERNEL_AVX512)
#define BP_KERNEL_AVX512 1
#endif
#if defined(BP_KERNEL_AVX512) || (defined(__AVX2__) && defined(__FMA__))
#define BP_KERNEL_AVX2 1  // AVX2 with FMA (x86-64-v3)
#endif
