// engine/core/op_table.h: the op table itself, every op's rule in TensorOp's order
// (engine/core/ops.h says what a rule holds), and the table under bf16 (engine/core/ops_bf16.h).
// Only engine/core/ops.cc and ops_avx512.cc include it, each to make the float, double and bf16
// table once.
#pragma once

#include <iterator>

#include "engine/core/ops.h"
#include "engine/core/ops_bf16.h"
#include "engine/core/optimizer_passes.h"

namespace bp {
BP_KERNELS_BEGIN

// {forward, backward, aux, forward scratch, backward scratch, what backward reads, forward
// accumulates, elementwise, operands backward writes fresh, row-wise}
template <class T>
constexpr OpRuleTable<T> make_op_rules() {
  constexpr OpRule<T> rules[] = {
      /* leaf */ {nullptr, nullptr, ops::none<T>, ops::none<T>, ops::none<T>, 0, false, false},
      /* view: shares its operand's buffers */
      {nullptr, nullptr, ops::none<T>, ops::none<T>, ops::none<T>, 0, false, false},
      /* matmul */
      {ops::matmul_forward<T>, ops::matmul_backward<T>, ops::none<T>,
       ops::product_forward_scratch<T, TiledGemm, false>,
       ops::product_backward_scratch<T, TiledGemm, false>, kReadsIn0 | kReadsIn1, true, false,
       1 | 2},
      /* linear */
      {ops::linear_forward<T>, ops::linear_backward<T>, ops::none<T>,
       ops::product_forward_scratch<T, TiledGemm, true>,
       ops::product_backward_scratch<T, TiledGemm, true>, kReadsIn0 | kReadsIn1 | kReadsOut, false,
       false, 1 | 2 | 4},
      /* add */
      {ops::add_forward<T>, ops::add_backward<T>, ops::none<T>, ops::none<T>, ops::none<T>, 0,
       false, true, 1 | 2},
      /* mul */
      {ops::mul_forward<T>, ops::mul_backward<T>, ops::none<T>, ops::none<T>, ops::none<T>,
       kReadsIn0 | kReadsIn1, false, true},
      /* tanh */
      {ops::tanh_forward<T>, ops::tanh_backward<T>, ops::none<T>, ops::none<T>, ops::none<T>,
       kReadsOut, false, true},
      /* relu */
      {ops::relu_forward<T>, ops::relu_backward<T>, ops::none<T>, ops::none<T>, ops::none<T>,
       kReadsOut, false, true},
      /* gelu */
      {ops::gelu_forward<T>, ops::gelu_backward<T>, ops::none<T>, ops::none<T>, ops::none<T>,
       kReadsIn0, false, true},
      /* exp */
      {ops::exp_forward<T>, ops::exp_backward<T>, ops::none<T>, ops::none<T>, ops::none<T>,
       kReadsOut, false, true},
      /* log */
      {ops::log_forward<T>, ops::log_backward<T>, ops::none<T>, ops::none<T>, ops::none<T>,
       kReadsIn0, false, true},
      /* embedding */
      {ops::embedding_forward<T>, ops::embedding_backward<T>, ops::none<T>, ops::none<T>,
       ops::none<T>, 0, false, false},
      /* sum */
      {ops::sum_forward<T>, ops::sum_backward<T>, ops::none<T>, ops::none<T>, ops::none<T>, 0,
       false, false},
      /* mean */
      {ops::mean_forward<T>, ops::mean_backward<T>, ops::none<T>, ops::none<T>, ops::none<T>, 0,
       false, false},
      /* layernorm */
      {ops::layernorm_forward_op<T>, ops::layernorm_backward_op<T>, ops::layernorm_aux<T>,
       ops::none<T>, ops::none<T>, kReadsIn0 | kReadsIn1 | kReadsAux, false, false, 1 | 2 | 4},
      /* softmax */
      {ops::softmax_forward<T>, ops::softmax_backward<T>, ops::none<T>, ops::none<T>, ops::none<T>,
       kReadsOut, false, false, 0, true},
      /* attention */
      {ops::attention_forward_op<T>, ops::attention_backward_op<T>, ops::attention_aux<T>,
       ops::none<T>, ops::attention_backward_scratch<T>, kReadsIn0 | kReadsAux, false, false},
      /* cross_entropy */
      {ops::cross_entropy_forward_op<T>, ops::cross_entropy_backward_op<T>,
       ops::cross_entropy_aux<T>, ops::cross_entropy_forward_scratch<T>, ops::none<T>, kReadsAux,
       false, false, 1},
      /* sigmoid */
      {ops::sigmoid_forward<T>, ops::sigmoid_backward<T>, ops::none<T>, ops::none<T>, ops::none<T>,
       kReadsOut, false, true},
      /* logsumexp */
      {ops::logsumexp_forward<T>, ops::logsumexp_backward<T>, ops::none<T>, ops::none<T>,
       ops::none<T>, kReadsIn0 | kReadsOut, false, false, 0, true},
      /* sum_rows */
      {ops::sum_rows_forward<T>, ops::sum_rows_backward<T>, ops::none<T>, ops::none<T>,
       ops::none<T>, 0, false, false, 1, true},
      /* sub */
      {ops::sub_forward<T>, ops::sub_backward<T>, ops::none<T>, ops::none<T>, ops::none<T>, 0,
       false, true, 1 | 2},
      /* div */
      {ops::div_forward<T>, ops::div_backward<T>, ops::none<T>, ops::none<T>, ops::none<T>,
       kReadsIn0 | kReadsIn1, false, true},
      /* log_softmax */
      {ops::log_softmax_forward<T>, ops::log_softmax_backward<T>, ops::none<T>, ops::none<T>,
       ops::none<T>, kReadsOut, false, false, 0, true},
      /* nll */
      {ops::nll_forward<T>, ops::nll_backward<T>, ops::none<T>, ops::none<T>, ops::none<T>, 0,
       false, false},
      /* transpose */
      {ops::transpose_forward<T>, ops::transpose_backward<T>, ops::none<T>, ops::none<T>,
       ops::none<T>, 0, false, false},
  };
  static_assert(std::size(rules) == size_t(TensorOp::count), "a rule for every TensorOp");
  OpRuleTable<T> table{};
  for (size_t i = 0; i < table.size(); i++) table[i] = rules[i];
  return table;
}

// An op whose backward reads one float32 activation, under bf16: that activation saved in bf16
// (engine/core/ops_bf16.h: saved_in_bf16 says which).
template <TensorOp Op, bool Out, bool Aux = false>
constexpr void save_in_bf16(OpRuleTable<float>& table) {
  static_assert(saved_in_bf16(Op) == (Out ? SavedBf16::output : SavedBf16::input));
  using S = ops::Saved<Op, Out, Aux>;
  OpRule<float>& r = table[size_t(Op)];
  r.forward = S::forward, r.backward = S::backward, r.aux_elems = S::aux_elems;
  r.forward_scratch = S::forward_scratch, r.backward_scratch = S::backward_scratch;
  r.backward_reads = uint8_t((r.backward_reads & ~(Out ? kReadsOut : kReadsIn0)) | kReadsAux);
}
// Under Precision::bf16: the products on bf16 operands (runs_bf16), each saving its activation
// operands' bf16 copies in aux (and linear's ReLU which outputs passed), which its backward reads
// instead of them; the other ops that read an activation in their backward save it in bf16.
constexpr OpRuleTable<float> make_op_rules_bf16() {
  OpRuleTable<float> table = make_op_rules<float>();
  table[size_t(TensorOp::matmul)] = {ops::matmul_forward_bf16,
                                     ops::matmul_backward_bf16,
                                     ops::matmul_aux_bf16,
                                     ops::bf16_forward_scratch<false>,
                                     ops::bf16_backward_scratch<false>,
                                     kReadsAux,
                                     true,
                                     false,
                                     1 | 2};
  table[size_t(TensorOp::linear)] = {ops::linear_forward_bf16,
                                     ops::linear_backward_bf16,
                                     ops::linear_aux_bf16,
                                     ops::bf16_forward_scratch<true>,
                                     ops::bf16_backward_scratch<true>,
                                     kReadsAux,
                                     false,
                                     false,
                                     1 | 2 | 4};
  save_in_bf16<TensorOp::tanh, true>(table);
  save_in_bf16<TensorOp::relu, true>(table);
  save_in_bf16<TensorOp::gelu, false>(table);
  save_in_bf16<TensorOp::exp, true>(table);
  save_in_bf16<TensorOp::log, false>(table);
  save_in_bf16<TensorOp::layernorm, false>(table);
  save_in_bf16<TensorOp::softmax, true>(table);
  save_in_bf16<TensorOp::attention, false, true>(table);  // and its probabilities
  save_in_bf16<TensorOp::sigmoid, true>(table);
  return table;
}

template <class T>
constexpr OptimizerPasses<T> make_optimizer_passes() {
  return {finite_pass<T>, sgd_pass<T>, adamw_pass<T>, stream_pass<T>};
}

BP_KERNELS_END
}  // namespace bp
