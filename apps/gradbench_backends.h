// apps/gradbench_backends.h: the backends bp_gradbench offers GradBench, as Backends policies of
// harness/gradbench/tool.h: our engine's eager tape (`scalar`) and compiled scalar program
// (`compiled`) on every eval; our eager tensor graph (`engine`), its compiled mode
// (`compiled_tensor`) and libtorch's ops (`libtorch`) on the tensor forms of lstm and gmm.
// libtorch runs in a binary of its own, bp_gradbench_libtorch (apps/bp_gradbench_libtorch.cc),
// so that bp_gradbench links no libtorch and no dialect library sits beside libtorch's BLAS.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

#include "harness/gradbench/tool.h"

namespace bp::gradbench {

inline constexpr std::string_view kOurBackends =
    "scalar, compiled, engine, compiled_tensor, libtorch";
inline bool tensor_form_backend(std::string_view b) {
  return b == "engine" || b == "compiled_tensor" || b == "libtorch";
}
inline bool our_backend(std::string_view b) {
  return b == "scalar" || b == "compiled" || tensor_form_backend(b);
}

// bp_gradbench's: our engine's backend types, the eager tape and graph in float (Eager:
// EngineBackend) and double (EagerDouble: EngineDoubleBackend), the compiled mode likewise
// (CompiledBackend, CompiledDoubleBackend); libtorch is handed to bp_gradbench_libtorch before a
// session starts. The scalar forms are double whatever the precision.
template <class Eager, class EagerDouble, class Compiled, class CompiledDouble>
struct EngineBackends {
  static constexpr std::string_view kNames = kOurBackends;
  static bool known(std::string_view b) { return our_backend(b); }
  static bool runs_tensor_forms(std::string_view b) { return tensor_form_backend(b); }
  template <class W>
  static Evaluation gradient(const std::string& backend, Precision p, JsonView input) {
    if (backend == "scalar") return gradbench::gradient<W, Eager>(input);
    if (backend == "compiled") return gradbench::gradient<W, Compiled>(input);
    if constexpr (kHasTensorForm<W>) {
      const bool in_double = p == Precision::float64;
      if (backend == "engine")
        return in_double ? tensor_gradient<W, EagerDouble>(input)
                         : tensor_gradient<W, Eager>(input);
      if (backend == "compiled_tensor")
        return in_double ? tensor_gradient<W, CompiledDouble>(input)
                         : tensor_gradient<W, Compiled>(input);
    }
    throw std::invalid_argument("--backend " + backend + " is not in this binary");
  }
};

// bp_gradbench_libtorch's: libtorch's ops on the tensor forms, in float64 (Double) or float32
// (Float), nothing else.
template <class Float, class Double>
struct LibtorchBackends {
  static constexpr std::string_view kNames = kOurBackends;
  static bool known(std::string_view b) { return our_backend(b); }
  static bool runs_tensor_forms(std::string_view b) { return tensor_form_backend(b); }
  template <class W>
  static Evaluation gradient(const std::string& backend, Precision p, JsonView input) {
    if constexpr (kHasTensorForm<W>)
      if (backend == "libtorch")
        return p == Precision::float64 ? tensor_gradient<W, Double>(input)
                                       : tensor_gradient<W, Float>(input);
    throw std::invalid_argument("--backend " + backend + " is not in this binary");
  }
};

}  // namespace bp::gradbench
