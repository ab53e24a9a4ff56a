// baselines/libtorch/shim/torch/csrc/distributed/autograd/context/context.h: the two names
// c10d/reducer.hpp takes from this header, which Debian's libtorch-dev 1.13 leaves out (it ships
// torch/csrc/distributed/c10d/ but not distributed/autograd/). The Reducer keeps a pointer to the
// context (RPC's distributed autograd, which bench_libtorch never uses) and checks that its
// gradient callback is this type; nothing here is defined or made. Only bench_libtorch's include
// path has it (CMakeLists.txt).
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>
#include <memory>

namespace torch::distributed::autograd {
class DistAutogradContext {
 public:
  using GradCallback = std::function<bool(at::Tensor&)>;
};
using ContextPtr = std::shared_ptr<DistAutogradContext>;
}  // namespace torch::distributed::autograd
