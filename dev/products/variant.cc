// variant.cc: one build of engine/kernels/products.h for pairs.cc, its namespace renamed
// (-Dbp=bp_<name>) so that several builds link into one binary; pairs.sh compiles it once per
// variant.
#include "engine/kernels/products.h"
size_t VARIANT_SCRATCH(int M, int N, int K, bool ta, bool tb) {
  return bp::matmul_scratch_elems(M, N, K, ta, tb);
}
void VARIANT_RUN(float* c, const float* a, bool ta, const float* b, bool tb, int M, int N, int K,
                 float* scratch) {
  bp::matmul_accumulate(c, a, ta, b, tb, M, N, K, scratch, true);  // fresh, as a compiled step
}
