// baselines/libtorch_backend.h: libtorch 1.13 eager as a ScalarBackend (workloads/backend.h).
//
// Used the way its C++ docs recommend for scalars: each value is a 0-dim double tensor, parameters
// have requires_grad, `backward()` on the root, gradients read with `.grad().item<double>()`, and
// reset between steps by setting each parameter's gradient to undefined (set_to_none, the cheaper
// of the two ways PyTorch documents for zero_grad). Thread counts are fixed by the harness
// (harness/main_libtorch.cc) before any work.
#pragma once

#include <torch/torch.h>

#include <string_view>
#include <vector>

namespace bp {

struct LibtorchBackend {
  static constexpr std::string_view name = "libtorch";
  using Scalar = torch::Tensor;

  std::vector<torch::Tensor> params;

  Scalar param(double v) {
    params.push_back(torch::tensor(v, torch::dtype(torch::kFloat64).requires_grad(true)));
    return params.back();
  }
  Scalar pow(const Scalar& x, double k) { return torch::pow(x, k); }
  Scalar relu(const Scalar& x) { return torch::relu(x); }
  Scalar tanh(const Scalar& x) { return torch::tanh(x); }
  Scalar exp(const Scalar& x) { return torch::exp(x); }
  Scalar log(const Scalar& x) { return torch::log(x); }
  void backward(const Scalar& root) { root.backward(); }
  double value(const Scalar& x) const { return x.item<double>(); }
  // A parameter the root does not depend on has an undefined grad in libtorch; its derivative is 0.
  double grad(const Scalar& x) const {
    const torch::Tensor& g = x.grad();
    return g.defined() ? g.item<double>() : 0.0;
  }
  void reset() {
    for (auto& p : params) p.mutable_grad().reset();
  }
};

}  // namespace bp
