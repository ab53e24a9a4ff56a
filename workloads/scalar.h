// workloads/scalar.h: the scalar-graph workloads, each written once for every ScalarBackend.
//
// A workload is a struct holding what the harness needs to know without a backend (name, what is
// timed, sizes, known answers) and a nested template `Run<B>`: the constructor creates the
// parameters (untimed), `step` is the timed unit. For every scalar workload that unit is: build
// the graph, forward, backward, read the parameters' gradients into `grads`, reset the backend.
// It returns the root's value, which the harness compares across backends.
//
// To add one: copy TinyGraph, rename, list it in workloads/registry.h. Nothing else changes.
#pragma once

#include <array>
#include <span>
#include <string_view>

#include "workloads/backend.h"

namespace bp {

// Defaults for a scalar workload without a size; a workload redeclares what differs (C++ name
// hiding), so each one states only its own facts.
struct ScalarWorkloadDefaults {
  static constexpr std::string_view phase = "grad";  // gradient of a scalar graph
  static constexpr std::string_view size_key = "";
  static constexpr std::array<int64_t, 1> default_sizes = {0};
  static constexpr int64_t min_size = 0, max_size = 0;
  static constexpr const KnownAnswer* known = nullptr;
  // Across backends, both in double: relative to max(1, |reference|); see harness/run.cc.
  static constexpr double check_tolerance = 1e-9;
};

// The floor: a step that does nothing, so each backend's fixed cost in time and memory is shown
// rather than silently subtracted.
struct EmptyStep : ScalarWorkloadDefaults {
  static constexpr std::string_view name = "empty";
  static constexpr std::string_view times = "nothing: an empty step (the timing loop's floor)";
  static constexpr int num_grads = 0;

  template <ScalarBackend B>
  struct Run {
    Run(B&, int64_t) {}
    double step(B&, std::span<double>) { return 0.0; }
  };
};

// The tiny graph of the BurTorch paper (arXiv 2503.13795, section on small compute graphs).
inline constexpr KnownAnswer tiny_graph_answer{612.5, {-35.0, 1050.0}, 2, 1e-9};

struct TinyGraph : ScalarWorkloadDefaults {
  static constexpr std::string_view name = "tiny_graph";
  static constexpr std::string_view times =
      "build g = ((a+b) - (a*b + b^3))^2 / 2, forward, backward, read dg/da and dg/db, reset";
  static constexpr int num_grads = 2;
  static constexpr const KnownAnswer* known = &tiny_graph_answer;

  template <ScalarBackend B>
  struct Run {
    using S = typename B::Scalar;
    S a, b;
    Run(B& be, int64_t) : a(be.param(-41.0)), b(be.param(2.0)) {}
    double step(B& be, std::span<double> grads) {
      S c = a + b;
      S d = a * b + be.pow(b, 3.0);
      S e = c - d;
      S f = be.pow(e, 2.0);
      S g = f / 2.0;
      return finish_step(be, g, grads, a, b);
    }
  };
};

// The expression from micrograd's README; its answers are printed there to four decimals, hence
// the tolerance.
inline constexpr KnownAnswer small_graph_answer{24.7041, {138.8338, 645.5773}, 2, 5e-5};

struct SmallGraph : ScalarWorkloadDefaults {
  static constexpr std::string_view name = "small_graph";
  static constexpr std::string_view times =
      "build micrograd's README expression (a=-4, b=2), forward, backward, read dg/da and dg/db, "
      "reset";
  static constexpr int num_grads = 2;
  static constexpr const KnownAnswer* known = &small_graph_answer;

  template <ScalarBackend B>
  struct Run {
    using S = typename B::Scalar;
    S a, b;
    Run(B& be, int64_t) : a(be.param(-4.0)), b(be.param(2.0)) {}
    double step(B& be, std::span<double> grads) {
      S c = a + b;
      S d = a * b + be.pow(b, 3.0);
      c = c + (c + 1.0);
      c = c + (1.0 + c + (-a));
      d = d + (d * 2.0 + be.relu(b + a));
      d = d + (3.0 * d + be.relu(b - a));
      S e = c - d;
      S f = be.pow(e, 2.0);
      S g = f / 2.0;
      g = g + 10.0 / f;
      return finish_step(be, g, grads, a, b);
    }
  };
};

// A chain whose length is the size: node i applies (i mod 3) = 0: x*w, 1: x+b, 2: tanh(x).
// tanh keeps the value bounded at any length, and the gradients of w, b and x0 flow through the
// whole chain, so the cost per node can be read off directly (plots/ divides by `nodes`).
struct ScalarChain : ScalarWorkloadDefaults {
  static constexpr std::string_view name = "scalar_chain";
  static constexpr std::string_view times =
      "build a chain of `nodes` ops (x*w, x+b, tanh(x), repeated), forward, backward, read the "
      "gradients of x0, w, b, reset";
  static constexpr std::string_view size_key = "nodes";
  static constexpr std::array<int64_t, 5> default_sizes = {10, 100, 1000, 10000, 100000};
  static constexpr int64_t min_size = 1, max_size = 10'000'000;
  static constexpr int num_grads = 3;
  // No known answer: checked against finite differences (workloads_test) and across backends.

  template <ScalarBackend B>
  struct Run {
    using S = typename B::Scalar;
    int64_t nodes;
    S x0, w, b;
    Run(B& be, int64_t n) : nodes(n), x0(be.param(0.5)), w(be.param(0.9)), b(be.param(0.1)) {}
    double step(B& be, std::span<double> grads) {
      S x = x0;
      for (int64_t i = 0; i < nodes; i++) {
        switch (i % 3) {
          case 0: x = x * w; break;
          case 1: x = x + b; break;
          default: x = be.tanh(x); break;
        }
      }
      return finish_step(be, x, grads, x0, w, b);
    }
  };
};

}  // namespace bp
