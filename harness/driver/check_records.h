// harness/driver/check_records.h: the correctness check of one instance on this backend, as the
// raw numbers of harness/common/protocol.h's records. Nothing is judged here: the runner's judge
// (harness/runner/judge.h) compares the records of every backend.
#pragma once

#include <array>
#include <chrono>
#include <cmath>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "harness/common/json.h"
#include "harness/driver/timed_loops.h"

namespace bp {

inline double check_seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// A scalar graph: the first step of a setup and the step after its reset.
template <class W, class B>
Json check_scalar_graph(const BackendProcess<B>& p, const InstanceSpec& spec) {
  const std::string fault = inject_fault(spec.name, true);
  const double wrong = check_offset(fault);
  const auto start = std::chrono::steady_clock::now();
  B backend;
  p.configure(backend);
  typename W::template Run<B> run(backend, *spec.size);
  auto grads = grads_storage<W>(run);
  const std::vector<int64_t> checked = checked_grad_indices(int64_t(grads.size()));
  auto one_step = [&](double offset) {
    const double value = p.template scalar_step<W>(backend, run, GradSpan<W>(grads)) + offset;
    std::vector<double> kept;
    for (int64_t i : checked) kept.push_back(grads[i]);
    Json step = Json::object({{"value", value}, {"grads", json_numbers(kept)}});
    if (int64_t(grads.size()) > kCheckedGrads) {  // a sample: which parameters, of how many
      step["grad_of"] = json_numbers(std::vector<double>(checked.begin(), checked.end()));
      step["num_grads"] = double(grads.size());
    }
    return step;
  };
  Json first = one_step(wrong);
  Json second = one_step(wrong + (fault == "reset" ? 1.0 : 0.0));
  return Json::object({{"name", spec.name},
                       {"status", "ok"},
                       {"step", std::move(first)},
                       {"step_after_reset", std::move(second)},
                       {"step_seconds", check_seconds_since(start) / 2}});
}

// Step 0 up to the gradients: its loss and every parameter's gradient norm (in double).
template <class B, class Run>
Json model_step0(B& be, Run& run, double offset) {
  be.zero_grad();
  const double loss = run.forward_backward(be, 0);
  Json norms = Json::array();
  std::vector<typename B::Real> g;
  for (size_t i = 0; i < run.params.size(); i++) {
    g.resize(run.param_sizes[i]);
    be.read_grad(run.params[i], g);
    double sq = 0;
    for (const double v : g) sq += v * v;
    norms.push_back(std::sqrt(sq));
  }
  return Json::object({{"loss", loss + offset}, {"grad_norms", norms}});
}

// A model: step 0, step 0 again on the same setup, the training losses, and step 0 on a second
// setup made after the first one trained (state leaking between setups would show).
template <class W, class B>
Json check_model(const BackendProcess<B>& p, const InstanceSpec& spec) {
  const std::string fault = inject_fault(spec.name, true);
  const double wrong = check_offset(fault);
  const double broken_reset = fault == "reset" ? 1.0 : 0.0;
  const auto start = std::chrono::steady_clock::now();
  Json record = Json::object({{"name", spec.name}, {"status", "ok"}});
  std::vector<double> losses;
  {
    B backend;
    p.configure(backend);
    auto run = p.template make_run<W>(backend, *spec.size);
    Json first = model_step0(backend, *run, wrong);
    backend.end_step();  // no update: the same step again must give the same numbers
    Json again = model_step0(backend, *run, wrong + broken_reset);
    losses.push_back(JsonView(first)["loss"].num_or(NAN));
    backend.optimizer_step();
    backend.end_step();
    run->next_batch = 1;
    for (int s = 1; s < spec.check_steps; s++) {
      if constexpr (requires { run->check_step(backend); })  // a step that returns no loss
        losses.push_back(run->check_step(backend) + wrong);
      else
        losses.push_back(run->step(backend) + wrong);
    }
    record["step0"] = std::move(first), record["step0_after_reset"] = std::move(again);
    if constexpr (requires { backend.bf16_sums; })  // libtorch: what autocast's products sum in
      if (backend.bf16_sums) record["bf16_sums"] = backend.bf16_sums;
  }
  B backend;
  p.configure(backend);
  auto run = p.template make_run<W>(backend, *spec.size);
  record["step0_fresh_setup"] = model_step0(backend, *run, wrong);
  backend.end_step();
  record["step_seconds"] = check_seconds_since(start) / (spec.check_steps + 2);
  record["losses"] = json_numbers(losses);
  return record;
}

}  // namespace bp
