// engine/core/ops.cc: the op table for float and double, and under bf16, made once
// (engine/core/ops.h says why).
#include "engine/core/op_table.h"

namespace bp {

template <class T>
constinit const OpRuleTable<T> OpRules<T>::table = make_op_rules<T>();
template struct OpRules<float>;
template struct OpRules<double>;
constinit const OpRuleTable<float> OpRulesBf16::table = make_op_rules_bf16();
static_assert(
    [] {
      const OpRuleTable<float> fp32 = make_op_rules<float>(), bf16 = make_op_rules_bf16();
      for (size_t i = 0; i < fp32.size(); i++)
        if (runs_bf16(TensorOp(i)) != (fp32[i].forward != bf16[i].forward)) return false;
      return true;
    }(),
    "the bf16 table replaces the rules of exactly the ops runs_bf16 names");

}  // namespace bp
