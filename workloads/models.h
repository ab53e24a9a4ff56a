// workloads/models.h: the model workloads (char_mlp, mini_gpt, mini_gpt_wide, mlp_width), each
// written once for every TensorBackend.
//
// The timed unit of each is one full training step: zero grads, forward, loss, backward,
// optimizer update (and reading the loss). Weights and batches are made at setup from fixed seeds
// (workloads/data.h) and copied into the backend; a step picks the next of kBatches prepared
// batches, so no sampling happens inside the timed region and every backend sees the same batches.
//
// Each is a struct of facts (workloads/workload.h: every one required) and Run<B> =
// TrainingRun<B, Model<B>>, where Model<B> builds the parameters and batches and defines the loss.
// To add a model: copy MlpWidth below, rename it, list it in workloads/registry.h, and write the
// same model as an nn.Module in baselines/pytorch/pytorch_models.py. The tests pick it up from the
// registry (libtorch against our engine, every backend's check); nothing else changes.
#pragma once

#include <array>
#include <cmath>
#include <span>
#include <string_view>
#include <vector>

#include "workloads/backend.h"
#include "workloads/data.h"
#include "workloads/workload.h"

namespace bp {

inline constexpr size_t kBatches = 16;  // prepared batches a run cycles through

// float32 on every backend, summed in different orders: step-0 values agree to ~1e-6 and the
// difference grows through training (measured max 2.5e-5 over 50 steps); purely relative.
inline constexpr Tolerance kModelTolerance{2e-3, 1e-12};

// The training loop shared by every model: Model<B> provides `params` and `loss(be, batch)`.
template <TensorBackend B, class Model>
struct TrainingRun : Model {
  using Model::Model;
  size_t next_batch = 0;

  double step(B& be) {
    be.zero_grad();
    const double value = forward_backward(be, next_batch++ % kBatches);
    be.optimizer_step();
    be.end_step();
    return value;
  }
  // Batch i's loss, and every gradient. A recurrent model on a backend that goes back through
  // time its own way (workloads/recurrent.h) is handed to it; otherwise autograd reverses `loss`.
  double forward_backward(B& be, size_t i) {
    if constexpr (requires(Model & m) { be.through_time(m); }) {
      return be.through_time(static_cast<Model&>(*this));
    } else {
      auto loss = this->loss(be, i);
      be.backward(loss);
      return be.loss_value(loss);
    }
  }
};

// Parameters are created through this so that their sizes are known for read_grad.
template <TensorBackend B>
struct ParamList {
  std::vector<typename B::Tensor> params;
  std::vector<size_t> param_sizes;
  template <class From>  // float32 weights, or an eval's doubles
  typename B::Tensor make(B& be, int32_t rows, int32_t cols, const std::vector<From>& init) {
    params.push_back(be.param(rows, cols, as_reals<B>(init)));
    param_sizes.push_back(size_t(rows) * cols);
    return params.back();
  }
  // nn.Linear's shape (out, in) and default init bound 1/sqrt(in); biases start at zero.
  typename B::Tensor weight(B& be, SplitMix64& rng, int32_t out, int32_t in) {
    return make(be, out, in, uniform_init(rng, size_t(out) * in, 1 / std::sqrt(double(in))));
  }
  typename B::Tensor zeros(B& be, int32_t cols) {
    return make(be, 1, cols, constant_init(cols, 0));
  }
  typename B::Tensor ones(B& be, int32_t cols) { return make(be, 1, cols, constant_init(cols, 1)); }
};

// Bengio et al. 2003, as in Karpathy's makemore part 2: 16 characters of context, each embedded
// in 64 dimensions and concatenated, one tanh hidden layer, logits over the vocabulary, mean
// cross-entropy over a batch of 64 examples, plain SGD. hidden=1024 is the BurTorch paper's
// configuration (1.08 M parameters with its 27-symbol vocabulary; 1.13 M with the 71 byte values
// of /usr/share/dict/words).
struct CharMlp {
  static constexpr int32_t context = 16, embed = 64, batch = 64;
  static constexpr std::string_view name = "char_mlp";
  static constexpr std::string_view family = "MLPs";
  static constexpr std::string_view times =
      "one SGD training step: zero grads, embed 16 characters x 64, tanh hidden layer, logits, "
      "mean cross-entropy over 64 examples, backward, update";
  static constexpr Sizes sizes{"hidden", {64, 256, 1024}, 1, 16384};
  static constexpr Tolerance tolerance = kModelTolerance;
  static constexpr int product_depth = 2;
  static constexpr int check_steps = 10;
  static constexpr CorpusUse corpus{context};
  static constexpr int32_t batch_rows(int64_t) { return batch; }  // ranks shard the 64 examples

  template <TensorBackend B>
  struct Model : ParamList<B> {
    using Tn = typename B::Tensor;
    Tn table, w1, b1, w2, b2;
    std::vector<typename B::Indices> ids, targets;
    int32_t rows = process_shard().rows(batch);  // this process's examples of each batch
    Model(B& be, int64_t hidden, const Corpus& corpus) {
      SplitMix64 rng{0x5eed0001};
      const Shard& shard = process_shard();
      const int32_t V = corpus.vocab_size, H = int32_t(hidden);
      table = this->make(be, V, embed, uniform_init(rng, size_t(V) * embed, 1.0));
      w1 = this->weight(be, rng, H, context * embed);
      b1 = this->zeros(be, H);
      w2 = this->weight(be, rng, V, H);
      b2 = this->zeros(be, V);
      for (size_t i = 0; i < kBatches; i++) {
        const int32_t global = shard.global_rows(batch);
        TokenBatch tb = sample_batch(corpus, rng, global, context);
        std::vector<int32_t> next(global);  // the character after each window
        for (int32_t e = 0; e < global; e++)
          next[e] = tb.targets[size_t(e) * context + context - 1];
        ids.push_back(be.indices(shard.slice(tb.ids, batch, context)));
        targets.push_back(be.indices(shard.slice(next, batch, 1)));
      }
      be.use_sgd(0.1);
    }
    Tn loss(B& be, size_t i) {
      Tn x = be.view(be.embedding(table, ids[i]), rows, context * embed);  // (B, 16*64)
      Tn h = be.tanh(be.linear(x, w1, b1));                                // (B, H)
      return be.cross_entropy(be.linear(h, w2, b2), targets[i]);           // logits (B, V)
    }
  };
  template <TensorBackend B>
  using Run = TrainingRun<B, Model<B>>;
};

// A nanoGPT-style decoder (Karpathy's GPT lecture): token and position embeddings, L pre-layernorm
// blocks of causal self-attention and a 4x ReLU MLP, final layernorm, linear head without bias,
// mean cross-entropy over every position of every sequence; AdamW; no dropout.
struct GptShape {
  int32_t layers, heads, channels, context;
};

template <TensorBackend B, GptShape cfg>
struct GptModel : ParamList<B> {
  using Tn = typename B::Tensor;
  struct Block {
    Tn ln1_g, ln1_b, w_qkv, b_qkv, w_proj, b_proj, ln2_g, ln2_b, w_fc, b_fc, w_out, b_out;
  };
  int32_t batch;
  Tn wte, wpe, lnf_g, lnf_b, head;
  std::vector<Block> blocks;
  std::vector<typename B::Indices> ids, targets;
  typename B::Indices positions;  // 0..T-1 for every sequence: (B*T)

  // batch: this process's sequences of each batch (process_shard())
  GptModel(B& be, int64_t batch_size, const Corpus& corpus)
      : batch(process_shard().rows(int32_t(batch_size))) {
    SplitMix64 rng{0x5eed0002};
    const Shard& shard = process_shard();
    const int32_t V = corpus.vocab_size, C = cfg.channels, T = cfg.context;
    const double embed_bound = 0.02 * std::sqrt(3.0);  // uniform with nanoGPT's std 0.02
    wte = this->make(be, V, C, uniform_init(rng, size_t(V) * C, embed_bound));
    wpe = this->make(be, T, C, uniform_init(rng, size_t(T) * C, embed_bound));
    for (int32_t l = 0; l < cfg.layers; l++) {
      Block b;
      b.ln1_g = this->ones(be, C), b.ln1_b = this->zeros(be, C);
      b.w_qkv = this->weight(be, rng, 3 * C, C), b.b_qkv = this->zeros(be, 3 * C);
      b.w_proj = this->weight(be, rng, C, C), b.b_proj = this->zeros(be, C);
      b.ln2_g = this->ones(be, C), b.ln2_b = this->zeros(be, C);
      b.w_fc = this->weight(be, rng, 4 * C, C), b.b_fc = this->zeros(be, 4 * C);
      b.w_out = this->weight(be, rng, C, 4 * C), b.b_out = this->zeros(be, C);
      blocks.push_back(b);
    }
    lnf_g = this->ones(be, C), lnf_b = this->zeros(be, C);
    head = this->weight(be, rng, V, C);
    for (size_t i = 0; i < kBatches; i++) {
      TokenBatch tb = sample_batch(corpus, rng, shard.global_rows(int32_t(batch_size)), T);
      ids.push_back(be.indices(shard.slice(tb.ids, int32_t(batch_size), T)));
      targets.push_back(be.indices(shard.slice(tb.targets, int32_t(batch_size), T)));
    }
    std::vector<int32_t> pos(size_t(batch) * T);
    for (size_t i = 0; i < pos.size(); i++) pos[i] = int32_t(i % T);
    positions = be.indices(pos);
    be.use_adamw(AdamW{});
  }

  Tn loss(B& be, size_t i) {
    Tn x = be.add(be.embedding(wte, ids[i]), be.embedding(wpe, positions));  // (B*T, C)
    for (const Block& b : blocks) {
      Tn qkv = be.linear(be.layernorm(x, b.ln1_g, b.ln1_b), b.w_qkv, b.b_qkv);  // (B*T, 3C)
      Tn att = be.attention(qkv, batch, cfg.context, cfg.heads);                // (B*T, C)
      x = be.add(x, be.linear(att, b.w_proj, b.b_proj));
      Tn h = be.linear_relu(be.layernorm(x, b.ln2_g, b.ln2_b), b.w_fc, b.b_fc);  // (B*T, 4C)
      x = be.add(x, be.linear(h, b.w_out, b.b_out));
    }
    Tn logits = be.linear(be.layernorm(x, lnf_g, lnf_b), head);  // (B*T, V)
    return be.cross_entropy(logits, targets[i]);
  }
};

// The BurTorch paper's miniature GPT-3: 6 layers, 6 heads, embedding 24 (head size 4), context 8.
struct MiniGpt {
  static constexpr GptShape shape{6, 6, 24, 8};
  static constexpr std::string_view name = "mini_gpt";
  static constexpr std::string_view family = "transformers";
  static constexpr std::string_view times =
      "one AdamW training step of a 6-layer, 6-head, 24-channel GPT over sequences of 8 "
      "characters: zero grads, forward, mean cross-entropy over every position, backward, update";
  static constexpr Sizes sizes{"batch", {1, 8, 32, 64}, 1, 4096};
  static constexpr Tolerance tolerance = kModelTolerance;
  static constexpr int product_depth = 4 * shape.layers + 1;  // qkv, proj, fc, out a block; head
  static constexpr int check_steps = 50;  // its losses are the training curves in plots/
  static constexpr CorpusUse corpus{shape.context};
  static constexpr int32_t batch_rows(int64_t size) { return int32_t(size); }  // sequences
  template <TensorBackend B>
  using Run = TrainingRun<B, GptModel<B, shape>>;
};

// The same GPT, wider and longer (4 layers, 4 heads, embedding 128, context 64): where the
// per-op overhead stops dominating and the arithmetic does.
struct MiniGptWide {
  static constexpr GptShape shape{4, 4, 128, 64};
  static constexpr std::string_view name = "mini_gpt_wide";
  static constexpr std::string_view family = "transformers";
  static constexpr std::string_view times =
      "one AdamW training step of a 4-layer, 4-head, 128-channel GPT over sequences of 64 "
      "characters: zero grads, forward, mean cross-entropy over every position, backward, update";
  static constexpr Sizes sizes{"batch", {1, 8, 32}, 1, 4096};
  static constexpr Tolerance tolerance = kModelTolerance;
  static constexpr int product_depth = 4 * shape.layers + 1;
  static constexpr int check_steps = 10;
  static constexpr CorpusUse corpus{shape.context};
  static constexpr int32_t batch_rows(int64_t size) { return int32_t(size); }
  template <TensorBackend B>
  using Run = TrainingRun<B, GptModel<B, shape>>;
};

// A 2-layer MLP on synthetic data, width 16 to 2048: 64 inputs of `width` features, a ReLU layer
// of `width`, 10 classes, SGD. Where does libtorch's per-op overhead stop dominating?
struct MlpWidth {
  static constexpr int32_t batch = 64, classes = 10;
  static constexpr std::string_view name = "mlp_width";
  static constexpr std::string_view family = "MLPs";
  static constexpr std::string_view times =
      "one SGD training step of a 2-layer MLP (64 x width -> width -> 10, ReLU) on synthetic "
      "data: zero grads, forward, mean cross-entropy, backward, update";
  static constexpr Sizes sizes{"width", {16, 32, 64, 128, 256, 512, 1024, 2048}, 1, 8192};
  static constexpr Tolerance tolerance = kModelTolerance;
  static constexpr int product_depth = 2;
  static constexpr int check_steps = 10;
  static constexpr CorpusUse corpus = no_corpus;
  static constexpr int32_t batch_rows(int64_t) { return batch; }

  template <TensorBackend B>
  struct Model : ParamList<B> {
    using Tn = typename B::Tensor;
    Tn w1, b1, w2, b2;
    std::vector<Tn> inputs;
    std::vector<typename B::Indices> targets;
    Model(B& be, int64_t width, const Corpus&) {
      SplitMix64 rng{0x5eed0003};
      const Shard& shard = process_shard();
      const int32_t W = int32_t(width), global = shard.global_rows(batch);
      w1 = this->weight(be, rng, W, W), b1 = this->zeros(be, W);
      w2 = this->weight(be, rng, classes, W), b2 = this->zeros(be, classes);
      for (size_t i = 0; i < kBatches; i++) {
        const std::vector<float> x = uniform_init(rng, size_t(global) * W, 1.0);
        inputs.push_back(be.constant(shard.rows(batch), W, as_reals<B>(shard.slice(x, batch, W))));
        std::vector<int32_t> t(global);
        for (int32_t& y : t) y = int32_t(rng.below(classes));
        targets.push_back(be.indices(shard.slice(t, batch, 1)));
      }
      be.use_sgd(0.1);
    }
    Tn loss(B& be, size_t i) {
      Tn h = be.linear_relu(inputs[i], w1, b1);                   // (64, W)
      return be.cross_entropy(be.linear(h, w2, b2), targets[i]);  // logits (64, 10)
    }
  };
  template <TensorBackend B>
  using Run = TrainingRun<B, Model<B>>;
};

}  // namespace bp
