// workloads/data.h: the numbers every backend receives: a portable generator, weight init, and
// batches cut from a character corpus.
//
// Same numbers in: weights and batches are produced here as plain floats and int32 ids, then
// copied into each backend, so the check can compare losses and gradients. splitmix64 (Steele,
// Lea, Flood 2014) is a few lines in any language, so a Python backend can reproduce it exactly.
// The corpus is read as bytes; the vocabulary is the set of byte values present, in byte order.
#pragma once

#include <sys/stat.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

namespace bp {

// The model workloads' default corpus: Debian's wamerican word list (harness/install-deps.sh).
inline constexpr const char* kDefaultCorpus = "/usr/share/dict/words";

struct SplitMix64 {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double uniform() { return double(next() >> 11) * 0x1.0p-53; }  // [0, 1)
  int64_t below(int64_t n) { return int64_t(uniform() * double(n)); }
};

// n floats uniform in [-bound, bound): PyTorch's default init for nn.Linear uses
// bound = 1/sqrt(fan_in) (Kaiming-uniform with a=sqrt(5) reduces to it).
inline std::vector<float> uniform_init(SplitMix64& rng, size_t n, double bound) {
  std::vector<float> v(n);
  for (float& x : v) x = float((2 * rng.uniform() - 1) * bound);
  return v;
}
inline std::vector<float> constant_init(size_t n, float value) {
  return std::vector<float>(n, value);
}

struct Corpus {
  std::string path;
  std::vector<uint8_t> tokens;  // the file's bytes mapped to 0..vocab_size-1, one byte each
  int32_t vocab_size = 0;
};

// Reads `path` as bytes. Throws std::runtime_error with a message for the user if the file cannot
// be read or has fewer than `min_bytes` bytes.
inline Corpus load_corpus(const std::string& path, size_t min_bytes) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) throw std::runtime_error("--data=" + path + ": cannot open it");
  // A directory opens and claims a size of LONG_MAX: only a regular file's size is its length.
  struct stat st {};
  if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
    std::fclose(f);
    throw std::runtime_error("--data=" + path + ": not a regular file" +
                             (S_ISDIR(st.st_mode) ? " (a directory)" : ""));
  }
  Corpus c;
  c.path = path;
  // Read in place, sized once: the corpus is the largest thing some engine processes hold. A file
  // that claims no size (/proc, /sys: generated as it is read) is read on to its end in chunks.
  c.tokens.resize(size_t(st.st_size));
  const size_t got = c.tokens.empty() ? 0 : std::fread(c.tokens.data(), 1, c.tokens.size(), f);
  c.tokens.resize(got);
  uint8_t chunk[1 << 16];
  for (size_t n; (n = std::fread(chunk, 1, sizeof chunk, f)) > 0;)
    c.tokens.insert(c.tokens.end(), chunk, chunk + n);
  const bool failed = std::ferror(f);
  std::fclose(f);
  if (failed) throw std::runtime_error("--data=" + path + ": cannot read it");
  if (c.tokens.empty()) throw std::runtime_error("--data=" + path + ": the file is empty");
  if (c.tokens.size() < min_bytes)
    throw std::runtime_error("--data=" + path + ": has " + std::to_string(c.tokens.size()) +
                             " bytes; the selected workloads need at least " +
                             std::to_string(min_bytes) + " (context length + 1)");
  uint8_t id_of[256];
  bool present[256] = {};
  for (uint8_t b : c.tokens) present[b] = true;
  for (int b = 0; b < 256; b++) id_of[b] = present[b] ? uint8_t(c.vocab_size++) : 0;
  for (uint8_t& b : c.tokens) b = id_of[b];
  return c;
}

// One batch of `batch` windows of `context` tokens at random offsets, each predicting the token
// after every position: ids (batch*context), targets (batch*context). A model that predicts only
// the next token after the window (char_mlp) uses the last target of each window.
struct TokenBatch {
  std::vector<int32_t> ids, targets;
};

inline TokenBatch sample_batch(const Corpus& c, SplitMix64& rng, int32_t batch, int32_t context) {
  TokenBatch b;
  const int64_t windows = int64_t(c.tokens.size()) - context;  // load_corpus checked > 0
  for (int32_t i = 0; i < batch; i++) {
    const int64_t at = rng.below(windows);
    for (int32_t t = 0; t < context; t++) {
      b.ids.push_back(c.tokens[at + t]);
      b.targets.push_back(c.tokens[at + t + 1]);
    }
  }
  return b;
}

// Data parallel (engine/distributed/): which rows of every global batch this process trains on.
// Each rank takes an equal, contiguous shard, in rank order: strong scaling splits the workload's
// batch over the ranks; weak scaling makes the global batch ranks times it, so each rank keeps
// the workload's batch. Every rank draws the whole global batch from the same seeds and keeps its
// rows, so one process (rank 0 of 1) sees exactly the batches it always did.
struct Shard {
  int rank = 0, ranks = 1;
  bool weak = false;
  int32_t global_rows(int32_t batch) const { return weak ? batch * ranks : batch; }
  int32_t rows(int32_t batch) const { return global_rows(batch) / ranks; }
  // This shard's rows of v, which holds global_rows(batch) rows of per_row values.
  template <class T>
  std::vector<T> slice(const std::vector<T>& v, int32_t batch, size_t per_row) const {
    const size_t first = size_t(rows(batch)) * rank * per_row;
    return std::vector<T>(v.begin() + first, v.begin() + first + size_t(rows(batch)) * per_row);
  }
  // Why a batch cannot be split so (empty: it can).
  std::string refusal(int32_t batch) const {
    if (weak || batch % ranks == 0) return "";
    return "a batch of " + std::to_string(batch) + " rows does not split evenly into " +
           std::to_string(ranks) + " ranks (--scaling=weak keeps each rank's batch whole)";
  }
};
// The shard of the workloads this process makes: set once by a driver of ranks before any
// workload is made; everything else keeps the whole batch.
inline Shard& process_shard() {
  static Shard s;
  return s;
}

}  // namespace bp
