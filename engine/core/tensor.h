// engine/core/tensor.h: dense tensor reverse-mode autodiff on the same plan as
// engine/core/scalar.h.
//
// Every tensor is a row-major matrix (rows, cols); sequences are (B*T, C) and a view changes the
// shape without copying. Building ops records nodes on a tape and computes forward at once;
// `backward` walks the tape once in reverse creation order. Memory comes from two arenas
// (engine/runtime/arena.h): one for constants (kept), one for the step's activations and their
// gradients (reset after each step, consolidated to one block, so steady-state steps allocate
// nothing). Trained parameters, their gradients and the optimizer's state live in flat buffers
// (engine/core/optimizer.h): SGD and AdamW are one pass each, and a step with a NaN or Inf
// gradient is skipped exactly. Each op's method below checks its operands and makes its node;
// forward_last and backward_node run the op's rule from engine/core/ops.h, the one table of forward
// and derivative code that the compiled mode (engine/compiled/program.h) runs too. Backward
// accumulates (+=) into gradients; only zero_grad zeroes.
//
// Mixed precision (`set_precision(Precision::bf16)`, float graphs, before the first step): the
// ops run by the bf16 table of engine/core/ops_bf16.h, the products on bf16 operands, each
// parameter's bf16 copy kept in the flat buffers beside it.
//
// Record-only (`TensorGraph(reserve, /*record_only=*/true)`): parameters are real, but a step's
// ops only record their nodes, shapes checked, with no memory and no arithmetic. The compiled
// mode captures a step this way, so capturing never costs what an eager step holds.
//
// The contract at the edges: every operand of every op is checked (its handle belongs to this
// graph and to this step, its shape fits the op); a violation stops the program with one line
// naming the op, the operands' shapes and what is valid. A second backward in one step is refused,
// as PyTorch refuses it.
//
// Threads: the kernels split themselves over engine/runtime/threads.h's pool (bitwise the same at
// any thread count); the graph is built and walked by one thread. Not here: broadcasting beyond
// "one row against every row", more than two dimensions, a static-graph mode
// (engine/compiled/backend.h). T is float for benchmarks and double for the finite-difference
// tests.
//
//   bp::TensorGraph<float> g;
//   auto W = g.param(4, 3, init), x = g.input(2, 3, data);        // (OC, C), (N, C)
//   auto loss = g.cross_entropy(g.matmul(x, W, true), targets);    // x @ W^T: (N, OC)
//   g.backward(loss); g.adamw_step(cfg); g.end_step();
//
// Tests: engine/core/tensor_test.cc (every op against central finite differences in double,
// misuse).
#pragma once

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <iterator>
#include <span>
#include <string_view>
#include <type_traits>
#include <vector>

#include "engine/core/ops.h"
#include "engine/core/ops_bf16.h"
#include "engine/core/optimizer.h"
#include "engine/runtime/arena.h"

namespace bp {

// A handle to one tensor: which graph made it (0: an empty, default-constructed handle), which
// node, and in which step (parameters and constants outlive steps; anything else is valid until
// end_step()).
struct Tensor {
  uint32_t id = 0;
  uint32_t graph = 0;
  uint32_t step = 0;
};

template <class T>
class TensorGraph {
 public:
  struct Node {
    T* data;
    T* grad;  // null when nothing upstream needs the gradient (inputs)
    T* aux;   // what backward needs that forward had: layernorm mean/rstd, probabilities
    int32_t rows, cols;
    uint32_t in[3];
    int32_t arg[3];  // op-specific: matmul transpose flag; linear's relu flag; attention B, T, H
    IndexSpan index;
    TensorOp op;
    bool needs_grad;  // some operand is trained (grad is null in record-only mode all the same)
  };

  explicit TensorGraph(size_t reserve_nodes = 256, bool record_only = false)
      : serial_(next_serial()), record_only_(record_only) {
    nodes_.reserve(reserve_nodes);
  }
  TensorGraph(const TensorGraph&) = delete;
  TensorGraph& operator=(const TensorGraph&) = delete;

  // ---- leaves ----

  // A trainable (rows, cols) parameter initialised from `init` (row-major). Parameters come
  // before the first step: end_step() keeps them by truncating the tape, and they are packed into
  // flat buffers (a pointer to one from data() or grad() holds until the next param()).
  Tensor param(int32_t rows, int32_t cols, std::span<const T> init) {
    return persistent_leaf("param", rows, cols, init, true);
  }
  // A constant that lives as long as the parameters (a dataset prepared at setup); no gradient.
  Tensor constant(int32_t rows, int32_t cols, std::span<const T> values) {
    return persistent_leaf("constant", rows, cols, values, false);
  }
  // A constant (rows, cols) input of this step only; no gradient.
  Tensor input(int32_t rows, int32_t cols, std::span<const T> values) {
    check_leaf_shape("input", rows, cols, values.size());
    if (record_only_)
      fail("input",
           "(%d, %d) in a record-only graph: a captured step reads constants, made at setup", rows,
           cols);
    Node& n = push(TensorOp::leaf, rows, cols, step_, false);
    std::copy(values.begin(), values.end(), n.data);
    return last();
  }

  // ---- ops: each checks its operands, builds a node and computes its forward ----

  // Same data, new shape (rows*cols must match); the gradient buffer is shared too, so
  // backward has nothing to do.
  Tensor view(Tensor x, int32_t rows, int32_t cols) {
    const Node a = operand(x, "view");
    if (rows < 1 || cols < 1 || size_t(rows) * cols != numel(a))
      fail("view", "x %s cannot be viewed as (%d, %d): need the same number of elements",
           shape(a).text, rows, cols);
    Node n = a;
    n.op = TensorOp::view, n.rows = rows, n.cols = cols, n.in[0] = x.id;
    nodes_.push_back(n);
    started_ = true;
    return last();
  }

  // a (M, K) times b (K, N), or times b^T when transpose_b and b is (N, K) (nn.Linear's layout).
  Tensor matmul(Tensor a, Tensor b, bool transpose_b) {
    const Node x = operand(a, "matmul"), y = operand(b, "matmul");
    const int32_t M = x.rows, K = x.cols, N = transpose_b ? y.rows : y.cols;
    if ((transpose_b ? y.cols : y.rows) != K)
      fail("matmul", "a %s, b %s%s: the inner dimensions differ", shape(x).text, shape(y).text,
           transpose_b ? " (transposed)" : "");
    Node& n = make(TensorOp::matmul, M, N, {a.id, b.id});
    n.arg[0] = transpose_b;
    return forward_last();
  }

  // x (N, C) @ w^T + b, w (OC, C), b (1, OC): torch.nn.Linear, fused (engine/core/ops.h says why),
  // and relu(linear(...)) when relu.
  Tensor linear(Tensor x, Tensor w, Tensor b, bool relu = false) {
    const char* op = relu ? "linear_relu" : "linear";
    const Node xi = operand(x, op), wi = operand(w, op), bi = operand(b, op);
    const int32_t N = xi.rows, C = xi.cols, OC = wi.rows;
    if (wi.cols != C || bi.rows != 1 || bi.cols != OC)
      fail(op, "x %s, w %s, b %s: need x (N, C), w (OC, C), b (1, OC)", shape(xi).text,
           shape(wi).text, shape(bi).text);
    Node& n = make(TensorOp::linear, N, OC, {x.id, w.id, b.id});
    n.arg[0] = relu;
    return forward_last();
  }

  // x + y, where y has x's shape or is one row (cols) added to every row of x (a bias).
  Tensor add(Tensor x, Tensor y) { return binary(TensorOp::add, x, y); }
  // x * y elementwise, with the same broadcasting as add.
  Tensor mul(Tensor x, Tensor y) { return binary(TensorOp::mul, x, y); }
  // x - y and x / y elementwise, with the same broadcasting as add.
  Tensor sub(Tensor x, Tensor y) { return binary(TensorOp::sub, x, y); }
  Tensor div(Tensor x, Tensor y) { return binary(TensorOp::div, x, y); }

  Tensor tanh(Tensor x) { return unary(TensorOp::tanh, x); }
  Tensor relu(Tensor x) { return unary(TensorOp::relu, x); }
  Tensor gelu(Tensor x) { return unary(TensorOp::gelu, x); }  // exact (erf) form, torch's default
  Tensor exp(Tensor x) { return unary(TensorOp::exp, x); }
  Tensor log(Tensor x) { return unary(TensorOp::log, x); }
  Tensor sigmoid(Tensor x) { return unary(TensorOp::sigmoid, x); }

  // Rows of table (V, C) picked by idx (N): (N, C).
  Tensor embedding(Tensor table, IndexSpan idx) {
    const Node t = operand(table, "embedding");
    check_embedding_indices(t, idx);
    Node& n = make(TensorOp::embedding, idx.size, t.cols, {table.id});
    n.index = idx;
    return forward_last();
  }

  Tensor sum(Tensor x) { return reduce(TensorOp::sum, x); }
  // The sum of every row of x (N, C): (N, 1).
  Tensor sum_rows(Tensor x) { return per_row(TensorOp::sum_rows, x); }
  // log(sum(exp(row))) of every row of x (N, C): (N, 1), steadied by each row's maximum.
  Tensor logsumexp(Tensor x) { return per_row(TensorOp::logsumexp, x); }
  Tensor mean(Tensor x) { return reduce(TensorOp::mean, x); }

  // Per row of x (N, C): normalise to zero mean and unit variance (biased, eps 1e-5 as in
  // torch.nn.LayerNorm), then scale by gamma (1, C) and shift by beta (1, C).
  Tensor layernorm(Tensor x, Tensor gamma, Tensor beta) {
    const Node a = operand(x, "layernorm"), g = operand(gamma, "layernorm"),
               b = operand(beta, "layernorm");
    if (g.rows != 1 || g.cols != a.cols || b.rows != 1 || b.cols != a.cols)
      fail("layernorm",
           "x %s, gamma %s, beta %s: gamma and beta must be (1, %d), one value per "
           "column of x",
           shape(a).text, shape(g).text, shape(b).text, a.cols);
    make(TensorOp::layernorm, a.rows, a.cols, {x.id, gamma.id, beta.id});
    return forward_last();
  }

  // Softmax of every row.
  Tensor softmax(Tensor x) {
    const Node a = operand(x, "softmax");
    make(TensorOp::softmax, a.rows, a.cols, {x.id});
    return forward_last();
  }

  // Causal multi-head self-attention of qkv (B*T, 3C) into (B*T, C), H heads of C/H
  // (engine/kernels/kernels.h).
  Tensor attention(Tensor qkv, int32_t B, int32_t T_, int32_t H) {
    const Node a = operand(qkv, "attention");
    if (B < 1 || T_ < 1 || H < 1)
      fail("attention", "qkv %s, B=%d, T=%d, H=%d: B, T and H must each be at least 1",
           shape(a).text, B, T_, H);
    const int32_t C = a.cols / 3;
    if (int64_t(B) * T_ != a.rows || a.cols % 3 != 0 || C < H || C % H != 0)
      fail("attention",
           "qkv %s, B=%d, T=%d, H=%d: need qkv (B*T, 3C) = (%lld, 3C) with C a "
           "multiple of H",
           shape(a).text, B, T_, H, (long long)B * T_);
    if (C / H > kMaxHeadSize)
      fail("attention", "qkv %s, H=%d: head size %d is above kMaxHeadSize (%d)", shape(a).text, H,
           C / H, kMaxHeadSize);
    Node& n = make(TensorOp::attention, B * T_, C, {qkv.id});
    n.arg[0] = B, n.arg[1] = T_, n.arg[2] = H;
    return forward_last();
  }

  // x (R, C) transposed: (C, R), a copy (a view keeps x's layout: view()).
  Tensor transpose(Tensor x) {
    const Node a = operand(x, "transpose");
    make(TensorOp::transpose, a.cols, a.rows, {x.id});
    return forward_last();
  }
  // Per row of x (N, C): x - log(sum(exp(x))), the log of softmax without its underflow.
  Tensor log_softmax(Tensor x) {
    const Node a = operand(x, "log_softmax");
    make(TensorOp::log_softmax, a.rows, a.cols, {x.id});
    return forward_last();
  }
  // The mean over rows of -logp[r, target r] (1, 1): torch's nll_loss; after log_softmax, the
  // cross-entropy of the logits.
  Tensor nll(Tensor logp, IndexSpan targets) {
    const Node a = operand(logp, "nll");
    check_targets(a, targets, "nll");
    Node& n = make(TensorOp::nll, 1, 1, {logp.id});
    n.index = targets;
    return forward_last();
  }
  // Mean over rows of -log softmax(logits)[target]: logits (N, V), targets (N). Output (1, 1).
  Tensor cross_entropy(Tensor logits, IndexSpan targets) {
    const Node a = operand(logits, "cross_entropy");
    check_targets(a, targets, "cross_entropy");
    Node& n = make(TensorOp::cross_entropy, 1, 1, {logits.id});
    n.index = targets;
    return forward_last();
  }

  // ---- backward, optimizers, step boundaries ----

  // d(root)/d(everything) into the gradient buffers; root must be (1, 1). Once per step: a second
  // call would add every gradient again (PyTorch refuses it too).
  void backward(Tensor root) {
    const Node r = operand(root, "backward");
    if (r.rows != 1 || r.cols != 1 || !r.needs_grad)
      fail("backward", "root %s%s: need a (1, 1) result that depends on a parameter", shape(r).text,
           r.needs_grad ? "" : " with no gradient");
    if (backward_done_)
      fail("backward",
           "called twice in one step (every gradient would be added twice); call "
           "end_step() between steps");
    backward_done_ = true;
    if (record_only_) return;
    r.grad[0] += T(1);
    if (!gradient_final_) {
      for (uint32_t i = root.id + 1; i-- > num_params_;) backward_node(nodes_[i]);
      return;
    }
    schedule_final_gradients(root.id);
    size_t next = 0;  // final_ is ordered by the node after which each gradient is final
    for (; next < final_.size() && final_[next].after == UINT32_MAX; next++)
      gradient_final_(param_offsets_[final_[next].param], numel(nodes_[final_[next].param]));
    for (uint32_t i = root.id + 1; i-- > num_params_;) {
      backward_node(nodes_[i]);
      for (; next < final_.size() && final_[next].after == i; next++)
        gradient_final_(param_offsets_[final_[next].param], numel(nodes_[final_[next].param]));
    }
  }

  // ---- data parallel (engine/distributed/data_parallel.h) ----
  // f(offset, elems) for each trained parameter's gradient, its range in the flat buffer
  // (flat_grads()), called by backward() as soon as the walk has added the last term to it (one
  // the step does not read, before the walk), so that its all-reduce can start under the rest of
  // the backward. The order is the walk's: the same graph gives the same order on every rank.
  // backward_since() (segments) does not call it.
  void on_gradient_final(std::function<void(size_t offset, size_t elems)> f) {
    gradient_final_ = std::move(f);
  }
  // The compiled mode's backward (a program's, engine/compiled/program.h) says so itself:
  // persistent node p's gradient is final. Nothing for a constant, or with no one listening.
  bool gradients_listened_to() const { return bool(gradient_final_); }
  void gradient_is_final(size_t p) {
    if (gradient_final_ && p < param_offsets_.size() && param_offsets_[p] != SIZE_MAX)
      gradient_final_(param_offsets_[p], numel(nodes_[p]));
  }
  T* flat_grads() { return flat_.grads(); }
  // A sharded optimizer (DataParallel::sharded_step) updates ranges of the flat buffers itself:
  // whether its step goes ahead, counted as sgd_step's and adamw_step's are, and the AdamW
  // coefficients of a step that does.
  FlatView<T> flat_view() { return flat_.view(); }
  bool count_step(bool finite) { return counted(finite); }
  AdamWStep<T> next_adamw_step(const AdamWConfig& cfg) {
    adamw_steps_++;
    return adamw_coefficients<T>(cfg.lr, cfg.beta1, cfg.beta2, cfg.eps, cfg.weight_decay,
                                 adamw_steps_);
  }
  // Persistent node p's offset in the flat buffers; SIZE_MAX for a constant.
  size_t param_offset(size_t p) const {
    return p < param_offsets_.size() ? param_offsets_[p] : SIZE_MAX;
  }

  // ---- segments: backpropagation through part of a step (engine/checkpoint/checkpoint.h) ----
  // A recurrent model reversed one time step at a time: mark(), a state() leaf, the step's ops,
  // seed_grad() on its loss and on its output state, backward_since(mark), read the state's
  // gradient, rewind(mark). Not mixed with backward() in one step.

  struct Mark {
    uint32_t nodes, step;
    typename Arena<T>::Mark arena;
  };
  Mark mark() const { return {uint32_t(nodes_.size()), steps_, step_.mark()}; }

  // A leaf of this step that takes a gradient: the state a segment starts from (PyTorch's
  // h.detach().requires_grad_()).
  Tensor state(int32_t rows, int32_t cols, std::span<const T> values) {
    check_leaf_shape("state", rows, cols, values.size());
    if (record_only_) fail("state", "(%d, %d) in a record-only graph", rows, cols);
    Node& n = push(TensorOp::leaf, rows, cols, step_, true);
    std::copy(values.begin(), values.end(), n.data);
    return last();
  }

  // Adds `g` to t's gradient: the gradient flowing into a segment's output from the steps after
  // it, or 1 for a loss. Added, not set, so that the arithmetic is the whole step's backward's.
  void seed_grad(Tensor t, std::span<const T> g) {
    const Node& n = nodes_[checked(t, "seed_grad")];
    if (!n.grad)
      fail("seed_grad", "%s has no gradient (it depends on no parameter or state)", shape(n).text);
    if (g.size() != numel(n))
      fail("seed_grad", "%s holds %zu values; %zu given", shape(n).text, numel(n), g.size());
    for (size_t i = 0; i < g.size(); i++) n.grad[i] += g[i];
  }

  // The chain rule over the nodes made since m, newest first, from the gradients seeded on them.
  void backward_since(const Mark& m) {
    check_mark(m, "backward_since");
    if (record_only_) return;
    for (uint32_t i = uint32_t(nodes_.size()); i-- > m.nodes;) backward_node(nodes_[i]);
  }

  // Drops the nodes made since m and their memory. Every handle of this step becomes invalid
  // (its nodes may be made again under the same positions); parameters and constants stay.
  void rewind(const Mark& m) {
    check_mark(m, "rewind");
    nodes_.resize(m.nodes);
    step_.rewind(m.arena);
    steps_++;
  }

  // Parameters are the persistent nodes with a gradient (constants have none).
  void zero_grad() {
    started_ = true;
    if (flat_.size()) std::memset(flat_.grads(), 0, flat_.size() * sizeof(T));
  }
  // One pass over every parameter (engine/core/optimizer.h), after a check of every gradient: a
  // NaN or Inf anywhere leaves every parameter, moment and the step count as they were, and
  // counts the step in skipped_steps(). Gradients stay as they are either way.
  void sgd_step(double lr) {
    if (counted(gradients_finite())) sgd_pass(flat_.view(), T(lr), flat_.size());
  }
  // torch.optim.AdamW's step (engine/kernels/kernels.h's adamw_update).
  void adamw_step(const AdamWConfig& cfg) {
    if (!counted(gradients_finite())) return;
    flat_.make_moments();
    adamw_pass(flat_.view(), next_adamw_step(cfg), flat_.size());
  }
  bool gradients_finite() const { return finite_pass(flat_.grads(), flat_.size()); }
  // An AdamW step's bytes, moved without its arithmetic: the bound it is measured against.
  void stream_adamw_bytes() {
    started_ = true;
    flat_.make_moments();
    stream_pass(flat_.view(), flat_.size());
  }
  const T* flat_values() const { return flat_.values(); }         // where the parameters begin
  const uint16_t* flat_halves() const { return flat_.halves(); }  // their bf16 copy, or null
  size_t flat_size() const { return flat_.size(); }
  int64_t adamw_steps() const { return adamw_steps_; }      // taken
  int64_t skipped_steps() const { return skipped_steps_; }  // a gradient was NaN or Inf

  // Drop this step's graph and activations; parameters, their gradients and optimizer state stay.
  // Every handle of this step becomes invalid.
  void end_step() {
    nodes_.resize(num_params_);
    step_.reset();
    steps_++;
    thread_pool().step_done();  // whether the pool shares its jobs is timed by steps
    backward_done_ = false;
  }

  // ---- access (handles checked like any operand) ----
  const Node& node(Tensor t) const { return nodes_[checked(t, "node")]; }
  const Node& node_at(size_t i) const {  // by position on the tape, for tests that walk it
    if (i >= nodes_.size()) fail("node_at", "position %zu of %zu nodes", i, nodes_.size());
    return nodes_[i];
  }
  // A node's values, to read, or a parameter's to write. Under bf16 the products read each
  // parameter's bf16 copy: after data() hands out a parameter's values, the copies are made again
  // before the next op runs (refresh_halves), so a write through it reaches them.
  T* data(Tensor t) const {
    const uint32_t i = checked(t, "data");
    halves_stale_ |= precision_ == Precision::bf16 && is_trained_param(i);
    return nodes_[i].data;
  }
  void refresh_halves() {
    if constexpr (std::is_same_v<T, float>)
      if (halves_stale_) flat_.make_half(), halves_stale_ = false;
  }
  // A parameter's gradient copied out; `out` must hold exactly its values.
  void read_grad(Tensor t, std::span<T> out) const {
    const Node& p = nodes_[checked(t, "read_grad")];
    if (out.size() != numel(p))
      fail("read_grad", "parameter %s has %zu values; the output holds %zu", shape(p).text,
           numel(p), out.size());
    if (!p.grad) fail("read_grad", "%s is a constant: it has no gradient", shape(p).text);
    std::copy(p.grad, p.grad + numel(p), out.begin());
  }
  T* grad(Tensor t) const { return nodes_[checked(t, "grad")].grad; }
  int32_t rows(Tensor t) const { return nodes_[checked(t, "rows")].rows; }
  int32_t cols(Tensor t) const { return nodes_[checked(t, "cols")].cols; }
  size_t num_params() const { return num_params_; }
  uint32_t serial() const { return serial_; }     // the graph field of this graph's handles
  uint32_t step_count() const { return steps_; }  // the step field of this step's handles
  // Every index in range, checked on every step (the compiled mode's replay calls these too).
  static void check_embedding_indices(const Node& t, IndexSpan idx) {
    if (idx.size < 1 || !idx.data)
      fail("embedding", "table %s, %d indices: need at least one index", shape(t).text, idx.size);
    for (int32_t i = 0; i < idx.size; i++)
      if (idx.data[i] < 0 || idx.data[i] >= t.rows)
        fail("embedding", "table %s, index %d at position %d: valid indices are 0 to %d",
             shape(t).text, idx.data[i], i, t.rows - 1);
  }
  // op: cross_entropy (of logits) or nll (of log-probabilities, "logp").
  static void check_targets(const Node& a, IndexSpan targets, const char* op) {
    const char* of = std::string_view(op) == "nll" ? "logp" : "logits";
    if (targets.size != a.rows || !targets.data)
      fail(op, "%s %s, %d targets: need one target per row", of, shape(a).text, targets.size);
    for (int32_t r = 0; r < a.rows; r++)
      if (targets.data[r] < 0 || targets.data[r] >= a.cols)
        fail(op, "%s %s, target %d at row %d: valid targets are 0 to %d", of, shape(a).text,
             targets.data[r], r, a.cols - 1);
  }

  // Node n's application of its op, every pointer and shape filled from the tape, no scratch.
  OpArgs<T> args_of(const Node& n) const {
    OpArgs<T> a;
    a.out = n.data, a.dout = n.grad, a.aux = n.aux, a.rows = n.rows, a.cols = n.cols;
    a.index = n.index;
    for (int k = 0; k < 3; k++) {
      a.arg[k] = n.arg[k];
      if (k >= tensor_op_operands(n.op)) continue;
      const Node& x = nodes_[n.in[k]];
      a.in[k] = x.data, a.din[k] = x.grad, a.in_rows[k] = x.rows, a.in_cols[k] = x.cols;
    }
    if (precision_ == Precision::bf16) a.precision = Precision::bf16;
    if (precision_ == Precision::bf16 && runs_bf16(n.op)) {
      for (int k = 0; k < 2; k++)  // a trained parameter's bf16 copy (a view of one is not)
        if (is_trained_param(n.in[k]))
          a.half[k] = flat_.halves() + param_offsets_[n.in[k]], a.half_given |= 1 << k;
    }
    return a;
  }
  size_t num_nodes() const { return nodes_.size(); }

  // Mixed precision (engine/core/ops_bf16.h): under bf16 the products take bfloat16 operands and
  // every parameter keeps a bf16 copy, made from here on and rewritten by each optimizer step.
  // Once, before the first step; float32 graphs only.
  void set_precision(Precision p) {
    if (p == precision_) return;
    if (started_)
      fail("set_precision", "%s after the first step began: set the precision before it",
           precision_name(p));
    if constexpr (!std::is_same_v<T, float>) {
      fail("set_precision", "%s in a graph of doubles: mixed precision is for float32 graphs",
           precision_name(p));
    } else {
      if (p != Precision::bf16)
        fail("set_precision", "back to fp32 after bf16: a graph's precision is set once");
      precision_ = p;
      flat_.make_half();
    }
  }
  Precision precision() const { return precision_; }
  const OpRuleTable<T>& rules() const { return op_rules_for<T>(precision_); }
  size_t arena_bytes() const { return params_.peak_bytes() + step_.peak_bytes() + flat_.bytes(); }
  size_t step_arena_blocks() const { return step_.num_blocks(); }

 private:
  static size_t numel(const Node& n) { return size_t(n.rows) * n.cols; }
  bool is_trained_param(uint32_t i) const {
    return i < param_offsets_.size() && param_offsets_[i] != SIZE_MAX;
  }

  static uint32_t next_serial() {  // 0 is never a graph's serial: it marks an empty handle
    static std::atomic<uint32_t> serial{0};
    return ++serial;
  }

  struct ShapeText {
    char text[32];
  };
  static ShapeText shape(const Node& n) {
    ShapeText s;
    std::snprintf(s.text, sizeof s.text, "(%d, %d)", n.rows, n.cols);
    return s;
  }

  [[noreturn]] __attribute__((format(printf, 2, 3))) static void fail(const char* op,
                                                                      const char* format, ...) {
    char where[64];
    std::snprintf(where, sizeof where, "bp::TensorGraph::%s", op);
    va_list args;
    va_start(args, format);
    engine_vfail(where, format, args);
  }

  // The position of t's node, after checking that t is a handle of this graph and of this step.
  uint32_t checked(Tensor t, const char* op) const {
    if (t.graph != serial_)
      fail(op, t.graph == 0 ? "an operand is an empty Tensor handle (default-constructed)"
                            : "an operand belongs to another TensorGraph");
    if (t.id >= nodes_.size() || (t.id >= num_params_ && t.step != steps_))
      fail(op,
           "an operand was made before the last end_step() or rewind(); only parameters and "
           "constants outlive them");
    return t.id;
  }
  // A copy: the reference would not survive the push of the op's own node.
  Node operand(Tensor t, const char* op) const { return nodes_[checked(t, op)]; }

  void check_mark(const Mark& m, const char* op) const {
    if (m.step != steps_ || m.nodes < num_params_ || m.nodes > nodes_.size())
      fail(op, "the mark (node %u of step %u) is not of this step (step %u, %zu nodes)", m.nodes,
           m.step, steps_, nodes_.size());
  }

  static void check_leaf_shape(const char* what, int32_t rows, int32_t cols, size_t values) {
    if (rows < 1 || cols < 1)
      fail(what, "shape (%d, %d): rows and cols must each be at least 1", rows, cols);
    if (values != size_t(rows) * cols)
      fail(what, "shape (%d, %d) holds %zu values; %zu given", rows, cols, size_t(rows) * cols,
           values);
  }
  Tensor persistent_leaf(const char* what, int32_t rows, int32_t cols, std::span<const T> values,
                         bool with_grad) {
    if (nodes_.size() != num_params_)
      fail(what, "called after %zu ops of this step; create parameters and constants before any op",
           nodes_.size() - num_params_);
    check_leaf_shape(what, rows, cols, values.size());
    if (with_grad && started_)
      fail(what,
           "(%d, %d) after the first step began: parameters come before it (they are packed into "
           "flat buffers then)",
           rows, cols);
    if (!with_grad) {
      Node& n = push(TensorOp::leaf, rows, cols, params_, false);
      std::copy(values.begin(), values.end(), n.data);
    } else {
      Node n{};
      n.rows = rows, n.cols = cols, n.op = TensorOp::leaf, n.needs_grad = true;
      nodes_.push_back(n);
      param_offsets_.resize(nodes_.size(), SIZE_MAX);
      param_offsets_.back() = flat_.add(values);
      point_params_at_flat();
    }
    num_params_++;
    return last();
  }
  // Whether a step goes ahead; one that does not is counted.
  bool counted(bool finite) {
    started_ = true;
    skipped_steps_ += !finite;
    return finite;
  }
  // Every parameter's pointers into the flat buffers, which move as parameters are added.
  void point_params_at_flat() {
    for (size_t i = 0; i < param_offsets_.size(); i++)
      if (param_offsets_[i] != SIZE_MAX) {
        nodes_[i].data = flat_.values() + param_offsets_[i];
        nodes_[i].grad = flat_.grads() + param_offsets_[i];
      }
  }

  Node& push(TensorOp op, int32_t rows, int32_t cols, Arena<T>& arena, bool with_grad) {
    Node n{};
    n.op = op, n.rows = rows, n.cols = cols, n.needs_grad = with_grad;
    if (&arena == &step_) started_ = true;
    if (!record_only_ || &arena == &params_) {
      n.data = arena.alloc(size_t(rows) * cols);
      n.grad = with_grad ? arena.alloc(size_t(rows) * cols) : nullptr;
    }
    nodes_.push_back(n);
    return nodes_.back();
  }
  // An op's node: activations and their gradients from the step arena. The gradient is only
  // allocated if an operand needs one, so nothing flows back into inputs.
  Node& make(TensorOp op, int32_t rows, int32_t cols, std::initializer_list<uint32_t> in) {
    bool needs_grad = false;
    for (uint32_t id : in) needs_grad |= nodes_[id].needs_grad;
    Node& n = push(op, rows, cols, step_, needs_grad);
    int k = 0;
    for (uint32_t id : in) n.in[k++] = id;
    return n;
  }
  Tensor last() const { return Tensor{uint32_t(nodes_.size() - 1), serial_, steps_}; }

  Tensor binary(TensorOp op, Tensor x, Tensor y) {
    const char* name = tensor_op_names[int(op)];
    const Node a = operand(x, name), b = operand(y, name);
    const bool row = b.rows == 1 && a.rows != 1;
    if (a.cols != b.cols || (!row && a.rows != b.rows))
      fail(name, "x %s, y %s: y must have x's shape or be one row (1, %d)", shape(a).text,
           shape(b).text, a.cols);
    make(op, a.rows, a.cols, {x.id, y.id});
    return forward_last();
  }

  Tensor unary(TensorOp op, Tensor x) {
    const Node in = operand(x, tensor_op_names[int(op)]);
    make(op, in.rows, in.cols, {x.id});
    return forward_last();
  }

  Tensor per_row(TensorOp op, Tensor x) {
    const Node a = operand(x, tensor_op_names[int(op)]);
    make(op, a.rows, 1, {x.id});
    return forward_last();
  }

  Tensor reduce(TensorOp op, Tensor x) {
    operand(x, tensor_op_names[int(op)]);
    make(op, 1, 1, {x.id});
    return forward_last();
  }

  // The last node's forward, by its rule (engine/core/ops.h): its aux and scratch from the step
  // arena.
  Tensor forward_last() {
    Node& n = nodes_.back();
    if (record_only_) return last();
    refresh_halves();
    const OpRule<T>& rule = rules()[int(n.op)];
    OpArgs<T> a = args_of(n);
    if (const size_t aux = rule.aux_elems(a)) n.aux = a.aux = step_.alloc(aux);
    if (const size_t scratch = rule.forward_scratch(a))
      a.scratch = step_.alloc_uninitialized(scratch);
    rule.forward(a);
    return last();
  }

  // final_: each parameter with the node after whose backward its gradient is final (the
  // smallest node that adds into it, through a view too; UINT32_MAX: none does), latest first.
  void schedule_final_gradients(uint32_t root) {
    final_.clear();
    const T *begin = flat_.grads(), *end = begin + flat_.size();
    for (uint32_t p = 0; p < num_params_; p++)  // constants made after the last parameter have
      if (param_offset(p) != SIZE_MAX) final_.push_back({p, UINT32_MAX});  // no offset entry
    for (uint32_t i = num_params_; i <= root; i++) {
      const Node& n = nodes_[i];
      if (!n.grad || !rules()[int(n.op)].backward) continue;
      for (int k = 0; k < tensor_op_operands(n.op); k++) {
        const T* g = nodes_[n.in[k]].grad;
        if (!g || g < begin || g >= end) continue;
        const size_t at = size_t(g - begin);  // the parameter whose range holds it
        auto it = std::upper_bound(final_.begin(), final_.end(), at, [&](size_t o, const Final& f) {
          return o < param_offsets_[f.param];
        });
        Final& f = *(it - 1);
        if (f.after == UINT32_MAX) f.after = i;  // nodes ascend: the first seen is walked last
      }
    }
    std::stable_sort(final_.begin(), final_.end(),  // UINT32_MAX, the largest, comes first
                     [](const Final& a, const Final& b) { return a.after > b.after; });
  }

  // The chain rule for one node: reads its gradient, adds into its operands' gradients.
  void backward_node(const Node& n) {
    const OpRule<T>& rule = rules()[int(n.op)];
    if (!n.grad || !rule.backward) return;
    OpArgs<T> a = args_of(n);
    if (const size_t scratch = rule.backward_scratch(a))
      a.scratch = step_.alloc_uninitialized(scratch);
    rule.backward(a);
  }

  std::vector<Node> nodes_;  // parameters first ([0, num_params_)), then the current step's ops
  uint32_t num_params_ = 0;
  uint32_t serial_;     // this graph's identity in its handles
  uint32_t steps_ = 0;  // end_step() and rewind() count: this step's identity in its handles
  bool backward_done_ = false;
  bool record_only_;
  Arena<T> params_, step_;
  FlatParams<T> flat_;                 // trained parameters, gradients, optimizer state
  std::vector<size_t> param_offsets_;  // persistent node -> its offset in flat_ (SIZE_MAX: none)
  bool started_ = false;               // the first step began: no more parameters
  mutable bool halves_stale_ = false;  // data() gave out a parameter's values under bf16
  struct Final {
    uint32_t param, after;
  };
  std::vector<Final> final_;  // data parallel: see schedule_final_gradients
  std::function<void(size_t, size_t)> gradient_final_;
  Precision precision_ = Precision::fp32;
  int64_t adamw_steps_ = 0, skipped_steps_ = 0;
};

}  // namespace bp
