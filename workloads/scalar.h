// workloads/scalar.h: the scalar-graph workloads, each written once for every ScalarBackend.
//
// Each is a struct of facts (workloads/workload.h: every one required) and a nested Run<B>: the
// constructor creates the parameters (untimed), `step` is the timed unit: build the graph, forward,
// backward, read the parameters' gradients into `grads`, reset the backend. It returns the root's
// value, which the harness compares across backends (harness/runner/judge.h).
//
// To add one: copy TinyGraph below, rename it, list it in workloads/registry.h, and write the same
// function for the Python backends in baselines/pytorch/pytorch_models.py. The tests pick it up
// from the registry (finite differences, libtorch, every backend's check); nothing else changes.
#pragma once

#include <span>
#include <string_view>

#include "workloads/backend.h"
#include "workloads/workload.h"

namespace bp {

// Both sides in double: agreement to 1e-9, relative above 1 and absolute below (values cross 0).
inline constexpr Tolerance kScalarGraphTolerance{1e-9, 1.0};

// The floor: a step that does nothing, so each backend's fixed cost in time and memory is shown
// rather than silently subtracted.
struct EmptyStep {
  static constexpr std::string_view name = "empty";
  static constexpr std::string_view times = "nothing: an empty step (the timing loop's floor)";
  static constexpr Sizes sizes = unsized;
  static constexpr Tolerance tolerance = kScalarGraphTolerance;
  static constexpr int num_grads = 0;
  static constexpr KnownAnswer known = no_known_answer;

  template <ScalarBackend B>
  struct Run {
    Run(B&, int64_t) {}
    double step(B&, std::span<double, num_grads>) { return 0.0; }
  };
};

// The tiny graph of the BurTorch paper (arXiv 2503.13795, section on small compute graphs).
struct TinyGraph {
  static constexpr std::string_view name = "tiny_graph";
  static constexpr std::string_view times =
      "build g = ((a+b) - (a*b + b^3))^2 / 2, forward, backward, read dg/da and dg/db, reset";
  static constexpr Sizes sizes = unsized;
  static constexpr Tolerance tolerance = kScalarGraphTolerance;
  static constexpr int num_grads = 2;
  static constexpr KnownAnswer known{612.5, {-35.0, 1050.0}, 1e-9};

  template <ScalarBackend B>
  struct Run {
    using S = typename B::Scalar;
    S a, b;
    Run(B& be, int64_t) : a(be.param(-41.0)), b(be.param(2.0)) {}
    double step(B& be, std::span<double, num_grads> grads) {
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
// the known answer's tolerance.
struct SmallGraph {
  static constexpr std::string_view name = "small_graph";
  static constexpr std::string_view times =
      "build micrograd's README expression (a=-4, b=2), forward, backward, read dg/da and dg/db, "
      "reset";
  static constexpr Sizes sizes = unsized;
  static constexpr Tolerance tolerance = kScalarGraphTolerance;
  static constexpr int num_grads = 2;
  static constexpr KnownAnswer known{24.7041, {138.8338, 645.5773}, 5e-5};

  template <ScalarBackend B>
  struct Run {
    using S = typename B::Scalar;
    S a, b;
    Run(B& be, int64_t) : a(be.param(-4.0)), b(be.param(2.0)) {}
    double step(B& be, std::span<double, num_grads> grads) {
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
// whole chain, so the cost per node can be read off directly (items_per_second counts nodes).
struct ScalarChain {
  static constexpr std::string_view name = "scalar_chain";
  static constexpr std::string_view times =
      "build a chain of `nodes` ops (x*w, x+b, tanh(x), repeated), forward, backward, read the "
      "gradients of x0, w, b, reset";
  static constexpr Sizes sizes{"nodes", {10, 100, 1000, 10000, 100000}, 1, 10'000'000};
  static constexpr Tolerance tolerance = kScalarGraphTolerance;
  static constexpr int num_grads = 3;
  // No answer from outside: checked against finite differences (workloads_test) and across
  // backends.
  static constexpr KnownAnswer known = no_known_answer;

  template <ScalarBackend B>
  struct Run {
    using S = typename B::Scalar;
    int64_t nodes;
    S x0, w, b;
    Run(B& be, int64_t n) : nodes(n), x0(be.param(0.5)), w(be.param(0.9)), b(be.param(0.1)) {}
    double step(B& be, std::span<double, num_grads> grads) {
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
