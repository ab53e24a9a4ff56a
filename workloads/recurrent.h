// workloads/recurrent.h: the recurrent workloads (char_rnn, char_rnn_wide): a character-level
// tanh RNN trained over one long sequence, written once for every TensorBackend. The size is the
// sequence length n, the axis along which backpropagation through time costs memory.
//
//   h_0 = 0                                              (B, H)
//   h_{t+1} = tanh(E[x_t] + h_t W_h^T + b_h)             E (V, H), W_h (H, H), b_h (1, H)
//   loss = sum over t of cross_entropy(h_{t+1} W_y^T + b_y, x_{t+1})    W_y (V, H), b_y (1, V)
// AdamW, whose update does not grow with the gradient (a sum over n steps grows with n).
//
// Why a tanh RNN and not a GRU: every op it needs (embedding, linear, add, tanh, cross-entropy) is
// already an op of every backend, so the comparison is of how each goes back through time, not of
// a new op; and like a GRU's, its whole state is (B, H), which is what checkpointing stores.
//
// The model states one step: `cell` (state t to state t+1) and `step_loss` (step t's term of the
// loss); `loss` unrolls them over the whole sequence, which autograd then reverses keeping every
// state (store-all). A backend with its own way back through time (`through_time`: our engine's
// Revolve and multistage checkpointing, engine/checkpoint/checkpoint.h; libtorch's segment
// recomputation) calls cell and step_loss itself, in its own order.
//
// The sequence: B rows of text, each from a random offset of the corpus; step t reads column
// t mod kRnnColumns of them. The inputs are thus the same size at any n, so that peak memory
// against n measures how backpropagation keeps states, not the data. Every training step trains on
// the same sequence.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "workloads/backend.h"
#include "workloads/data.h"
#include "workloads/models.h"
#include "workloads/workload.h"

namespace bp {

inline constexpr int32_t kRnnColumns = 256;  // distinct input columns; step t reads t mod this

struct RnnShape {
  int32_t hidden, batch;
};

template <TensorBackend B, RnnShape cfg>
struct RnnModel : ParamList<B> {
  using Tn = typename B::Tensor;
  static constexpr int32_t batch = cfg.batch, hidden = cfg.hidden;  // the state is (B, H)
  int64_t length;                                                   // n, the steps of a sequence
  Tn table, w_h, b_h, w_y, b_y;  // E (V, H), W_h (H, H), b_h (1, H), W_y (V, H), b_y (1, V)
  Tn h0;                         // (B, H) zeros
  std::vector<typename B::Indices> ids, targets;  // per column: (B) tokens and the next ones

  RnnModel(B& be, int64_t steps, const Corpus& corpus) : length(steps) {
    if (steps < 1) {  // every strategy refuses alike (engine/checkpoint/checkpoint.h too)
      std::fprintf(stderr, "RnnModel: a sequence of length %lld; need at least 1 step\n",
                   (long long)steps);
      std::exit(2);
    }
    SplitMix64 rng{0x5eed0004};
    const int32_t V = corpus.vocab_size, H = hidden;
    table = this->make(be, V, H, uniform_init(rng, size_t(V) * H, 1.0));
    w_h = this->weight(be, rng, H, H), b_h = this->zeros(be, H);
    w_y = this->weight(be, rng, V, H), b_y = this->zeros(be, V);
    h0 = be.constant(batch, H, as_reals<B>(constant_init(size_t(batch) * H, 0)));
    TokenBatch rows = sample_batch(corpus, rng, batch, kRnnColumns);  // (B, kRnnColumns) each
    std::vector<int32_t> column(batch), next(batch);
    for (int32_t c = 0; c < kRnnColumns; c++) {
      for (int32_t b = 0; b < batch; b++) {
        column[b] = rows.ids[size_t(b) * kRnnColumns + c];
        next[b] = rows.targets[size_t(b) * kRnnColumns + c];
      }
      ids.push_back(be.indices(column));
      targets.push_back(be.indices(next));
    }
    be.use_adamw(AdamW{});
  }

  Tn initial_state() const { return h0; }
  Tn cell(B& be, Tn h, int64_t t) {  // h_t (B, H) -> h_{t+1} (B, H)
    return be.tanh(be.add(be.embedding(table, ids[t % kRnnColumns]), be.linear(h, w_h, b_h)));
  }
  Tn step_loss(B& be, Tn h_next, int64_t t) {  // logits (B, V): step t predicts x_{t+1}
    return be.cross_entropy(be.linear(h_next, w_y, b_y), targets[t % kRnnColumns]);
  }
  // Store-all: the whole sequence unrolled, every state kept for backward.
  Tn loss(B& be, size_t) {
    Tn h = cell(be, h0, 0);
    Tn total = step_loss(be, h, 0);
    for (int64_t t = 1; t < length; t++) {
      h = cell(be, h, t);
      total = be.add(total, step_loss(be, h, t));
    }
    return total;
  }
};

inline constexpr int kRnnCheckSteps = 3;
// From 10^4 steps on, the check trains one step (step 0, again, on a fresh setup: three
// sequences instead of five); AdamW's updates are checked at the shorter lengths.
inline constexpr int64_t kRnnOneCheckStepFrom = 10000;

// Narrow: H = 64, B = 8, a 2 KiB state; lengths up to a million (--sizes length=...). The
// default sweep's 10^5 runs on our engine's strategies only (the torch backends stop at 10^4 by
// default: harness/runner/backends.h, default_sizes_up_to).
struct CharRnn {
  static constexpr RnnShape shape{64, 8};
  static constexpr std::string_view name = "char_rnn";
  static constexpr std::string_view family = "recurrent";
  static constexpr std::string_view times =
      "one AdamW training step of a tanh RNN (H = 64, batch 8) over a sequence of n characters: "
      "zero grads, forward, cross-entropy summed over the steps, backward through time, update";
  static constexpr Sizes sizes{"length", {100, 1000, 10000, 100000}, 1, 1000000};
  static constexpr Tolerance tolerance = kModelTolerance;
  static constexpr int check_steps = kRnnCheckSteps;
  static constexpr int64_t one_check_step_from = kRnnOneCheckStepFrom;
  static constexpr CorpusUse corpus{kRnnColumns};
  template <TensorBackend B>
  using Run = TrainingRun<B, RnnModel<B, shape>>;
};

// Wide: H = 512, B = 32, a 64 KiB state; a step costs 40 times a narrow one, so the default
// sweep has one length (100) and the longer ones are asked for (--sizes length=1000,10000).
struct CharRnnWide {
  static constexpr RnnShape shape{512, 32};
  static constexpr std::string_view name = "char_rnn_wide";
  static constexpr std::string_view family = "recurrent";
  static constexpr std::string_view times =
      "one AdamW training step of a tanh RNN (H = 512, batch 32) over a sequence of n "
      "characters: zero grads, forward, cross-entropy summed over the steps, backward through "
      "time, update";
  static constexpr Sizes sizes{"length", {100}, 1, 1000000};
  static constexpr Tolerance tolerance = kModelTolerance;
  static constexpr int check_steps = kRnnCheckSteps;
  static constexpr int64_t one_check_step_from = kRnnOneCheckStepFrom;
  static constexpr CorpusUse corpus{kRnnColumns};
  template <TensorBackend B>
  using Run = TrainingRun<B, RnnModel<B, shape>>;
};

}  // namespace bp
