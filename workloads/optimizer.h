// workloads/optimizer.h: the optimizer alone (phase `optim`), written once for every
// TensorBackend: `optim/adamw/params:N`, one AdamW step over N parameters.
//
// The parameters are 10 tensors of (N/1000, 100), a model's worth of layers; their gradients are
// made once at setup, by a backward through a cross-entropy over every one of them, and kept:
// each timed step is the backend's optimizer_step() alone (our engine's check of every gradient
// and one pass, engine/core/optimizer.h; torch::optim::AdamW; torch.optim.AdamW(foreach=True)).
// The check compares the loss at the parameters each update reached, so the updates themselves
// are checked across backends. The memory-bandwidth bound of the same bytes is the `bound`
// variant (bench_engine --optimizer=stream): 16 bytes read and 12 written per parameter.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string_view>
#include <vector>

#include "workloads/backend.h"
#include "workloads/data.h"
#include "workloads/models.h"
#include "workloads/workload.h"

namespace bp {

// A training run whose timed step is the update alone, from the gradients of one backward made
// at setup (and again by the check's step 0).
template <TensorBackend B, class Model>
struct UpdateRun : TrainingRun<B, Model> {
  UpdateRun(B& be, int64_t size, const Corpus& corpus) : TrainingRun<B, Model>(be, size, corpus) {
    be.zero_grad();
    this->forward_backward(be, 0);
    be.end_step();
  }
  double step(B& be) {
    be.optimizer_step();
    be.end_step();
    return 0;
  }
  // The check's training step: the update, then the loss where it took the parameters.
  double check_step(B& be) {
    be.optimizer_step();
    be.end_step();
    const double loss = be.loss_value(this->loss(be, 0));
    be.end_step();
    return loss;
  }
};

struct AdamWUpdate {
  static constexpr int32_t tensors = 10, cols = 100, classes = cols;
  static constexpr std::string_view name = "adamw";
  static constexpr std::string_view family = "optimizer";
  static constexpr std::string_view phase = "optim";
  static constexpr std::string_view times =
      "one AdamW update of N parameters in 10 tensors of (N/1000, 100), from gradients made at "
      "setup: the optimizer step alone";
  static constexpr Sizes sizes{"params", {100000, 1000000, 10000000}, 1000, 2000000000};
  static constexpr Tolerance tolerance = kModelTolerance;
  static constexpr int check_steps = 10;
  static constexpr CorpusUse corpus = no_corpus;

  template <TensorBackend B>
  struct Model : ParamList<B> {
    using Tn = typename B::Tensor;
    int32_t rows;
    std::vector<typename B::Indices> targets;
    Model(B& be, int64_t params, const Corpus&)
        : rows(int32_t(std::max<int64_t>(1, params / 1000))) {
      SplitMix64 rng{0x5eed0009};
      for (int32_t t = 0; t < tensors; t++) {
        this->make(be, rows, cols, uniform_init(rng, size_t(rows) * cols, 1.0));
        std::vector<int32_t> y(static_cast<size_t>(rows));
        for (int32_t& c : y) c = int32_t(rng.below(classes));
        targets.push_back(be.indices(y));
      }
      be.use_adamw(AdamW{});
    }
    // The sum over the tensors of each one's mean cross-entropy, as logits (rows, 100).
    Tn loss(B& be, size_t) {
      Tn sum = be.cross_entropy(this->params[0], targets[0]);
      for (int32_t t = 1; t < tensors; t++)
        sum = be.add(sum, be.cross_entropy(this->params[size_t(t)], targets[size_t(t)]));
      return sum;
    }
  };
  template <TensorBackend B>
  using Run = UpdateRun<B, Model<B>>;
};

}  // namespace bp
