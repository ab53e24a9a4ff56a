// engine/core/ops.cc: the op tables for float and double, and under bf16, made once at the
// build's baseline (engine/core/ops.h says why), and the choice among the units' tables: the
// baseline's, or engine/core/ops_avx512.cc's where the process runs AVX-512 (engine/runtime/isa.h).
#include "engine/core/op_table.h"
#include "engine/runtime/isa.h"

namespace bp {

#if defined(BP_AVX512_UNIT)
const OpTables& avx512_op_tables();  // engine/core/ops_avx512.cc
#endif

namespace {
constinit const OpRuleTable<float> baseline_f32 = make_op_rules<float>();
constinit const OpRuleTable<double> baseline_f64 = make_op_rules<double>();
constinit const OpRuleTable<float> baseline_bf16 = make_op_rules_bf16();
constinit const OptimizerPasses<float> baseline_optimizer_f32 = make_optimizer_passes<float>();
constinit const OptimizerPasses<double> baseline_optimizer_f64 = make_optimizer_passes<double>();
}  // namespace

const OpTables& op_tables() {
  static const OpTables& chosen = []() -> const OpTables& {
    static const OpTables baseline{
        isa_name(build_baseline()), &baseline_f32,          &baseline_f64, &baseline_bf16,
        &baseline_optimizer_f32,    &baseline_optimizer_f64};
#if defined(BP_AVX512_UNIT)
    if (isa() >= Isa::avx512) return avx512_op_tables();
#endif
    return baseline;
  }();
  return chosen;
}

}  // namespace bp
