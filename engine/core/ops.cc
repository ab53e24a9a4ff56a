// engine/core/ops.cc: the op table for float and double, and under bf16, made once
// (engine/core/ops.h says why).
#include "engine/core/op_table.h"

namespace bp {

template <class T>
constinit const OpRuleTable<T> OpRules<T>::table = make_op_rules<T>();
template struct OpRules<float>;
template struct OpRules<double>;
constinit const OpRuleTable<float> OpRulesBf16::table = make_op_rules_bf16();

}  // namespace bp
