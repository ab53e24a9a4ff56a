// engine/compiled/trace_test.h: for the compiled mode's tests, what a few training steps of a
// workload give on a backend (its losses and gradients), bit-for-bit comparison, and the sizes
// the tests run each model workload at.
#pragma once

#include <cstring>
#include <functional>
#include <type_traits>
#include <vector>

#include "engine/backend.h"
#include "engine/compiled/backend.h"
#include "workloads/data.h"
#include "workloads/registry.h"

inline bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }
inline bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Step 0's loss and every gradient (before any update), `steps` training steps' losses, and the
// gradients of one more step at the parameters those updates reached (read_grad is the reader
// both backends share): everything a compiled step could get wrong.
template <class W, class B>
struct Trace {
  std::vector<double> losses;
  std::vector<std::vector<float>> step0_grads, grads_after_updates;
};
// `before_step(backend, s)`, if given, runs before each training step s.
template <class W, class B>
Trace<W, B> trace(int64_t size, const bp::Corpus& corpus, int steps, double budget_fraction = 0,
                  bp::Precision precision = bp::Precision::fp32,
                  const std::function<void(B&, int)>& before_step = nullptr) {
  Trace<W, B> t;
  B be;
  if constexpr (std::is_same_v<B, bp::CompiledBackend>) be.budget_fraction = budget_fraction;
  be.graph.set_precision(precision);
  typename W::template Run<B> run(be, size, corpus);
  for (int s = 0; s < steps; s++) {
    if (before_step) before_step(be, s);
    be.zero_grad();
    auto loss = run.loss(be, size_t(s) % bp::kBatches);
    be.backward(loss);
    if (s == 0)
      for (size_t i = 0; i < run.params.size(); i++) {
        std::vector<float> g(run.param_sizes[i]);
        be.read_grad(run.params[i], g);
        t.step0_grads.push_back(g);
      }
    be.optimizer_step();
    t.losses.push_back(be.loss_value(loss));
    be.end_step();
  }
  be.zero_grad();
  auto loss = run.loss(be, 0);
  be.backward(loss);
  for (size_t i = 0; i < run.params.size(); i++) {
    std::vector<float> g(run.param_sizes[i]);
    be.read_grad(run.params[i], g);
    t.grads_after_updates.push_back(g);
  }
  be.end_step();
  return t;
}

// The smallest size of each sized workload and one more: what every test here runs. Under
// AddressSanitizer (make sanitize) the smallest only: the same code paths at a tenth of the time
// (mini_gpt_wide at batch 8 alone took most of the sanitized test's 62 s).
#if defined(__SANITIZE_ADDRESS__)
inline constexpr int kSizesPerWorkload = 1;
#else
inline constexpr int kSizesPerWorkload = 2;
#endif
inline std::vector<int64_t> test_sizes(const bp::Sizes& sizes) {
  std::vector<int64_t> out;
  for (int64_t s : sizes.defaults())
    if (int(out.size()) < kSizesPerWorkload) out.push_back(s);
  return out;
}

// Every model workload; the recurrent ones at lengths up to 1000 wherever a test would take all
// default sizes (10^5 steps unrolled is 1.4 million instructions, and the plan's check below
// compares every pair of buffers).
template <class W>
constexpr bool recurrent() {
  return bp::RecurrentModel<typename W::template Run<bp::CompiledBackend>, bp::CompiledBackend>;
}
// test_sizes, but 8 steps for a recurrent workload under AddressSanitizer (as workloads_test),
// and 64 characters of lstm_tensor: each character repeats the same 40 ops (1024 took a minute of
// the thread test's 12 configurations).
template <class W>
std::vector<int64_t> model_test_sizes() {
#if defined(__SANITIZE_ADDRESS__)
  if constexpr (recurrent<W>()) return {8};
#endif
  if constexpr (W::name == bp::LstmTensor::name) return {64};
  return test_sizes(W::sizes);
}
