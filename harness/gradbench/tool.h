// harness/gradbench/tool.h: bp_gradbench's side of GradBench's protocol (CONTRIBUTING.md upstream,
// section Protocol): one JSON message a line in, one response a line out, for every message.
//   start     -> {"id", "tool", "config"}
//   define    -> {"id", "success"} (false, with "error", for a module this backend lacks)
//   evaluate  -> {"id", "success": true, "output", "timings"} or {"id", "success": false, "error"}
//   analysis  -> {"id"}; an output GradBench judged invalid is said on stderr
// An evaluate runs its function at least `min_runs` times and until `min_seconds` have passed,
// one "evaluate" timing each. What is done once before is timed apart, never folded in: "prepare"
// (the input made parameters of the backend) and, for the compiled mode, "compile" (on a scalar
// graph its first two steps: the step captured, compiled and run, then its x86 code generated and
// run; on a tensor form its first step, captured, planned and run). The primal (GradBench's
// primal or objective) runs the same code on plain doubles (workloads/plain_backend.h) on every
// backend.
// A message that is not JSON, lacks an id or names what does not exist gets one error response,
// and the session goes on.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <memory>
#include <new>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "harness/common/json.h"
#include "harness/gradbench/modules.h"
#include "workloads/gradbench_tensor.h"
#include "workloads/plain_backend.h"

namespace bp::gradbench {

// Which ways compute the gradients is the program's choice, not this file's: a Session is made
// over a Backends policy (apps/gradbench_backends.h, our engine's and libtorch's), which says
//   static constexpr std::string_view kNames;                 // the valid --backend values
//   static bool known(std::string_view backend);
//   static bool runs_tensor_forms(std::string_view backend);  // lstm and gmm's tensor forms only
//   template <class W>
//   static Evaluation gradient(const std::string& backend, Precision, JsonView input);
// with gradient() calling gradient<W, B> or tensor_gradient<W, B> below for its backend type B.
template <class Backends>
std::string backend_lacks(std::string_view backend) {
  if (Backends::known(backend)) return "";
  return "unknown backend '" + std::string(backend) + "'; valid: " + std::string(Backends::kNames);
}

// An eval's tensor form, or void.
template <class W>
struct TensorFormOf {
  using type = void;
};
template <>
struct TensorFormOf<Lstm> {
  using type = LstmTensor;
};
template <int D>
struct TensorFormOf<GmmEval<D>> {
  using type = GmmTensor<D>;
};
template <class W>
inline constexpr bool kHasTensorForm = !std::is_void_v<typename TensorFormOf<W>::type>;

// What the tensor forms compute in: float64 by default, as GradBench's own tools do (its
// PyTorch tool, its manual C++), or float32, as the bench's model rows run. The scalar graphs
// are double either way.
enum class Precision { float64, float32 };
inline constexpr std::string_view kPrecisions = "float64, float32";
inline std::optional<Precision> parse_precision(std::string_view text) {
  if (text == "float64") return Precision::float64;
  if (text == "float32") return Precision::float32;
  return std::nullopt;
}
inline std::string_view precision_name(Precision p) {
  return p == Precision::float64 ? "float64" : "float32";
}

struct Evaluation {
  Json output;
  Json timings = Json::array();
  void time(std::string_view name, int64_t nanoseconds) {
    timings.push_back(Json::object({{"name", name}, {"nanoseconds", nanoseconds}}));
  }
};

inline int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// GradBench's Runs: at least min_runs runs, and until min_seconds have passed, within stated
// bounds: each run is a timing in the reply, so there are at most kMaxRuns of them (about 6 MB
// of reply), and min_seconds is at most kMaxSeconds (an evaluation answers within ten minutes).
inline constexpr int64_t kMaxRuns = 100000;
inline constexpr double kMaxSeconds = 600;
struct Runs {
  int64_t min_runs = 1;
  double min_seconds = 0;
};
inline Runs runs_of(JsonView input) {
  Runs r;
  if (const JsonView n = input["min_runs"]; !n.is_null()) {
    if (!n.is_number() || n.num_or(NAN) != std::floor(n.num_or(NAN)) || n.num_or(NAN) < 1 ||
        n.num_or(NAN) > double(kMaxRuns))
      bad_input("min_runs: expected a whole number from 1 to 10^5");
    r.min_runs = int64_t(n.num_or(NAN));
  }
  if (const JsonView s = input["min_seconds"]; !s.is_null()) {
    if (!s.is_number() || !(s.num_or(NAN) >= 0) || s.num_or(NAN) > kMaxSeconds)
      bad_input("min_seconds: expected a number of seconds from 0 to 600");
    r.min_seconds = s.num_or(NAN);
  }
  return r;
}
// Stops at kMaxRuns runs even before min_seconds (a run of a microsecond would otherwise make 6
// * 10^8 timings in ten minutes), and refuses after the first run a min_runs whose runs would
// take past kMaxSeconds (det at ell = 12, 12 s a run: 10^5 runs were two weeks).
template <class Fn>
void repeat(const Runs& runs, Evaluation& e, Fn&& once) {
  double seconds = 0;
  for (int64_t i = 0; i < kMaxRuns && (i < runs.min_runs || seconds < runs.min_seconds); i++) {
    const int64_t start = now_ns();
    once();
    const int64_t took = now_ns() - start;
    e.time("evaluate", took);
    seconds += double(took) * 1e-9;
    if (i == 0 && seconds * double(runs.min_runs) > kMaxSeconds) {
      char why[200];
      std::snprintf(why, sizeof why,
                    "min_runs: %lld runs of %.3g s (the first) would take %.0f s, past the %.0f s "
                    "an evaluation may take; at most %lld at this size",
                    (long long)runs.min_runs, seconds, seconds * double(runs.min_runs), kMaxSeconds,
                    (long long)std::max(1.0, std::floor(kMaxSeconds / seconds)));
      bad_input(why);
    }
  }
}

// GradBench's primal (objective): the eval on plain doubles.
template <class W>
Evaluation primal(JsonView input) {
  const typename W::Input in = Module<W>::input(input);
  within_limit<Module<W>>(in, kMaxOperations);
  const Runs runs = runs_of(input);
  Evaluation e;
  const int64_t start = now_ns();
  PlainBackend be;
  typename W::template Graph<PlainBackend> graph(be, in);
  e.time("prepare", now_ns() - start);
  if constexpr (requires { graph.solve(); }) {  // a vector (ode's y)
    std::vector<double> y;
    repeat(runs, e, [&] { y = graph.solve(); });
    e.output = json_numbers(y);
  } else {
    double value = 0;
    repeat(runs, e, [&] { value = graph.objective(be); });
    e.output = Json(value);
  }
  return e;
}

// GradBench's gradient (jacobian) on backend B: a step of EvalRun's, which the compiled mode
// replays after its first.
template <class W, class B>
Evaluation gradient(JsonView input) {
  using S = typename B::Scalar;
  const typename W::Input in = Module<W>::input(input);
  within_limit<Module<W>>(in, kMaxTapeOperations);
  const Runs runs = runs_of(input);
  struct Setup {
    B be;
    typename W::template Graph<B> graph;
    explicit Setup(const typename W::Input& in) : graph(be, in) {}
  };
  Evaluation e;
  int64_t start = now_ns();
  const auto setup = std::make_unique<Setup>(in);  // the backend must not move: Scalars point in
  std::vector<double> grads(setup->graph.params.size());
  e.time("prepare", now_ns() - start);
  auto step = [&] {
    if constexpr (ReplaysScalarSteps<B>)
      if (setup->be.can_replay_scalar_step()) return setup->be.replay_scalar_step(grads);
    return finish_step(setup->be, setup->graph.objective(setup->be), std::span<double>(grads),
                       std::span<const S>(setup->graph.params));
  };
  if constexpr (ReplaysScalarSteps<B>) {  // captured and compiled, then its code generated
    start = now_ns();
    step(), step();
    e.time("compile", now_ns() - start);
  }
  repeat(runs, e, step);
  e.output = Module<W>::gradient_json(in, grads);
  return e;
}

// The same on an eval's tensor form (float32): a step is zero_grad, the loss, backward, and
// every parameter's gradient read; the compiled mode's first is its capture and compile.
template <class W, class B>
Evaluation tensor_gradient(JsonView input) {
  using Model = typename TensorFormOf<W>::type::template Model<B>;
  const typename W::Input in = Module<W>::input(input);
  within_limit<Module<W>>(in, kMaxOperations);
  {  // inconsistent sizes refused as the scalar form refuses them
    PlainBackend plain;
    typename W::template Graph<PlainBackend> check(plain, in);
  }
  const Runs runs = runs_of(input);
  struct Setup {
    B be;
    Model model;
    explicit Setup(const typename W::Input& in) : model(be, in) {}
  };
  Evaluation e;
  int64_t start = now_ns();
  const auto setup = std::make_unique<Setup>(in);
  std::vector<double> grads;
  std::vector<typename B::Real> g;
  e.time("prepare", now_ns() - start);
  auto step = [&] {
    B& be = setup->be;
    be.zero_grad();
    auto loss = setup->model.loss(be, 0);
    be.backward(loss);
    be.loss_value(loss);
    grads.clear();
    for (size_t i = 0; i < setup->model.params.size(); i++) {
      g.resize(setup->model.param_sizes[i]);
      be.read_grad(setup->model.params[i], g);
      grads.insert(grads.end(), g.begin(), g.end());
    }
    be.end_step();
  };
  if constexpr (B::name.starts_with("compiled")) {  // compiled, compiled_double
    start = now_ns();
    step();
    e.time("compile", now_ns() - start);
  }
  repeat(runs, e, step);
  e.output = Module<W>::gradient_json(in, grads);
  return e;
}

// A name from a message, as an error reply quotes it: at most 40 bytes (a 100 MB "kind" is not
// sent back), and the writer makes any invalid UTF-8 in it U+FFFD, so the reply stays JSON.
inline std::string shown(std::string_view name) {
  if (name.size() <= 40) return "'" + std::string(name) + "'";
  return "'" + std::string(name.substr(0, 40)) + "...' (" + std::to_string(name.size()) + " bytes)";
}

template <class Backends>
class Session {
 public:
  explicit Session(std::string backend, Precision precision = Precision::float64)
      : backend_(std::move(backend)), precision_(precision) {}

  // The response to one message line (without its newline). Defined out of the class, so not
  // inline: apps/gradbench_engine.cc compiles a session once for the programs that declare it.
  std::string reply(std::string_view line);

 private:
  static std::string error_reply(const Json& id, const std::string& why) {
    return dump_json(Json::object({{"id", id}, {"success", false}, {"error", why}}));
  }
  std::string start(const Json& id) const {
    return dump_json(Json::object(
        {{"id", id},
         {"tool", "backprop-bench"},
         {"config",
          Json::object({{"backend", backend_}, {"precision", precision_name(precision_)}})}}));
  }
  // Why this tool cannot evaluate `module`, or "".
  std::string lacks(std::string_view module) const {
    if (std::string why = backend_lacks<Backends>(backend_); !why.empty()) return why;
    bool tensor_form = false;
    if (!with_module(module, [&]<class W>() { tensor_form = kHasTensorForm<W>; }))
      return "unknown module " + shown(module) + "; valid: " + std::string(kModules);
    if (Backends::runs_tensor_forms(backend_) && !tensor_form)
      return "module '" + std::string(module) + "' has no tensor form for --backend " + backend_ +
             " (lstm and gmm have); --backend scalar or compiled runs it";
    return "";
  }
  std::string define(const Json& id, const std::string& module) const {
    if (std::string why = lacks(module); !why.empty()) return error_reply(id, why);
    return dump_json(Json::object({{"id", id}, {"success", true}}));
  }
  std::string evaluate(const Json& id, JsonView message) const {
    const std::string module = message["module"].str_or(""),
                      function = message["function"].str_or("");
    if (std::string why = lacks(module); !why.empty()) return error_reply(id, why);
    if (message["input"].is_null()) return error_reply(id, "the message has no \"input\"");
    Evaluation e;
    std::string error;
    try {
      with_module(module, [&]<class W>() {
        if (function == Module<W>::primal)
          e = primal<W>(message["input"]);
        else if (function == Module<W>::gradient)
          e = Backends::template gradient<W>(backend_, precision_, message["input"]);
        else
          error = "unknown function " + shown(function) + " of " + module +
                  "; valid: " + std::string(Module<W>::primal) + ", " +
                  std::string(Module<W>::gradient);
      });
    } catch (const std::bad_alloc&) {
      error = "out of memory evaluating " + module + " " + function;
    } catch (const std::exception& e) {
      error = e.what();
    }
    if (!error.empty()) return error_reply(id, error);
    return dump_json(Json::object(
        {{"id", id}, {"success", true}, {"output", e.output}, {"timings", e.timings}}));
  }
  static std::string analysis(const Json& id, JsonView message) {
    if (message["valid"].is_boolean() && !message["valid"].bool_or(false))
      std::fprintf(stderr, "bp_gradbench: GradBench judged evaluation %s invalid: %s\n",
                   dump_json(message["of"]).c_str(), message["error"].str_or("").c_str());
    return dump_json(Json::object({{"id", id}}));
  }

  std::string backend_;
  Precision precision_;
};

template <class Backends>
std::string Session<Backends>::reply(std::string_view line) {
  Json message_json;
  try {
    message_json = parse_json(line);
  } catch (const std::exception& e) {
    return error_reply(Json(), std::string("the message is not JSON: ") + e.what());
  }
  const JsonView message = message_json;
  if (!message.is_object()) return error_reply(Json(), "the message is not a JSON object");
  const JsonView id = message["id"];
  if (!id.is_number()) return error_reply(Json(), "the message has no numeric \"id\"");
  const std::string kind = message["kind"].str_or("");
  if (kind == "start") return start(id.json());
  if (kind == "define") return define(id.json(), message["module"].str_or(""));
  if (kind == "evaluate") return evaluate(id.json(), message);
  if (kind == "analysis") return analysis(id.json(), message);
  return error_reply(id.json(),
                     "unknown kind " + shown(kind) + "; valid: start, define, evaluate, analysis");
}

}  // namespace bp::gradbench
