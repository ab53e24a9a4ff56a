// harness/gradbench/modules.h: GradBench's modules as bp_gradbench reads and answers them: each
// eval's input JSON into its workloads/gradbench.h Input, checked field by field, and its outputs
// in the JSON shapes of GradBench's `manual` tool (cpp/gradbench/evals/<eval>.hpp upstream):
//   lse   primal -> number,    gradient -> [n]
//   llsq  primal -> number,    gradient -> [m]
//   lstm  objective -> number, jacobian -> [main_params row after row, then extra_params]
//   gmm   objective -> number, jacobian -> {"alpha": [k], "mu": [[d] x k], "q": [[d] x k],
//                                           "l": [[d(d-1)/2] x k]}
//   ode   primal -> [n] (y at t = 2), gradient -> [n] (of y's last element)
//   det   primal -> number,    gradient -> [ell^2] (row-major)
// Bad input is a std::invalid_argument naming the field, the sizes found and what is valid.
#pragma once

#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "harness/common/json.h"
#include "workloads/gradbench.h"

namespace bp::gradbench {

[[noreturn]] inline void bad_input(const std::string& why) { throw std::invalid_argument(why); }

inline JsonView field(JsonView input, std::string_view name) {
  if (!input.is_object()) bad_input("input: expected an object");
  const JsonView v = input[name];
  if (v.is_null()) bad_input("input: no field '" + std::string(name) + "'");
  return v;
}
inline std::vector<double> numbers(JsonView v, const std::string& what) {
  if (!v.is_array()) bad_input(what + ": expected an array of numbers");
  std::vector<double> out;
  out.reserve(v.size());
  for (size_t i = 0; i < v.size(); i++) {
    if (!v[i].is_number() || !std::isfinite(v[i].num_or(NAN)))
      bad_input(what + "[" + std::to_string(i) + "]: expected a finite number");
    out.push_back(v[i].num_or(NAN));
  }
  return out;
}
// An array of `rows` arrays of `cols` numbers (-1: any count, the same for every row), flat.
inline std::vector<double> matrix(JsonView input, std::string_view name, int64_t rows,
                                  int64_t cols) {
  const JsonView v = field(input, name);
  const std::string what(name);
  if (!v.is_array()) bad_input(what + ": expected an array of arrays of numbers");
  if (rows >= 0 && int64_t(v.size()) != rows)
    bad_input(what + ": " + std::to_string(v.size()) + " rows, expected " + std::to_string(rows));
  std::vector<double> flat;
  for (size_t r = 0; r < v.size(); r++) {
    const std::vector<double> row = numbers(v[r], what + "[" + std::to_string(r) + "]");
    if (cols < 0) cols = int64_t(row.size());
    if (int64_t(row.size()) != cols)
      bad_input(what + "[" + std::to_string(r) + "]: " + std::to_string(row.size()) +
                " numbers, expected " + std::to_string(cols) + " as the rows before it");
    flat.insert(flat.end(), row.begin(), row.end());
  }
  return flat;
}
inline int64_t whole(JsonView input, std::string_view name, int64_t least, int64_t most) {
  const double x = field(input, name).num_or(NAN);  // NaN (not a number) fails every test
  if (!(x == std::floor(x) && x >= double(least) && x <= double(most)))
    bad_input(std::string(name) + ": expected a whole number from " + std::to_string(least) +
              " to " + std::to_string(most));
  return int64_t(x);
}
inline int64_t rows_of(JsonView input, std::string_view name) {
  const JsonView v = field(input, name);
  if (!v.is_array() || v.size() == 0 || !v[0].is_array())
    bad_input(std::string(name) + ": expected a non-empty array of arrays of numbers");
  return int64_t(v.size());
}

// Bounded work. Each module estimates from its input's sizes, before anything is allocated, the
// scalar operations one evaluation makes (`operations`, and `sizes` to name them). A scalar tape
// records a node for each, some 32 bytes, so `--backend scalar` and `compiled` take at most 2^27
// (about 4 GB); the primal on plain doubles and the tensor forms only compute them, and take at
// most 2^33 (seconds). Past its limit an input is an error reply with the estimate: a 1 kB
// message naming n = 2^40 or ell = 16 is never hours of work or a machine out of memory.
inline constexpr double kMaxTapeOperations = double(int64_t(1) << 27);
inline constexpr double kMaxOperations = double(int64_t(1) << 33);
template <class M, class Input>
void within_limit(const Input& in, double limit) {
  const double operations = M::operations(in);
  if (operations > limit)
    bad_input(M::sizes(in) + ": about " + fmt::format("{:.3g}", operations) +
              " operations, past this tool's limit of 2^" + std::to_string(std::ilogb(limit)) +
              (limit == kMaxTapeOperations ? " on a tape" : "") + " (docs/gradbench.md)");
}

// One module: its name, its two functions, and how its JSON becomes the eval's Input and its
// gradient becomes JSON.
template <class W>
struct Module;

// GradBench's first eval, its smoke test: square(x) = x^2 and its gradient, "double" (2x), on one
// number. A module of the tool only: there is nothing in it to benchmark.
struct Hello {
  struct Input {
    double x;
  };
  template <ScalarBackend B>
  struct Graph {
    std::vector<typename B::Scalar> params;  // x
    Graph(B& be, const Input& in) : params{be.param(in.x)} {}
    typename B::Scalar objective(B&) const { return params[0] * params[0]; }
  };
};

template <>
struct Module<Hello> {
  static constexpr std::string_view name = "hello", primal = "square", gradient = "double";
  static Hello::Input input(JsonView in) {  // the input is the number itself
    if (!in.is_number() || !std::isfinite(in.num_or(NAN)))
      bad_input("input: expected a finite number");
    return {in.num_or(NAN)};
  }
  static double operations(const Hello::Input&) { return 1; }
  static std::string sizes(const Hello::Input&) { return "one number"; }
  static Json gradient_json(const Hello::Input&, std::span<const double> g) { return Json(g[0]); }
};

template <>
struct Module<Lse> {
  static constexpr std::string_view name = "lse", primal = "primal", gradient = "gradient";
  static Lse::Input input(JsonView in) {
    Lse::Input out{numbers(field(in, "x"), "x")};
    if (out.x.empty()) bad_input("x: expected at least one number");
    return out;
  }
  static double operations(const Lse::Input& in) { return 4.0 * double(in.x.size()); }
  static std::string sizes(const Lse::Input& in) {
    return std::to_string(in.x.size()) + " numbers";
  }
  static Json gradient_json(const Lse::Input&, std::span<const double> g) {
    return json_numbers(g);
  }
};

template <>
struct Module<Llsq> {
  static constexpr std::string_view name = "llsq", primal = "primal", gradient = "gradient";
  static Llsq::Input input(JsonView in) {
    Llsq::Input out{numbers(field(in, "x"), "x"), whole(in, "n", 2, int64_t(1) << 40)};
    if (out.x.empty()) bad_input("x: expected at least one number");
    return out;
  }
  static double operations(const Llsq::Input& in) {
    return 4.0 * double(in.n) * double(in.x.size());
  }
  static std::string sizes(const Llsq::Input& in) {
    return "n = " + std::to_string(in.n) + " points of " + std::to_string(in.x.size()) +
           " coefficients";
  }
  static Json gradient_json(const Llsq::Input&, std::span<const double> g) {
    return json_numbers(g);
  }
};

template <>
struct Module<Lstm> {
  static constexpr std::string_view name = "lstm", primal = "objective", gradient = "jacobian";
  // GradBench reads the layers from main_params (2 rows each), the bits from its row length
  // (4 per bit) and the characters from the sequence's rows.
  static Lstm::Input input(JsonView in) {
    const int64_t main_rows = rows_of(in, "main_params");
    if (main_rows % 2)
      bad_input("main_params: " + std::to_string(main_rows) +
                " rows, expected 2 per layer (weights, biases)");
    const JsonView first = field(in, "main_params")[0];
    if (first.size() == 0 || first.size() % 4)
      bad_input("main_params[0]: " + std::to_string(first.size()) +
                " numbers, expected 4 per bit (forget, input, output gates, change)");
    const int64_t layers = main_rows / 2, bits = int64_t(first.size() / 4);
    const int64_t chars = rows_of(in, "sequence");
    if (chars < 2) bad_input("sequence: 1 character, expected at least 2");
    Lstm::Input out{int32_t(layers), int32_t(chars), int32_t(bits), {}, {}, {}, {}};
    out.main_params = matrix(in, "main_params", 2 * layers, 4 * bits);
    out.extra_params = matrix(in, "extra_params", 3, bits);
    out.state = matrix(in, "state", 2 * layers, bits);
    out.sequence = matrix(in, "sequence", chars, bits);
    return out;
  }
  static double operations(const Lstm::Input& in) {
    return 40.0 * double(in.chars) * double(in.layers) * double(in.bits);
  }
  static std::string sizes(const Lstm::Input& in) {
    return std::to_string(in.chars) + " characters of " + std::to_string(in.layers) + " layers";
  }
  static Json gradient_json(const Lstm::Input&, std::span<const double> g) {
    return json_numbers(g);
  }
};

template <>
struct Module<Ode> {
  static constexpr std::string_view name = "ode", primal = "primal", gradient = "gradient";
  static Ode::Input input(JsonView in) {
    Ode::Input out{numbers(field(in, "x"), "x"), whole(in, "s", 1, int64_t(1) << 30)};
    if (out.x.empty()) bad_input("x: expected at least one number");
    return out;
  }
  // Four stages of Runge-Kutta a step, each a few operations an equation.
  static double operations(const Ode::Input& in) {
    return 16.0 * double(in.s) * double(in.x.size());
  }
  static std::string sizes(const Ode::Input& in) {
    return "s = " + std::to_string(in.s) + " steps of " + std::to_string(in.x.size()) +
           " equations";
  }
  static Json gradient_json(const Ode::Input&, std::span<const double> g) {
    return json_numbers(g);
  }
};

template <>
struct Module<Det> {
  static constexpr std::string_view name = "det", primal = "primal", gradient = "gradient";
  static Det::Input input(JsonView in) {
    const int64_t ell = whole(in, "ell", 1, 16);
    Det::Input out{numbers(field(in, "A"), "A"), ell};
    if (int64_t(out.a.size()) != ell * ell)
      bad_input("A: " + std::to_string(out.a.size()) +
                " numbers, expected ell^2 = " + std::to_string(ell * ell));
    return out;
  }
  // The expansion in minors: about 3 ell! operations (a tape of 1.2 million nodes at ell = 9).
  static double operations(const Det::Input& in) {
    double factorial = 1;
    for (int64_t i = 2; i <= in.ell; i++) factorial *= double(i);
    return 3.0 * factorial;
  }
  static std::string sizes(const Det::Input& in) { return "ell = " + std::to_string(in.ell); }
  static Json gradient_json(const Det::Input&, std::span<const double> g) {
    return json_numbers(g);
  }
};

// GmmEval's Graph reads d from its input: one instance of the template serves every d.
using Gmm = GmmD2;
template <>
struct Module<Gmm> {
  static constexpr std::string_view name = "gmm", primal = "objective", gradient = "jacobian";
  static Gmm::Input input(JsonView in) {
    const int64_t d = whole(in, "d", 2, 4096), k = whole(in, "k", 1, int64_t(1) << 24),
                  n = whole(in, "n", 1, int64_t(1) << 30);

    Gmm::Input out{
        int32_t(d), int32_t(k), int32_t(n), {}, {}, {}, {}, {}, int32_t(whole(in, "m", 0, 1 << 20)),
        0};
    const JsonView gamma = field(in, "gamma");
    if (!gamma.is_number() || !(gamma.num_or(NAN) > 0) || !std::isfinite(gamma.num_or(NAN)))
      bad_input("gamma: expected a positive number");
    out.gamma = gamma.num_or(NAN);
    out.alpha = numbers(field(in, "alpha"), "alpha");
    if (int64_t(out.alpha.size()) != k)
      bad_input("alpha: " + std::to_string(out.alpha.size()) +
                " numbers, expected k = " + std::to_string(k));
    out.mu = matrix(in, "mu", k, d);
    out.q = matrix(in, "q", k, d);
    out.l = matrix(in, "l", k, d * (d - 1) / 2);
    out.x = matrix(in, "x", n, d);
    return out;
  }
  // Every point against every component: its triangular factor, d^2 / 2 products, and a few
  // operations a coordinate.
  static double operations(const Gmm::Input& in) {
    const double d = in.d;
    return double(in.n) * double(in.k) * (d * (d + 1) / 2 + 4 * d);
  }
  static std::string sizes(const Gmm::Input& in) {
    return "n = " + std::to_string(in.n) + " points, k = " + std::to_string(in.k) +
           " components of d = " + std::to_string(in.d);
  }
  static Json gradient_json(const Gmm::Input& in, std::span<const double> g) {
    const size_t k = size_t(in.k), d = size_t(in.d), lsz = d * (d - 1) / 2;
    auto rows = [&](size_t from, size_t width) {
      Json out = Json::array();
      for (size_t r = 0; r < k; r++)
        out.push_back(json_numbers(g.subspan(from + r * width, width)));
      return out;
    };
    return Json::object({{"alpha", json_numbers(g.subspan(0, k))},
                         {"mu", rows(k, d)},
                         {"q", rows(k + k * d, d)},
                         {"l", rows(k + 2 * k * d, lsz)}});
  }
};

inline constexpr std::string_view kModules = "hello, lse, llsq, lstm, gmm, ode, det";

// Calls f.template operator()<W>() for the module named `name`; false if there is none.
template <class F>
bool with_module(std::string_view name, F&& f) {
  if (name == "hello") return f.template operator()<Hello>(), true;
  if (name == "lse") return f.template operator()<Lse>(), true;
  if (name == "llsq") return f.template operator()<Llsq>(), true;
  if (name == "lstm") return f.template operator()<Lstm>(), true;
  if (name == "gmm") return f.template operator()<Gmm>(), true;
  if (name == "ode") return f.template operator()<Ode>(), true;
  if (name == "det") return f.template operator()<Det>(), true;
  return false;
}

// Our own seeded input of an eval at a size (workloads/gradbench.h), as GradBench's JSON: the
// same work a run of bench_run times, for bp_gradbench --write-input.
inline Json input_json(const Lse::Input& in) { return Json::object({{"x", json_numbers(in.x)}}); }
inline Json input_json(const Llsq::Input& in) {
  return Json::object({{"x", json_numbers(in.x)}, {"n", in.n}});
}
inline Json rows_json(const std::vector<double>& flat, size_t width) {
  Json out = Json::array();
  for (size_t at = 0; at < flat.size(); at += width)
    out.push_back(json_numbers(std::span<const double>(flat).subspan(at, width)));
  return out;
}
inline Json input_json(const Lstm::Input& in) {
  const size_t b = size_t(in.bits);
  return Json::object({{"main_params", rows_json(in.main_params, 4 * b)},
                       {"extra_params", rows_json(in.extra_params, b)},
                       {"state", rows_json(in.state, b)},
                       {"sequence", rows_json(in.sequence, b)}});
}
inline Json input_json(const Ode::Input& in) {
  return Json::object({{"x", json_numbers(in.x)}, {"s", in.s}});
}
inline Json input_json(const Det::Input& in) {
  return Json::object({{"A", json_numbers(in.a)}, {"ell", in.ell}});
}
inline Json input_json(const GmmInput& in) {
  const size_t d = size_t(in.d);
  return Json::object({{"d", in.d},
                       {"k", in.k},
                       {"n", in.n},
                       {"x", rows_json(in.x, d)},
                       {"m", in.m},
                       {"gamma", in.gamma},
                       {"alpha", json_numbers(in.alpha)},
                       {"mu", rows_json(in.mu, d)},
                       {"q", rows_json(in.q, d)},
                       {"l", rows_json(in.l, d * (d - 1) / 2)}});
}

}  // namespace bp::gradbench
