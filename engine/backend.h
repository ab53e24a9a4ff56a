// engine/backend.h: our engine as a ScalarBackend (workloads/backend.h), in double precision.
//
// A thin adapter: the tape does the work. It holds the tape by value, so one backend object is
// one arena; the harness makes one per benchmark.
#pragma once

#include <string_view>

#include "engine/scalar.h"

namespace bp {

struct EngineBackend {
  static constexpr std::string_view name = "engine";
  using Scalar = bp::Scalar<double>;

  ScalarTape<double> tape;

  Scalar param(double v) { return tape.param(v); }
  Scalar pow(Scalar x, double k) { return x.pow(k); }
  Scalar relu(Scalar x) { return x.relu(); }
  Scalar tanh(Scalar x) { return x.tanh(); }
  Scalar exp(Scalar x) { return x.exp(); }
  Scalar log(Scalar x) { return x.log(); }
  void backward(Scalar root) { tape.backward(root); }
  double value(Scalar x) const { return x.value(); }
  double grad(Scalar x) const { return x.grad(); }
  void reset() { tape.reset(); }

  size_t arena_bytes() const { return tape.arena_bytes(); }  // reported as a counter
};

}  // namespace bp
