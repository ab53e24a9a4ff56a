// engine/core/op_cases_test.h: the tensor ops' test cases, shared by engine/core/tensor_test.cc
// (eager and compiled, against finite differences) and engine/dialects/dialects_test.cc (every
// dialect of every op).
//
// A case is parameters with value ranges kept away from the op's kinks and poles, and the op
// applied to them; loss_of builds loss = sum(op(params) * R) with a fixed random R, so every output
// element carries a different weight.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

#include "engine/compiled/program.h"
#include "engine/core/tensor.h"

namespace {

using G = bp::TensorGraph<double>;
using bp::Tensor;

// The larger of two differences, NaN once either is: std::max(worst, NaN) is worst, so a NaN
// gradient (a kernel reading memory it was told to write: OpArgs::fresh) would pass unseen.
inline double worse(double worst, double d) { return std::isnan(worst) || d <= worst ? worst : d; }

// Deterministic values in [lo, hi): tests must not depend on a seed that changes.
std::vector<double> values(size_t n, double lo, double hi, uint64_t seed) {
  std::vector<double> v(n);
  for (size_t i = 0; i < n; i++) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    v[i] = lo + (hi - lo) * double(seed >> 11) / double(1ull << 53);
  }
  return v;
}

struct ParamSpec {
  int rows, cols;
  double lo, hi;  // initial values drawn from [lo, hi): away from kinks and poles of the op
};

// build returns the op's output; the same code builds it in double and in float.
struct OpCase {
  const char* what;
  std::vector<ParamSpec> params;
  std::function<Tensor(G&, const std::vector<Tensor>&)> build;
  std::function<Tensor(bp::TensorGraph<float>&, const std::vector<Tensor>&)> build_float;
  template <class T>
  Tensor apply(bp::TensorGraph<T>& g, const std::vector<Tensor>& p) const {
    if constexpr (std::is_same_v<T, float>)
      return build_float(g, p);
    else
      return build(g, p);
  }
};
template <class F>
OpCase op_case(const char* what, std::vector<ParamSpec> params, F f) {
  return {what, std::move(params), f, f};
}

const int32_t kTargets[] = {1, 4, 0, 2, 3, 3};
const int32_t kIds[] = {0, 2, 2, 5, 1, 0};

std::vector<OpCase> cases() {
  bp::IndexSpan ids{kIds, 6}, targets4{kTargets, 4};
  return {
      op_case("matmul a b^T", {{3, 4, -1, 1}, {5, 4, -1, 1}},
              [](auto& g, auto& p) { return g.matmul(p[0], p[1], true); }),
      op_case("matmul a b^T 2", {{1, 8, -1, 1}, {40, 8, -1, 1}},  // b much larger: the c^T path
              [](auto& g, auto& p) { return g.matmul(p[0], p[1], true); }),
      op_case("matmul a b", {{3, 4, -1, 1}, {4, 5, -1, 1}},
              [](auto& g, auto& p) { return g.matmul(p[0], p[1], false); }),
      op_case("linear", {{3, 4, -1, 1}, {5, 4, -1, 1}, {1, 5, -1, 1}},
              [](auto& g, auto& p) { return g.linear(p[0], p[1], p[2]); }),
      op_case("linear relu", {{3, 4, -1, 1}, {5, 4, -1, 1}, {1, 5, -1, 1}},
              [](auto& g, auto& p) { return g.linear(p[0], p[1], p[2], true); }),
      op_case("add", {{3, 4, -1, 1}, {3, 4, -1, 1}},
              [](auto& g, auto& p) { return g.add(p[0], p[1]); }),
      op_case("add row", {{3, 4, -1, 1}, {1, 4, -1, 1}},
              [](auto& g, auto& p) { return g.add(p[0], p[1]); }),
      op_case("mul", {{3, 4, -1, 1}, {3, 4, -1, 1}},
              [](auto& g, auto& p) { return g.mul(p[0], p[1]); }),
      op_case("mul row", {{3, 4, -1, 1}, {1, 4, -1, 1}},
              [](auto& g, auto& p) { return g.mul(p[0], p[1]); }),
      op_case("sub", {{3, 4, -1, 1}, {3, 4, -1, 1}},
              [](auto& g, auto& p) { return g.sub(p[0], p[1]); }),
      op_case("sub row", {{3, 4, -1, 1}, {1, 4, -1, 1}},
              [](auto& g, auto& p) { return g.sub(p[0], p[1]); }),
      op_case("div", {{3, 4, -1, 1}, {3, 4, 0.5, 2}},  // y away from 0
              [](auto& g, auto& p) { return g.div(p[0], p[1]); }),
      op_case("div row", {{3, 4, -1, 1}, {1, 4, -2, -0.5}},
              [](auto& g, auto& p) { return g.div(p[0], p[1]); }),
      op_case("tanh", {{3, 4, -2, 2}}, [](auto& g, auto& p) { return g.tanh(p[0]); }),
      op_case("relu", {{3, 4, 0.1, 1}}, [](auto& g, auto& p) { return g.relu(g.add(p[0], p[0])); }),
      op_case("relu <0", {{3, 4, -1, -0.1}},
              [](auto& g, auto& p) { return g.add(g.relu(p[0]), p[0]); }),
      op_case("gelu", {{3, 4, -3, 3}}, [](auto& g, auto& p) { return g.gelu(p[0]); }),
      op_case("exp", {{3, 4, -1, 1}}, [](auto& g, auto& p) { return g.exp(p[0]); }),
      op_case("log", {{3, 4, 0.5, 2}}, [](auto& g, auto& p) { return g.log(p[0]); }),
      op_case("sigmoid", {{3, 4, -3, 3}}, [](auto& g, auto& p) { return g.sigmoid(p[0]); }),
      op_case("logsumexp", {{3, 5, -2, 2}}, [](auto& g, auto& p) { return g.logsumexp(p[0]); }),
      op_case("sum_rows", {{3, 5, -2, 2}}, [](auto& g, auto& p) { return g.sum_rows(p[0]); }),
      op_case("sum_rows 2", {{6, 2, -2, 2}},  // a width fixed at compile time
              [](auto& g, auto& p) { return g.sum_rows(p[0]); }),
      op_case("sum_rows 20", {{2, 20, -2, 2}},  // a vector reduction
              [](auto& g, auto& p) { return g.sum_rows(p[0]); }),
      op_case("embedding", {{6, 3, -1, 1}},
              [ids](auto& g, auto& p) { return g.embedding(p[0], ids); }),
      op_case("view", {{4, 3, -1, 1}}, [](auto& g, auto& p) { return g.tanh(g.view(p[0], 2, 6)); }),
      op_case("sum", {{3, 4, -1, 1}}, [](auto& g, auto& p) { return g.sum(g.mul(p[0], p[0])); }),
      op_case("mean", {{3, 4, -1, 1}}, [](auto& g, auto& p) { return g.mean(g.mul(p[0], p[0])); }),
      op_case("layernorm", {{4, 6, -2, 2}, {1, 6, 0.5, 1.5}, {1, 6, -1, 1}},
              [](auto& g, auto& p) { return g.layernorm(p[0], p[1], p[2]); }),
      op_case("softmax", {{3, 5, -2, 2}}, [](auto& g, auto& p) { return g.softmax(p[0]); }),
      op_case("attention",
              {{2 * 3, 3 * 4, -1, 1}},  // B=2, T=3, C=4, H=2: head size 2, the generic path
              [](auto& g, auto& p) { return g.attention(p[0], 2, 3, 2); }),
      op_case("attention hs 4",
              {{1 * 3, 3 * 8, -1, 1}},  // B=1, T=3, C=8, H=2: positions as 8 lanes
              [](auto& g, auto& p) { return g.attention(p[0], 1, 3, 2); }),
      op_case("attention hs 8 T 11",
              {{2 * 11, 3 * 16, -1, 1}},  // B=2, T=11, C=16, H=2: positions as 16 lanes
              [](auto& g, auto& p) { return g.attention(p[0], 2, 11, 2); }),
      op_case("attention hs 4 T 17",
              {{1 * 17, 3 * 8, -1, 1}},  // B=1, T=17, C=8, H=2: a position at a time, hs constant
              [](auto& g, auto& p) { return g.attention(p[0], 1, 17, 2); }),
      op_case("cross_entropy", {{4, 5, -2, 2}},
              [targets4](auto& g, auto& p) { return g.cross_entropy(p[0], targets4); }),
      op_case("cross_entropy far", {{4, 5, -60, 60}},  // targets far below the row maximum
              [targets4](auto& g, auto& p) { return g.cross_entropy(p[0], targets4); }),
      op_case("log_softmax", {{3, 5, -2, 2}}, [](auto& g, auto& p) { return g.log_softmax(p[0]); }),
      op_case("transpose", {{3, 5, -1, 1}}, [](auto& g, auto& p) { return g.transpose(p[0]); }),
      op_case("transpose tiles", {{37, 20, -1, 1}},  // past one 16 x 16 tile both ways
              [](auto& g, auto& p) { return g.transpose(p[0]); }),
      op_case("transpose of a row", {{1, 7, -1, 1}},
              [](auto& g, auto& p) { return g.matmul(g.transpose(p[0]), p[0], false); }),
      op_case("log_softmax far", {{3, 5, -20, 20}},  // values up to 40 apart in a row
              [](auto& g, auto& p) { return g.log_softmax(p[0]); }),
      op_case("nll", {{4, 5, -3, 0}},
              [targets4](auto& g, auto& p) { return g.nll(p[0], targets4); }),
      op_case("nll of log_softmax", {{4, 5, -2, 2}},  // torch's cross-entropy, in two ops
              [targets4](auto& g, auto& p) { return g.nll(g.log_softmax(p[0]), targets4); }),
  };
}

// Each parameter's initial values, from its range, with a seed of its own.
std::vector<std::vector<double>> init_of(const OpCase& c) {
  std::vector<std::vector<double>> init;
  for (size_t i = 0; i < c.params.size(); i++) {
    const ParamSpec& s = c.params[i];
    init.push_back(values(size_t(s.rows) * s.cols, s.lo, s.hi, 7 + i));
  }
  return init;
}

// loss = sum(out * R): R is an input, so only the op's parameters get gradients.
double loss_of(const OpCase& c, const std::vector<std::vector<double>>& init, G* keep = nullptr,
               std::vector<Tensor>* params_out = nullptr) {
  G local;
  G& g = keep ? *keep : local;
  std::vector<Tensor> p;
  for (size_t i = 0; i < c.params.size(); i++)
    p.push_back(g.param(c.params[i].rows, c.params[i].cols, init[i]));
  Tensor out = c.build(g, p);
  const size_t n = size_t(g.rows(out)) * g.cols(out);
  Tensor r = g.input(g.rows(out), g.cols(out), values(n, -1, 1, 99));
  Tensor loss = g.sum(g.mul(out, r));
  if (params_out) *params_out = p;
  if (keep) g.backward(loss);
  return g.data(loss)[0];
}

// The case compiled (engine/compiled/program.h) and run once in T, under `dialects` (priority
// without): recorded on a record-only graph with R as a constant (such a graph has no step inputs).
struct CompiledRun {
  double loss;
  std::vector<std::vector<double>> grads;  // per parameter
  std::set<bp::TensorOp> ops;
  size_t instructions;
  std::string kernels;  // "op:dialect " per node
};
template <class T>
CompiledRun run_compiled(const OpCase& c, const std::vector<std::vector<double>>& init,
                         bp::DialectSelector<T>* dialects = nullptr) {
  int32_t rows, cols;
  {
    G probe;
    std::vector<Tensor> p;
    for (size_t i = 0; i < c.params.size(); i++)
      p.push_back(probe.param(c.params[i].rows, c.params[i].cols, init[i]));
    Tensor out = c.build(probe, p);
    rows = probe.rows(out), cols = probe.cols(out);
  }
  auto as_t = [](const std::vector<double>& v) { return std::vector<T>(v.begin(), v.end()); };
  bp::TensorGraph<T> recorded(256, /*record_only=*/true);
  std::vector<Tensor> p;
  for (size_t i = 0; i < c.params.size(); i++)
    p.push_back(recorded.param(c.params[i].rows, c.params[i].cols, as_t(init[i])));
  const Tensor r = recorded.constant(rows, cols, as_t(values(size_t(rows) * cols, -1, 1, 99)));
  const Tensor loss = recorded.sum(recorded.mul(c.apply(recorded, p), r));
  recorded.backward(loss);
  bp::Program<T> program(recorded, loss.id, {}, dialects);
  program.forward();
  // As the compiled backend runs a step after zero_grad: each parameter's gradient written fresh
  // by its first writer (Program::start_gradients). NaN first, so a kernel that read one it was
  // told to write fresh would show.
  for (size_t i = 0; i < p.size(); i++)
    std::fill(recorded.grad(p[i]), recorded.grad(p[i]) + init[i].size(),
              std::numeric_limits<T>::quiet_NaN());
  program.start_gradients(true);
  program.backward();
  CompiledRun run{double(program.loss()), {}, {}, program.num_instructions(), ""};
  for (size_t i = 0; i < recorded.num_nodes(); i++) run.ops.insert(recorded.node_at(i).op);
  for (size_t i = 0; i < p.size(); i++) {
    const T* g = recorded.grad(p[i]);
    run.grads.emplace_back(g, g + init[i].size());
  }
  for (const auto& k : program.kernels())
    run.kernels +=
        std::string(bp::tensor_op_names[int(k.op)]) + ":" + k.choice.kernel->dialect + " ";
  return run;
}

}  // namespace
