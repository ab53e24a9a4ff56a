// workloads/workload.h: the facts every workload states about itself, and the concepts that hold
// it to them.
//
// A workload is a struct of static facts and a nested template Run<B> that does the work on any
// backend B. There are two kinds:
//  - a scalar graph (ScalarWorkload): facts `num_grads` and `known`; Run<B> over a ScalarBackend;
//    its timed unit is phase `grad`: build the graph, forward, backward, read the gradients, reset.
//  - a model (ModelWorkload): facts `check_steps` and `corpus`; Run<B> over a TensorBackend; its
//    timed unit is phase `step`: one full training step.
// Both kinds state `name`, `times`, `sizes` and `tolerance`. No fact has a default: there is no
// base class to inherit one from, and each fact of several parts is a type without a default
// constructor. A workload that leaves a fact out or misspells one therefore does not compile:
// workloads/registry.h asserts that every workload is exactly one kind, and the compiler names
// the requirement that failed.
//
// Standard library only: the runner (harness/runner/) reads these facts without any backend.
#pragma once

#include <array>
#include <concepts>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string_view>

#include "workloads/plain_backend.h"

namespace bp {

// Evaluated at compile time (facts are constexpr): a false `ok` is a compile error that shows
// `what`.
constexpr void fact_require(bool ok, const char* what) {
  if (!ok) throw what;
}

// The sizes a workload runs at. `key` names the size in benchmark names and in --sizes
// (`nodes:1000`, `--sizes nodes=10,1000`); `min`..`max` is what --sizes accepts; `defaults` is
// what a run measures unless told otherwise. An unsized workload (`unsized`) has one instance.
struct Unsized {};
inline constexpr Unsized unsized;

struct Sizes {
  static constexpr size_t kMaxDefaults = 12;
  std::string_view key;
  std::array<int64_t, kMaxDefaults> default_values{};
  size_t num_defaults;
  int64_t min, max;

  constexpr Sizes(Unsized) : key(""), default_values{0}, num_defaults(1), min(0), max(0) {}
  constexpr Sizes(std::string_view size_key, std::initializer_list<int64_t> defaults,
                  int64_t min_size, int64_t max_size)
      : key(size_key), num_defaults(defaults.size()), min(min_size), max(max_size) {
    fact_require(!key.empty(), "Sizes: name the size (or use `unsized`)");
    fact_require(defaults.size() >= 1 && defaults.size() <= kMaxDefaults,
                 "Sizes: between 1 and kMaxDefaults default sizes");
    fact_require(min >= 1 && min <= max, "Sizes: need 1 <= min <= max");
    size_t i = 0;
    for (int64_t d : defaults) {
      fact_require(d >= min && d <= max, "Sizes: a default size is outside [min, max]");
      fact_require(i == 0 || d > default_values[i - 1], "Sizes: defaults must ascend");
      default_values[i++] = d;
    }
  }
  constexpr bool sized() const { return !key.empty(); }
  constexpr std::span<const int64_t> defaults() const {
    return {default_values.data(), num_defaults};
  }
};

// How closely a backend must agree with the reference backend on a value x:
//   |x - reference| <= rel * max(floor, |reference|).
// floor 1: relative above 1 and absolute below it (scalar graphs, whose values cross zero);
// a tiny floor: purely relative (models: losses and gradient norms are positive).
struct Tolerance {
  double rel, floor;
  constexpr Tolerance(double relative, double smallest_magnitude)
      : rel(relative), floor(smallest_magnitude) {
    fact_require(rel >= 0 && floor > 0, "Tolerance: need rel >= 0 and floor > 0");
  }
};

// Under mixed precision (--precision=bf16, products on bfloat16 operands) a model's numbers
// against float32's: u = 2^-8 (bf16's unit roundoff) on each product's operands, two products of
// a path's each layer (forward and back), so 2u per product on the deepest path, never above 2^-3
// = 32u (a deeper step, a recurrent one, loses what cancels and gains ReLUs that flip near zero:
// docs/correctness.md) and never below float32's own. depth 0: not known, the cap.
inline constexpr double kBf16Roundoff = 1.0 / 256, kBf16MostRelative = 0.125;
constexpr Tolerance bf16_tolerance(const Tolerance& fp32, int product_depth) {
  const double by_depth =
      product_depth > 0 ? 2 * 2 * kBf16Roundoff * product_depth : kBf16MostRelative;
  const double rel = by_depth < kBf16MostRelative ? by_depth : kBf16MostRelative;
  return {rel > fp32.rel ? rel : fp32.rel, fp32.floor};
}

// A backend whose bf16 products also sum in bfloat16 (torch 1.13 where it does not send them to
// oneDNN: a processor without AVX-512 BW, VL and DQ, or bench_run --isa=avx2) loses about
// sqrt(k) u a product rather than u: 0.026 relative at k = 512 and 0.051 at k = 2048 against
// oneDNN's 0.0017 (one product, dev/notes.md), and up to 0.36 on a gradient norm of
// mini_gpt_wide batch 32. Its rows are held to the float32 reference at 0.5: a sign, a factor of
// two or a missing term still shows.
inline constexpr double kBf16SumsRelative = 0.5;
constexpr Tolerance bf16_sums_tolerance(const Tolerance& fp32) {
  return {kBf16SumsRelative > fp32.rel ? kBf16SumsRelative : fp32.rel, fp32.floor};
}

// An answer known independently of any backend (a paper, the micrograd README): the value and the
// gradients of one step, and the absolute tolerance they were published at.
struct NoKnownAnswer {};
inline constexpr NoKnownAnswer no_known_answer;

struct KnownAnswer {
  static constexpr size_t kMaxGrads = 8;
  bool exists;
  double value;
  std::array<double, kMaxGrads> grads{};
  size_t num_grads;
  double tolerance;

  constexpr KnownAnswer(NoKnownAnswer) : exists(false), value(0), num_grads(0), tolerance(0) {}
  constexpr KnownAnswer(double known_value, std::initializer_list<double> known_grads,
                        double absolute_tolerance)
      : exists(true),
        value(known_value),
        num_grads(known_grads.size()),
        tolerance(absolute_tolerance) {
    fact_require(known_grads.size() <= kMaxGrads, "KnownAnswer: at most kMaxGrads gradients");
    fact_require(tolerance > 0, "KnownAnswer: state the tolerance it was published at");
    size_t i = 0;
    for (double g : known_grads) grads[i++] = g;
  }
};

// Whether a model reads the character corpus (--data), and how many tokens one window holds (the
// corpus must hold at least one more).
struct NoCorpus {};
inline constexpr NoCorpus no_corpus;

struct CorpusUse {
  int32_t context;  // tokens per window; 0: the model makes its own data
  constexpr CorpusUse(NoCorpus) : context(0) {}
  constexpr explicit CorpusUse(int32_t window_tokens) : context(window_tokens) {
    fact_require(context >= 1, "CorpusUse: a window holds at least one token");
  }
};

// The facts both kinds state.
template <class W>
concept DescribedWorkload = requires {
  requires std::same_as<decltype(W::name), const std::string_view>;
  requires std::same_as<decltype(W::times), const std::string_view>;  // what one step does
  requires std::same_as<decltype(W::sizes), const Sizes>;
  requires std::same_as<decltype(W::tolerance), const Tolerance>;
};

// A scalar graph. Its Run<B> is built as Run(backend, size) and its step writes its gradients
// into a GradSpan<W>; checked here on PlainBackend, the ScalarBackend without autodiff.
template <class W>
concept ScalarWorkload = DescribedWorkload<W> && requires {
  requires std::same_as<decltype(W::num_grads), const int>;
  requires std::same_as<decltype(W::known), const KnownAnswer>;
  requires W::num_grads >= 0 || W::num_grads == kGradsPerSize;
  requires !W::known.exists || W::known.num_grads == size_t(W::num_grads);
} && std::constructible_from<typename W::template Run<PlainBackend>, PlainBackend&,
                             int64_t>&& requires(typename W::template Run<PlainBackend> run,
                                                 PlainBackend& be, GradSpan<W> grads) {
  { run.step(be, grads) } -> std::same_as<double>;
  requires W::num_grads != kGradsPerSize || requires {
    { run.num_grads() } -> std::convertible_to<int64_t>;
  };
};

// A model. Its Run<B> is TrainingRun<B, Model> (workloads/models.h), built as
// Run(backend, size, corpus); there is no tensor backend without autodiff to check it on here,
// so every C++ backend binary instantiates it for real (harness/driver/backend_main.h).
template <class W>
concept ModelWorkload = DescribedWorkload<W> && requires {
  requires std::same_as<decltype(W::check_steps), const int>;  // training steps compared
  requires std::same_as<decltype(W::corpus), const CorpusUse>;
  requires W::check_steps >= 1;
};

// A model whose timed step is a gradient without an update (phase `grad`: an eval's tensor
// form, workloads/gradbench_tensor.h): its loss is the same at every step.
template <class W>
constexpr bool takes_no_update() {
  if constexpr (requires { W::phase; })
    return W::phase == "grad";
  else
    return false;
}

// The facts of any workload as plain values, for code that handles workloads at run time (the
// runner, the judge, the backend binaries' flag parsing).
struct WorkloadInfo {
  std::string_view name, times;
  bool model;              // false: a scalar graph
  std::string_view phase;  // "grad" (scalar graphs), "step" (models) or a model's own (`optim`)
  Sizes sizes;
  Tolerance tolerance;
  int num_grads;      // scalar graphs (kGradsPerSize: the run says); 0 for models
  KnownAnswer known;  // scalar graphs; none for models
  int check_steps;    // models; 0 for scalar graphs
  CorpusUse corpus;   // models; none for scalar graphs
  // A model whose steps get long with its size may check one training step from this size on
  // (0: never): the updates between steps are checked at its smaller sizes, and each step
  // saved in a check is a sequence of seconds at the recurrent workloads' long lengths.
  int64_t one_check_step_from = 0;
  int check_steps_at(int64_t size) const {
    return one_check_step_from > 0 && size >= one_check_step_from ? 1 : check_steps;
  }
  // Models: products (matmul, linear) on the deepest path of a step's forward, which sets the
  // check's tolerance under bf16 (bf16_tolerance; an optional fact, `product_depth`; 0: unknown).
  int product_depth = 0;
  // Models whose batch data-parallel ranks can shard (workloads/data.h's Shard): the rows of one
  // batch at a size (an optional fact, `batch_rows(size)`; null: the workload cannot be sharded).
  int32_t (*batch_rows)(int64_t size) = nullptr;
  // What the figures and tables group it with (an optional fact, `family`): by default "scalar
  // graphs" or "models". A family's workloads share a panel, so a new workload is drawn with its
  // kind's family until it names its own.
  std::string_view family = "";
};

template <class W>
constexpr std::string_view workload_family(std::string_view by_kind) {
  if constexpr (requires { W::family; }) return W::family;
  return by_kind;
}

template <class W>
constexpr WorkloadInfo info_of() {
  if constexpr (ModelWorkload<W>) {
    WorkloadInfo info{W::name, W::times,        true,           "step",   W::sizes, W::tolerance,
                      0,       no_known_answer, W::check_steps, W::corpus};
    if constexpr (requires { W::one_check_step_from; })
      info.one_check_step_from = W::one_check_step_from;
    if constexpr (requires { W::phase; }) info.phase = W::phase;  // what its step times
    if constexpr (requires { W::product_depth; }) info.product_depth = W::product_depth;
    if constexpr (requires { W::batch_rows(int64_t(1)); }) info.batch_rows = &W::batch_rows;
    info.family = workload_family<W>("models");
    return info;
  } else {
    WorkloadInfo info{W::name,      W::times,     false,    "grad", W::sizes,
                      W::tolerance, W::num_grads, W::known, 0,      no_corpus};
    info.family = workload_family<W>("scalar graphs");
    return info;
  }
}

}  // namespace bp
