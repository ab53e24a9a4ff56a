// engine/tensor.h: dense tensor reverse-mode autodiff on the same plan as engine/scalar.h.
//
// Every tensor is a row-major matrix (rows, cols); sequences are (B*T, C) and a view changes the
// shape without copying. Building ops records nodes on a tape and computes forward at once;
// `backward` walks the tape once in reverse creation order. Memory comes from two arenas: one for
// parameters (kept), one for the step's activations and their gradients (reset after each step,
// consolidated to one block, so steady-state steps allocate nothing). Each op's forward is its
// method below; all derivative rules are one table, the cases of backward_node, in the same order
// as TensorOp. Backward accumulates (+=) into gradients; only zero_grad zeroes.
//
// Not here: threads (single-threaded by design), broadcasting beyond "one row against every row",
// more than two dimensions, a static-graph mode. The tape is shaped for one: every node holds its
// operands, op arguments and arena pointers, so replaying a captured step would need only a
// forward pass over the same nodes with the shapes already planned (not built).
// T is float for benchmarks and double for the finite-difference tests.
//
//   bp::TensorGraph<float> g;
//   auto W = g.param(4, 3, init), x = g.input(2, 3, data);        // (OC, C), (N, C)
//   auto loss = g.cross_entropy(g.matmul(x, W, true), targets);    // x @ W^T: (N, OC)
//   g.backward(loss); g.adamw_step(cfg); g.end_step();
//
// Tests: engine/tensor_test.cc (every op against central finite differences in double).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <iterator>
#include <span>
#include <type_traits>
#include <vector>

namespace bp {

enum class TensorOp : uint8_t {
  leaf, view, matmul, linear, add, mul, tanh, relu, gelu, exp, log, embedding, sum, mean,
  layernorm, softmax, attention, cross_entropy, count
};
inline constexpr const char* tensor_op_names[] = {
    "leaf", "view", "matmul", "linear", "add", "mul", "tanh", "relu", "gelu", "exp", "log",
    "embedding", "sum", "mean", "layernorm", "softmax", "attention", "cross_entropy"};
static_assert(std::size(tensor_op_names) == size_t(TensorOp::count), "name every TensorOp");

// exp and tanh that GCC vectorises (libm's are scalar calls): used for float; double keeps libm,
// so the finite-difference tests (in double) check the derivative code against libm's values.
// exp: x = n ln2 + r with |r| <= ln2/2 (Cody-Waite: ln2 split in a part exact in float and a
// remainder), exp(r) by its Taylor series to r^7 (truncation < 6e-9 relative, under float's
// epsilon), times 2^n built in the exponent bits.
inline float exp_f32(float x) {
  x = std::min(std::max(x, -87.3f), 88.3f);  // 2^n stays a normal float
  const float n = std::floor(x * 1.44269504f + 0.5f);
  const float r = (x - n * 0.693359375f) - n * -2.12194440e-4f;
  const float p =
      1 + r * (1 + r * (0.5f + r * (1 / 6.f + r * (1 / 24.f + r * (1 / 120.f + r * (1 / 720.f +
                                                                                  r / 5040.f))))));
  const int32_t bits = (int32_t(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}
// tanh(x) = 1 - 2 / (exp(2x) + 1), odd; near 0 that subtraction cancels, so |x| < 1/16 uses the
// series x - x^3/3 + 2x^5/15 - 17x^7/315 (next term < 1e-11 relative there).
inline float tanh_f32(float x) {
  const float ax = std::fabs(x);
  const float big = 1 - 2 / (exp_f32(2 * ax) + 1);
  const float x2 = x * x;
  const float small = ax * (1 + x2 * (-1 / 3.f + x2 * (2 / 15.f + x2 * (-17 / 315.f))));
  const float t = ax < 0.0625f ? small : big;
  return x < 0 ? -t : t;
}
template <class T>
inline T exp_t(T x) {
  if constexpr (std::is_same_v<T, float>) return exp_f32(x);
  else return std::exp(x);
}
template <class T>
inline T tanh_t(T x) {
  if constexpr (std::is_same_v<T, float>) return tanh_f32(x);
  else return std::tanh(x);
}

// A bump allocator over blocks that never move, so pointers into it stay valid while a step
// grows it. reset() frees everything at once and, if the step needed several blocks, replaces
// them with one block of their total size: from the second step on, one block, no allocation.
template <class T>
class Arena {
 public:
  Arena() = default;
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;
  ~Arena() {
    for (Block& b : blocks_) std::free(b.data);
  }

  // n zeroed elements, 64-byte aligned (whole cache lines, and vector loads never split).
  T* alloc(size_t n) {
    T* p = alloc_uninitialized(n);
    std::memset(p, 0, n * sizeof(T));
    return p;
  }
  // Scratch that the caller overwrites entirely (transposed copies for matmul).
  T* alloc_uninitialized(size_t n) {
    n = (n + kAlign - 1) / kAlign * kAlign;
    if (blocks_.empty() || blocks_.back().used + n > blocks_.back().capacity)
      add_block(std::max(n, capacity() ? capacity() : size_t(1) << 16));
    Block& b = blocks_.back();
    T* p = b.data + b.used;
    b.used += n;
    peak_ = std::max(peak_, used());
    return p;
  }
  void reset() {
    if (blocks_.size() > 1) {
      const size_t total = capacity();
      for (Block& b : blocks_) std::free(b.data);
      blocks_.clear();
      add_block(total);
    }
    if (!blocks_.empty()) blocks_.back().used = 0;
  }
  size_t capacity() const {
    size_t c = 0;
    for (const Block& b : blocks_) c += b.capacity;
    return c;
  }
  size_t used() const {
    size_t u = 0;
    for (const Block& b : blocks_) u += b.used;
    return u;
  }
  size_t peak_bytes() const { return peak_ * sizeof(T); }
  size_t num_blocks() const { return blocks_.size(); }

 private:
  static constexpr size_t kAlign = 64 / sizeof(T);
  struct Block {
    T* data;
    size_t capacity, used;
  };
  void add_block(size_t n) {
    void* p = std::aligned_alloc(64, (n * sizeof(T) + 63) / 64 * 64);
    if (!p) {
      std::fprintf(stderr, "bp::Arena: out of memory allocating %zu bytes\n", n * sizeof(T));
      std::abort();
    }
    blocks_.push_back({static_cast<T*>(p), n, 0});
  }
  std::vector<Block> blocks_;
  size_t peak_ = 0;
};

struct Tensor {
  uint32_t id = 0;
};

// attention keeps one head's row in a stack array; the models here use 4 and 32.
inline constexpr int32_t kMaxHeadSize = 256;

// Indices (token ids, targets) live outside the graph: the caller owns them for the step.
struct IndexSpan {
  const int32_t* data = nullptr;
  int32_t size = 0;
};

struct AdamWConfig {  // torch.optim.AdamW's defaults, so both backends run the same update
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.01;
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
    int32_t arg[3];  // op-specific: matmul transpose flag; attention B, T, H
    IndexSpan index;
    TensorOp op;
  };

  explicit TensorGraph(size_t reserve_nodes = 256) { nodes_.reserve(reserve_nodes); }
  TensorGraph(const TensorGraph&) = delete;
  TensorGraph& operator=(const TensorGraph&) = delete;

  // ---- leaves ----

  // A trainable (rows, cols) parameter initialised from `init` (row-major). Parameters come
  // before any step's graph, so that end_step() keeps them by truncating the tape.
  Tensor param(int32_t rows, int32_t cols, std::span<const T> init) {
    return persistent_leaf("param", rows, cols, init, true);
  }
  // A constant that lives as long as the parameters (a dataset prepared at setup); no gradient.
  Tensor constant(int32_t rows, int32_t cols, std::span<const T> values) {
    return persistent_leaf("constant", rows, cols, values, false);
  }
  // A constant (rows, cols) input of this step only; no gradient.
  Tensor input(int32_t rows, int32_t cols, std::span<const T> values) {
    if (values.size() != size_t(rows) * cols) fail("input", "wrong number of values");
    Node& n = push(TensorOp::leaf, rows, cols, step_, false);
    std::copy(values.begin(), values.end(), n.data);
    return Tensor{uint32_t(nodes_.size() - 1)};
  }

  // ---- ops: each builds a node and computes its forward; backward is in backward_node ----

  // Same data, new shape (rows*cols must match); the gradient buffer is shared too, so
  // backward has nothing to do.
  Tensor view(Tensor x, int32_t rows, int32_t cols) {
    const Node& a = nodes_[x.id];
    if (size_t(rows) * cols != size_t(a.rows) * a.cols) fail("view", "element counts differ");
    Node n = a;
    n.op = TensorOp::view, n.rows = rows, n.cols = cols, n.in[0] = x.id;
    nodes_.push_back(n);
    return Tensor{uint32_t(nodes_.size() - 1)};
  }

  // a (M, K) times b (K, N), or times b^T when transpose_b and b is (N, K) (nn.Linear's layout).
  Tensor matmul(Tensor a, Tensor b, bool transpose_b) {
    const int32_t M = rows(a), K = cols(a);
    const int32_t N = transpose_b ? rows(b) : cols(b);
    if ((transpose_b ? cols(b) : rows(b)) != K) fail("matmul", "inner dimensions differ");
    Node& n = make(TensorOp::matmul, M, N, {a.id, b.id});
    n.arg[0] = transpose_b;
    matmul_into(n.data, data(a), false, data(b), transpose_b, M, N, K);
    return last();
  }

  // x (N, C) @ w^T + b, w (OC, C), b (1, OC): torch.nn.Linear, fused. matmul then add would
  // store the product, its gradient and a second pass over both; here the output starts as the
  // bias rows and the gemm accumulates onto them (measured on mini_gpt: README, "Kernels").
  // With relu, the ReLU is applied in place: relu(linear(...)) without storing the pre-activation
  // and its gradient (on mini_gpt batch:64, 2.4 MB of 18.5 MB of process peak).
  Tensor linear(Tensor x, Tensor w, Tensor b, bool relu = false) {
    const int32_t N = rows(x), C = cols(x), OC = rows(w);
    if (cols(w) != C || rows(b) != 1 || cols(b) != OC)
      fail("linear", "shapes must be x (N, C), w (OC, C), b (1, OC)");
    Node& n = make(TensorOp::linear, N, OC, {x.id, w.id, b.id});
    n.arg[0] = relu;
    for (int32_t r = 0; r < N; r++) std::memcpy(n.data + size_t(r) * OC, data(b), OC * sizeof(T));
    matmul_into(n.data, data(x), false, data(w), true, N, OC, C);
    if (relu) {
      T* out = n.data;
#pragma omp simd
      for (size_t i = 0; i < numel(n); i++) out[i] = out[i] > 0 ? out[i] : T(0);
    }
    return last();
  }

  // x + y, where y has x's shape or is one row (cols) added to every row of x (a bias).
  Tensor add(Tensor x, Tensor y) { return binary(TensorOp::add, x, y); }
  // x * y elementwise, with the same broadcasting as add.
  Tensor mul(Tensor x, Tensor y) { return binary(TensorOp::mul, x, y); }

  Tensor tanh(Tensor x) { return unary(TensorOp::tanh, x); }
  Tensor relu(Tensor x) { return unary(TensorOp::relu, x); }
  Tensor gelu(Tensor x) { return unary(TensorOp::gelu, x); }  // exact (erf) form, torch's default
  Tensor exp(Tensor x) { return unary(TensorOp::exp, x); }
  Tensor log(Tensor x) { return unary(TensorOp::log, x); }

  // Rows of table (V, C) picked by idx (N): (N, C).
  Tensor embedding(Tensor table, IndexSpan idx) {
    const int32_t V = rows(table), C = cols(table);
    for (int32_t i = 0; i < idx.size; i++)
      if (idx.data[i] < 0 || idx.data[i] >= V) fail("embedding", "index out of range");
    Node& n = make(TensorOp::embedding, idx.size, C, {table.id});
    n.index = idx;
    const T* t = data(table);
    for (int32_t i = 0; i < idx.size; i++)
      std::memcpy(n.data + size_t(i) * C, t + size_t(idx.data[i]) * C, C * sizeof(T));
    return last();
  }

  Tensor sum(Tensor x) { return reduce(TensorOp::sum, x); }
  Tensor mean(Tensor x) { return reduce(TensorOp::mean, x); }

  // Per row of x (N, C): normalise to zero mean and unit variance (biased, eps 1e-5 as in
  // torch.nn.LayerNorm), then scale by gamma (C) and shift by beta (C).
  Tensor layernorm(Tensor x, Tensor gamma, Tensor beta) {
    const int32_t N = rows(x), C = cols(x);
    Node& n = make(TensorOp::layernorm, N, C, {x.id, gamma.id, beta.id});
    n.aux = step_.alloc(2 * size_t(N));  // (N) means, then (N) reciprocal std devs
    const T *in = data(x), *g = data(gamma), *b = data(beta);
    for (int32_t r = 0; r < N; r++) {
      const T* row = in + size_t(r) * C;
      T m = 0, v = 0;
      for (int32_t c = 0; c < C; c++) m += row[c];
      m /= C;
      for (int32_t c = 0; c < C; c++) v += (row[c] - m) * (row[c] - m);
      const T rstd = T(1) / std::sqrt(v / C + T(1e-5));
      T* out = n.data + size_t(r) * C;
      for (int32_t c = 0; c < C; c++) out[c] = (row[c] - m) * rstd * g[c] + b[c];
      n.aux[r] = m, n.aux[N + r] = rstd;
    }
    return last();
  }

  // Softmax of every row.
  Tensor softmax(Tensor x) {
    Node& n = make(TensorOp::softmax, rows(x), cols(x), {x.id});
    for (int32_t r = 0; r < n.rows; r++)
      softmax_row(n.data + size_t(r) * n.cols, data(x) + size_t(r) * n.cols, n.cols);
    return last();
  }

  // Causal multi-head self-attention, fused. qkv is (B*T, 3C): queries, keys, values side by
  // side, each split into H heads of C/H. Output (B*T, C): for each head and position t, the
  // average of v over positions s <= t weighted by softmax(q_t . k_s / sqrt(C/H)).
  // Vaswani et al. 2017, eq. 1; the causal mask as in GPT (Radford et al. 2018).
  Tensor attention(Tensor qkv, int32_t B, int32_t T_, int32_t H) {
    const int32_t C3 = cols(qkv), C = C3 / 3;
    if (rows(qkv) != B * T_ || C3 != 3 * C || C % H) fail("attention", "shape is not (B*T, 3C)");
    Node& n = make(TensorOp::attention, B * T_, C, {qkv.id});
    n.arg[0] = B, n.arg[1] = T_, n.arg[2] = H;
    n.aux = step_.alloc(size_t(B) * H * T_ * T_);  // (B, H, T, T) probabilities
    const int32_t hs = C / H;
    if (hs > kMaxHeadSize) fail("attention", "head size above kMaxHeadSize");
    switch (hs) {  // common head sizes compiled as constants: their loops unroll into registers
      case 4: attention_forward<4>(n, data(qkv), B, T_, H, hs); break;
      case 8: attention_forward<8>(n, data(qkv), B, T_, H, hs); break;
      case 16: attention_forward<16>(n, data(qkv), B, T_, H, hs); break;
      case 32: attention_forward<32>(n, data(qkv), B, T_, H, hs); break;
      case 64: attention_forward<64>(n, data(qkv), B, T_, H, hs); break;
      default: attention_forward<0>(n, data(qkv), B, T_, H, hs);
    }
    return last();
  }

  // Mean over rows of -log softmax(logits)[target]: logits (N, V), targets (N). Output (1, 1).
  Tensor cross_entropy(Tensor logits, IndexSpan targets) {
    const int32_t N = rows(logits), V = cols(logits);
    if (targets.size != N) fail("cross_entropy", "one target per row");
    Node& n = make(TensorOp::cross_entropy, 1, 1, {logits.id});
    n.index = targets;
    n.aux = step_.alloc(size_t(N) * V);  // (N, V) probabilities
    T loss = 0;
    for (int32_t r = 0; r < N; r++) {
      const int32_t y = targets.data[r];
      if (y < 0 || y >= V) fail("cross_entropy", "target out of range");
      T* p = n.aux + size_t(r) * V;
      softmax_row(p, data(logits) + size_t(r) * V, V);
      loss -= std::log(p[y]);
    }
    n.data[0] = loss / N;
    return last();
  }

  // ---- backward, optimizers, step boundaries ----

  // d(root)/d(everything) into the gradient buffers; root must be (1, 1).
  void backward(Tensor root) {
    Node& r = nodes_[root.id];
    if (r.rows != 1 || r.cols != 1 || !r.grad) fail("backward", "root must be a (1, 1) result");
    r.grad[0] += T(1);
    for (uint32_t i = root.id + 1; i-- > num_params_;) backward_node(nodes_[i]);
  }

  // Parameters are the persistent nodes with a gradient (constants have none).
  void zero_grad() {
    for (uint32_t i = 0; i < num_params_; i++)
      if (nodes_[i].grad) std::memset(nodes_[i].grad, 0, numel(nodes_[i]) * sizeof(T));
  }
  void sgd_step(double lr) {
    for (uint32_t i = 0; i < num_params_; i++) {
      Node& p = nodes_[i];
      if (!p.grad) continue;
      for (size_t j = 0, n = numel(p); j < n; j++) p.data[j] -= T(lr) * p.grad[j];
    }
  }
  // Loshchilov & Hutter 2019 (decoupled weight decay), with torch.optim.AdamW's bias correction
  // and eps placement, so that both backends take the same step from the same gradients.
  void adamw_step(const AdamWConfig& cfg) {
    if (adam_m_.empty())
      for (uint32_t i = 0; i < num_params_; i++) {
        const bool trained = nodes_[i].grad != nullptr;
        adam_m_.push_back(trained ? params_.alloc(numel(nodes_[i])) : nullptr);
        adam_v_.push_back(trained ? params_.alloc(numel(nodes_[i])) : nullptr);
      }
    adam_t_++;
    const double c1 = 1 - std::pow(cfg.beta1, adam_t_), c2 = 1 - std::pow(cfg.beta2, adam_t_);
    const T b1 = T(cfg.beta1), b2 = T(cfg.beta2), eps = T(cfg.eps);
    const T decay = T(1 - cfg.lr * cfg.weight_decay), step = T(cfg.lr / c1);
    const T rc2 = T(1 / std::sqrt(c2));
    for (uint32_t i = 0; i < num_params_; i++) {
      Node& p = nodes_[i];
      if (!p.grad) continue;
      T *m = adam_m_[i], *v = adam_v_[i];
#pragma omp simd
      for (size_t j = 0; j < numel(p); j++) {
        const T g = p.grad[j];
        m[j] = b1 * m[j] + (1 - b1) * g;
        v[j] = b2 * v[j] + (1 - b2) * g * g;
        p.data[j] = p.data[j] * decay - step * m[j] / (std::sqrt(v[j]) * rc2 + eps);
      }
    }
  }
  // Drop this step's graph and activations; parameters, their gradients and optimizer state stay.
  void end_step() {
    nodes_.resize(num_params_);
    step_.reset();
  }

  // ---- access ----
  const Node& node(Tensor t) const { return nodes_[t.id]; }
  T* data(Tensor t) const { return nodes_[t.id].data; }
  T* grad(Tensor t) const { return nodes_[t.id].grad; }
  int32_t rows(Tensor t) const { return nodes_[t.id].rows; }
  int32_t cols(Tensor t) const { return nodes_[t.id].cols; }
  size_t num_params() const { return num_params_; }
  size_t num_nodes() const { return nodes_.size(); }
  size_t arena_bytes() const { return params_.peak_bytes() + step_.peak_bytes(); }
  size_t step_arena_blocks() const { return step_.num_blocks(); }

 private:
  static size_t numel(const Node& n) { return size_t(n.rows) * n.cols; }

  [[noreturn]] static void fail(const char* op, const char* what) {
    std::fprintf(stderr, "bp::TensorGraph::%s: %s\n", op, what);
    std::abort();
  }

  Tensor persistent_leaf(const char* what, int32_t rows, int32_t cols, std::span<const T> values,
                         bool with_grad) {
    if (nodes_.size() != num_params_) fail(what, "create parameters and constants before any op");
    if (values.size() != size_t(rows) * cols) fail(what, "wrong number of values for the shape");
    Node& n = push(TensorOp::leaf, rows, cols, params_, with_grad);
    std::copy(values.begin(), values.end(), n.data);
    num_params_++;
    return Tensor{uint32_t(nodes_.size() - 1)};
  }

  Node& push(TensorOp op, int32_t rows, int32_t cols, Arena<T>& arena, bool with_grad) {
    Node n{};
    n.op = op, n.rows = rows, n.cols = cols;
    n.data = arena.alloc(size_t(rows) * cols);
    n.grad = with_grad ? arena.alloc(size_t(rows) * cols) : nullptr;
    nodes_.push_back(n);
    return nodes_.back();
  }
  // An op's node: activations and their gradients from the step arena. The gradient is only
  // allocated if an operand needs one, so nothing flows back into inputs.
  Node& make(TensorOp op, int32_t rows, int32_t cols, std::initializer_list<uint32_t> in) {
    bool needs_grad = false;
    for (uint32_t id : in) needs_grad |= nodes_[id].grad != nullptr;
    Node& n = push(op, rows, cols, step_, needs_grad);
    int k = 0;
    for (uint32_t id : in) n.in[k++] = id;
    return n;
  }
  Tensor last() const { return Tensor{uint32_t(nodes_.size() - 1)}; }

  Tensor binary(TensorOp op, Tensor x, Tensor y) {
    const bool row = rows(y) == 1 && rows(x) != 1;
    if (cols(x) != cols(y) || (!row && rows(x) != rows(y)))
      fail(tensor_op_names[int(op)], "y must have x's shape or be one row of x's width");
    Node& n = make(op, rows(x), cols(x), {x.id, y.id});
    const T *a = data(x), *b = data(y);
    const int32_t C = n.cols;
    for (int32_t r = 0; r < n.rows; r++) {
      const T* br = b + (row ? 0 : size_t(r) * C);
      const T* ar = a + size_t(r) * C;
      T* out = n.data + size_t(r) * C;
      if (op == TensorOp::add)
        for (int32_t c = 0; c < C; c++) out[c] = ar[c] + br[c];
      else
        for (int32_t c = 0; c < C; c++) out[c] = ar[c] * br[c];
    }
    return last();
  }

  Tensor unary(TensorOp op, Tensor x) {
    Node& n = make(op, rows(x), cols(x), {x.id});
    const T* a = data(x);
    T* out = n.data;
    const size_t count = numel(n);
    switch (op) {  // outside the loops, so that each loop vectorises
      case TensorOp::tanh:
#pragma omp simd
        for (size_t i = 0; i < count; i++) out[i] = tanh_t(a[i]);
        break;
      case TensorOp::relu:
#pragma omp simd
        for (size_t i = 0; i < count; i++) out[i] = a[i] > 0 ? a[i] : T(0);
        break;
      case TensorOp::gelu:
        for (size_t i = 0; i < count; i++) out[i] = T(0.5) * a[i] * (1 + std::erf(a[i] * T(M_SQRT1_2)));
        break;
      case TensorOp::exp:
#pragma omp simd
        for (size_t i = 0; i < count; i++) out[i] = exp_t(a[i]);
        break;
      case TensorOp::log:
        for (size_t i = 0; i < count; i++) out[i] = std::log(a[i]);
        break;
      default: fail("unary", "not a unary op");
    }
    return last();
  }

  Tensor reduce(TensorOp op, Tensor x) {
    Node& n = make(op, 1, 1, {x.id});
    T s = 0;
    const size_t count = numel(nodes_[x.id]);
    for (size_t i = 0; i < count; i++) s += data(x)[i];
    n.data[0] = op == TensorOp::mean ? s / T(count) : s;
    return last();
  }

  static void softmax_row(T* out, const T* in, int32_t n) {
    T maxv = in[0], total = 0;
    for (int32_t i = 1; i < n; i++) maxv = std::max(maxv, in[i]);
#pragma omp simd reduction(+ : total)
    for (int32_t i = 0; i < n; i++) total += (out[i] = exp_t(in[i] - maxv));
    const T inv = T(1) / total;
    for (int32_t i = 0; i < n; i++) out[i] *= inv;
  }

  // c (M, N) += op(a) op(b), op(a) (M, K), op(b) (K, N); trans_a means a is stored (K, M),
  // trans_b that b is stored (N, K). Everything goes to gemm below. (OpenBLAS's sgemm was tried
  // for large products and lost on every workload here: README, "Kernels".)
  void matmul_into(T* c, const T* a, bool trans_a, const T* b, bool trans_b, int32_t M, int32_t N,
                   int32_t K) {
    // op(a)(i, k) is a[i * rs + k * cs]: a transposed a is only other strides, never a copy.
    const int32_t rs = trans_a ? 1 : K, cs = trans_a ? M : 1;
    if (!trans_b) {
      gemm(c, a, rs, cs, b, M, K, N);
    } else if (size_t(N) * K <= size_t(M) * (K + N)) {  // copy b transposed ...
      T* bt = step_.alloc_uninitialized(size_t(K) * N);  // (K, N)
      transpose(bt, b, N, K);
      gemm(c, a, rs, cs, bt, M, K, N);
    } else {  // ... or work on c^T (N, M) += b (N, K) @ op(a)^T (K, M), the smaller copies
      const T* a_t = a;  // op(a)^T, row-major (K, M)
      if (!trans_a) {
        T* at = step_.alloc_uninitialized(size_t(K) * M);  // (K, M)
        transpose(at, a, M, K);
        a_t = at;
      }
      T* c_t = step_.alloc_uninitialized(size_t(N) * M);  // (N, M)
      transpose(c_t, c, M, N);
      gemm(c_t, b, K, 1, a_t, N, K, M);
      transpose(c, c_t, N, M);
    }
  }

  // c (M, N) += a (M, K) @ b (K, N), b and c row-major and contiguous. The output is computed in
  // tiles of MR rows x NR columns held in registers across the whole k loop: per k, NR/16 vector
  // loads of b, MR broadcasts of a, MR*NR/16 fused multiply-adds (AVX-512). Columns go by panels
  // of NR so a (K x NR) panel of b stays in L1/L2 while every row of a passes over it.
  template <int MR, int NR>
  static void gemm_tile(T* c, const T* a, int32_t rs, int32_t cs, const T* b, int32_t K,
                        int32_t N) {
    T acc[MR][NR];
    for (int i = 0; i < MR; i++)
      for (int j = 0; j < NR; j++) acc[i][j] = c[size_t(i) * N + j];
    for (int32_t k = 0; k < K; k++) {
      const T* bk = b + size_t(k) * N;
      for (int i = 0; i < MR; i++) {
        const T av = a[size_t(i) * rs + size_t(k) * cs];
#pragma omp simd
        for (int j = 0; j < NR; j++) acc[i][j] += av * bk[j];
      }
    }
    for (int i = 0; i < MR; i++)
      for (int j = 0; j < NR; j++) c[size_t(i) * N + j] = acc[i][j];
  }
  // MR = 8 rows keep 8 x NR/16 independent accumulator chains in flight (of AVX-512's 32 vector
  // registers), enough to hide the FMA latency even on the 24-wide matrices of mini_gpt.
  template <int NR>
  static void gemm_panel(T* c, const T* a, int32_t rs, int32_t cs, const T* b, int32_t M,
                         int32_t K, int32_t N) {
    int32_t m = 0;
    for (; m + 8 <= M; m += 8) gemm_tile<8, NR>(c + size_t(m) * N, a + size_t(m) * rs, rs, cs, b, K, N);
    for (; m + 4 <= M; m += 4) gemm_tile<4, NR>(c + size_t(m) * N, a + size_t(m) * rs, rs, cs, b, K, N);
    for (; m < M; m++) gemm_tile<1, NR>(c + size_t(m) * N, a + size_t(m) * rs, rs, cs, b, K, N);
  }
  // c (M, N) += op(a) (M, K) @ b (K, N); op(a)(i, k) = a[i * rs + k * cs].
  static void gemm(T* c, const T* a, int32_t rs, int32_t cs, const T* b, int32_t M, int32_t K,
                   int32_t N) {
    int32_t n = 0;
    for (; n + 32 <= N; n += 32) gemm_panel<32>(c + n, a, rs, cs, b + n, M, K, N);
    for (; n + 16 <= N; n += 16) gemm_panel<16>(c + n, a, rs, cs, b + n, M, K, N);
    for (; n + 8 <= N; n += 8) gemm_panel<8>(c + n, a, rs, cs, b + n, M, K, N);
    for (; n < N; n++) gemm_panel<1>(c + n, a, rs, cs, b + n, M, K, N);
  }
  // out (C, R) = in (R, C)^T. Small matrices (all of them in L1) row by row of the output; larger
  // ones in 16 x 16 blocks so that both sides move a cache line at a time.
  static void transpose(T* out, const T* in, int32_t R, int32_t C) {
    if (size_t(R) * C <= 4096) {
      for (int32_t c = 0; c < C; c++)
        for (int32_t r = 0; r < R; r++) out[size_t(c) * R + r] = in[size_t(r) * C + c];
      return;
    }
    constexpr int32_t kB = 16;
    for (int32_t r0 = 0; r0 < R; r0 += kB)
      for (int32_t c0 = 0; c0 < C; c0 += kB) {
        const int32_t r1 = std::min(R, r0 + kB), c1 = std::min(C, c0 + kB);
        for (int32_t r = r0; r < r1; r++)
          for (int32_t c = c0; c < c1; c++) out[size_t(c) * R + r] = in[size_t(r) * C + c];
      }
  }

  // The chain rule for one node: reads its gradient, adds into its operands' gradients.
  void backward_node(Node& n) {
    if (!n.grad) return;
    const T* g = n.grad;
    Node& x = nodes_[n.in[0]];
    const size_t count = numel(n);
    switch (n.op) {
      case TensorOp::leaf:
      case TensorOp::view:  // shares its operand's gradient buffer
        break;
      case TensorOp::matmul: {
        Node& y = nodes_[n.in[1]];
        const int32_t M = n.rows, N = n.cols, K = x.cols;
        const bool tb = n.arg[0];
        if (x.grad) matmul_into(x.grad, g, false, y.data, !tb, M, K, N);  // da += g op(b)^T
        if (y.grad) {
          if (tb) matmul_into(y.grad, g, true, x.data, false, N, K, M);   // db += g^T a
          else matmul_into(y.grad, x.data, true, g, false, K, N, M);      // db += a^T g
        }
        break;
      }
      case TensorOp::linear: {  // dx += g w; dw += g^T x; db += the column sums of g
        Node &w = nodes_[n.in[1]], &b = nodes_[n.in[2]];
        const int32_t N = n.rows, OC = n.cols, C = x.cols;
        if (n.arg[0])  // relu: pass the gradient where the output is positive (in place: this
          for (size_t i = 0; i < numel(n); i++)  // node's gradient has no other reader)
            n.grad[i] = n.data[i] > 0 ? n.grad[i] : T(0);
        if (x.grad) matmul_into(x.grad, g, false, w.data, false, N, C, OC);
        if (w.grad) matmul_into(w.grad, g, true, x.data, false, OC, C, N);
        if (b.grad)
          for (int32_t r = 0; r < N; r++) axpy(b.grad, T(1), g + size_t(r) * OC, OC);
        break;
      }
      case TensorOp::add:
      case TensorOp::mul: {
        Node& y = nodes_[n.in[1]];
        const bool row = y.rows == 1 && n.rows != 1;
        const int32_t C = n.cols;
        for (int32_t r = 0; r < n.rows; r++) {
          const T* gr = g + size_t(r) * C;
          const size_t yo = row ? 0 : size_t(r) * C, xo = size_t(r) * C;
          if (n.op == TensorOp::add) {
            if (x.grad) axpy(x.grad + xo, T(1), gr, C);
            if (y.grad) axpy(y.grad + yo, T(1), gr, C);
          } else {
            if (x.grad)
              for (int32_t c = 0; c < C; c++) x.grad[xo + c] += gr[c] * y.data[yo + c];
            if (y.grad)
              for (int32_t c = 0; c < C; c++) y.grad[yo + c] += gr[c] * x.data[xo + c];
          }
        }
        break;
      }
      case TensorOp::tanh:
        for (size_t i = 0; i < count; i++) x.grad[i] += g[i] * (1 - n.data[i] * n.data[i]);
        break;
      case TensorOp::relu:
        for (size_t i = 0; i < count; i++) x.grad[i] += n.data[i] > 0 ? g[i] : T(0);
        break;
      case TensorOp::gelu:  // d/dx x Phi(x) = Phi(x) + x phi(x)
        for (size_t i = 0; i < count; i++) {
          const T v = x.data[i];
          const T cdf = T(0.5) * (1 + std::erf(v * T(M_SQRT1_2)));
          const T pdf = std::exp(T(-0.5) * v * v) * T(0.3989422804014327);  // 1/sqrt(2 pi)
          x.grad[i] += g[i] * (cdf + v * pdf);
        }
        break;
      case TensorOp::exp:
        for (size_t i = 0; i < count; i++) x.grad[i] += g[i] * n.data[i];
        break;
      case TensorOp::log:
        for (size_t i = 0; i < count; i++) x.grad[i] += g[i] / x.data[i];
        break;
      case TensorOp::embedding:
        for (int32_t i = 0; i < n.index.size; i++)
          axpy(x.grad + size_t(n.index.data[i]) * n.cols, T(1), g + size_t(i) * n.cols, n.cols);
        break;
      case TensorOp::sum:
      case TensorOp::mean: {
        const size_t xn = numel(x);
        const T d = n.op == TensorOp::mean ? g[0] / T(xn) : g[0];
        for (size_t i = 0; i < xn; i++) x.grad[i] += d;
        break;
      }
      case TensorOp::layernorm: {
        // dx = rstd * (dnorm - mean(dnorm) - norm * mean(dnorm * norm)), dnorm = g * gamma.
        Node &gamma = nodes_[n.in[1]], &beta = nodes_[n.in[2]];
        const int32_t N = n.rows, C = n.cols;
        for (int32_t r = 0; r < N; r++) {
          const T m = n.aux[r], rstd = n.aux[N + r];
          const T *xr = x.data + size_t(r) * C, *gr = g + size_t(r) * C;
          T mean_dnorm = 0, mean_dnorm_norm = 0;
          for (int32_t c = 0; c < C; c++) {
            const T norm = (xr[c] - m) * rstd, dnorm = gr[c] * gamma.data[c];
            mean_dnorm += dnorm, mean_dnorm_norm += dnorm * norm;
            if (gamma.grad) gamma.grad[c] += gr[c] * norm;
            if (beta.grad) beta.grad[c] += gr[c];
          }
          mean_dnorm /= C, mean_dnorm_norm /= C;
          if (x.grad)
            for (int32_t c = 0; c < C; c++) {
              const T norm = (xr[c] - m) * rstd;
              x.grad[size_t(r) * C + c] +=
                  rstd * (gr[c] * gamma.data[c] - mean_dnorm - norm * mean_dnorm_norm);
            }
        }
        break;
      }
      case TensorOp::softmax:  // dx = y * (dy - sum(dy * y)) per row
        for (int32_t r = 0; r < n.rows; r++) {
          const T *y = n.data + size_t(r) * n.cols, *gr = g + size_t(r) * n.cols;
          T dot = 0;
          for (int32_t c = 0; c < n.cols; c++) dot += gr[c] * y[c];
          for (int32_t c = 0; c < n.cols; c++) x.grad[size_t(r) * n.cols + c] += y[c] * (gr[c] - dot);
        }
        break;
      case TensorOp::attention: attention_backward(n, x); break;
      case TensorOp::cross_entropy: {  // dlogits = (softmax - onehot(target)) / N
        const int32_t N = x.rows, V = x.cols;
        const T d = g[0] / T(N);
        for (int32_t r = 0; r < N; r++) {
          const T* p = n.aux + size_t(r) * V;
          T* gx = x.grad + size_t(r) * V;
          for (int32_t c = 0; c < V; c++) gx[c] += d * p[c];
          gx[n.index.data[r]] -= d;
        }
        break;
      }
      case TensorOp::count: fail("backward", "bad op");
    }
  }

  // Attention's forward for head size HS (0: the runtime hs), per batch, head and position.
  template <int HS>
  void attention_forward(Node& n, const T* __restrict in, int32_t B, int32_t T_, int32_t H,
                         int32_t runtime_hs) {
    const int32_t hs = HS > 0 ? HS : runtime_hs, C = n.cols, C3 = 3 * C;
    const T scale = T(1) / std::sqrt(T(hs));
    for (int32_t b = 0; b < B; b++)
      for (int32_t h = 0; h < H; h++)
        for (int32_t t = 0; t < T_; t++) {
          const T* __restrict q = in + size_t(b * T_ + t) * C3 + h * hs;
          T* __restrict p = n.aux + ((size_t(b) * H + h) * T_ + t) * T_;
          T maxv = -INFINITY;
          for (int32_t s = 0; s <= t; s++) {
            const T* __restrict k = in + size_t(b * T_ + s) * C3 + C + h * hs;
            T dot = 0;
            for (int32_t i = 0; i < hs; i++) dot += q[i] * k[i];
            p[s] = dot * scale;
            maxv = std::max(maxv, p[s]);
          }
          T total = 0;
          for (int32_t s = 0; s <= t; s++) total += (p[s] = exp_t(p[s] - maxv));
          const T inv = T(1) / total;
          T acc[HS > 0 ? HS : kMaxHeadSize];  // this head's output row, across s
          for (int32_t i = 0; i < hs; i++) acc[i] = 0;
          for (int32_t s = 0; s <= t; s++) {
            p[s] *= inv;
            const T* __restrict v = in + size_t(b * T_ + s) * C3 + 2 * C + h * hs;
            for (int32_t i = 0; i < hs; i++) acc[i] += p[s] * v[i];
          }
          std::memcpy(n.data + size_t(b * T_ + t) * C + h * hs, acc, hs * sizeof(T));
        }
  }

  // Softmax attention's chain rule, position by position (as in llm.c's attention_backward):
  // dv_s += p_ts dout_t; dp_ts = dout_t . v_s; dpre_ts = p_ts (dp_ts - sum_r p_tr dp_tr);
  // dq_t += scale sum_s dpre_ts k_s; dk_s += scale dpre_ts q_t.
  void attention_backward(Node& n, Node& qkv) {
    if (!qkv.grad) return;
    switch (n.cols / n.arg[2]) {
      case 4: attention_backward_hs<4>(n, qkv); break;
      case 8: attention_backward_hs<8>(n, qkv); break;
      case 16: attention_backward_hs<16>(n, qkv); break;
      case 32: attention_backward_hs<32>(n, qkv); break;
      case 64: attention_backward_hs<64>(n, qkv); break;
      default: attention_backward_hs<0>(n, qkv);
    }
  }
  template <int HS>
  void attention_backward_hs(Node& n, Node& qkv) {
    const int32_t B = n.arg[0], T_ = n.arg[1], H = n.arg[2], C = n.cols, C3 = 3 * C;
    const int32_t hs = HS > 0 ? HS : C / H;
    const T scale = T(1) / std::sqrt(T(hs));
    std::vector<T>& dp = scratch_;
    dp.resize(T_);
    T* __restrict grad = qkv.grad;
    const T* __restrict in = qkv.data;
    for (int32_t b = 0; b < B; b++)
      for (int32_t h = 0; h < H; h++)
        for (int32_t t = 0; t < T_; t++) {
          const T* __restrict p = n.aux + ((size_t(b) * H + h) * T_ + t) * T_;
          const T* __restrict dout = n.grad + size_t(b * T_ + t) * C + h * hs;
          const size_t qo = size_t(b * T_ + t) * C3 + h * hs;
          T weighted = 0;
          for (int32_t s = 0; s <= t; s++) {
            const size_t vo = size_t(b * T_ + s) * C3 + 2 * C + h * hs;
            T d = 0;
            for (int32_t i = 0; i < hs; i++) {
              d += dout[i] * in[vo + i];
              grad[vo + i] += p[s] * dout[i];
            }
            dp[s] = d;
            weighted += p[s] * d;
          }
          T dq[HS > 0 ? HS : kMaxHeadSize];  // the query's gradient, across s
          for (int32_t i = 0; i < hs; i++) dq[i] = 0;
          for (int32_t s = 0; s <= t; s++) {
            const T dpre = p[s] * (dp[s] - weighted) * scale;
            const size_t ko = size_t(b * T_ + s) * C3 + C + h * hs;
            for (int32_t i = 0; i < hs; i++) {
              dq[i] += dpre * in[ko + i];
              grad[ko + i] += dpre * in[qo + i];
            }
          }
          for (int32_t i = 0; i < hs; i++) grad[qo + i] += dq[i];
        }
  }

  static void axpy(T* y, T a, const T* x, int32_t n) {
#pragma omp simd
    for (int32_t i = 0; i < n; i++) y[i] += a * x[i];
  }

  std::vector<Node> nodes_;  // parameters first ([0, num_params_)), then the current step's ops
  uint32_t num_params_ = 0;
  Arena<T> params_, step_;
  std::vector<T*> adam_m_, adam_v_;
  std::vector<T> scratch_;  // attention backward's (T) row; sized once
  int64_t adam_t_ = 0;
};

}  // namespace bp
