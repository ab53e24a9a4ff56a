// engine/distributed/data_parallel.h: data-parallel training over MPI ranks, each rank a shard of
// the global batch: the gradients summed over the ranks under the backward, as PyTorch DDP and
// Horovod do, then averaged.
//
// The flat gradient buffer (engine/core/optimizer.h) is cut into buckets at parameters'
// boundaries, from its end (the parameters made last are usually the first the backward
// finishes), each at least bucket_bytes. The graph says when each parameter's gradient is final
// (TensorGraph::on_gradient_final); when a bucket's last one is, the bucket goes to this rank's
// communication thread, which sums it over the ranks (engine/distributed/ring.h: a fixed order,
// the same bits on every rank) and scales it by 1 / ranks while the backward goes on. finish()
// waits for the last bucket. Every rank then holds the same gradients, bit for bit, so the
// optimizer's check for NaN and Inf decides the same on every rank with no exchange of its own.
//
// With the optimizer sharded (ZeRO stage 1, --zero=1), each bucket is reduce-scattered instead:
// this rank ends with the mean of one chunk of every bucket (ring.h's owned_chunk), its shard.
// sharded_step() updates the shard alone, with AdamW's moments for the shard alone (1 / ranks of
// them per rank), then gathers every bucket's values from their owners. The step is the same,
// bit for bit, as the unsharded one's (the same sums, an elementwise update). A rank sees only its
// shard's sums, so the skip of a step with a NaN or Inf is agreed in the reduce-scatter itself:
// each bucket's chunks carry a trailer, 1 where this rank's own gradients hold a NaN, an Inf or a
// value over FLT_MAX / ranks, else 0; summed with the chunk, it is the same integer on every rank.
// Bounded that way, no sum can overflow (rounding is monotone), so a step skipped by the
// unsharded optimizer is skipped here too; the other way round only with gradients over
// FLT_MAX / ranks. Not with mixed precision (no bf16 copy of the weights is gathered).
//
// MPI is called by the communication thread alone during the backward (MPI_THREAD_SERIALIZED
// asked of the library: Ranks below), and by the caller's in sharded_step, while that one waits.
// Tests: engine/distributed/data_parallel_test.cc.
#pragma once

#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <limits>
#include <mutex>
#include <thread>
#include <vector>

#include "engine/core/tensor.h"
#include "engine/distributed/ring.h"

namespace bp::dist {

// MPI for this process: initialised with threads allowed to call it one at a time, finalised at
// the end of scope.
class Ranks {
 public:
  Ranks(int* argc, char*** argv) {
    int provided = MPI_THREAD_SINGLE;
    MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided);
    if (provided < MPI_THREAD_SERIALIZED) {
      std::fprintf(stderr,
                   "error: this MPI gives threads level %d; data parallel needs %d "
                   "(MPI_THREAD_SERIALIZED)\n",
                   provided, MPI_THREAD_SERIALIZED);
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  }
  ~Ranks() { MPI_Finalize(); }
  Ranks(const Ranks&) = delete;
  Ranks& operator=(const Ranks&) = delete;
  int size() const { return size_; }
  int rank() const { return rank_; }

 private:
  int size_ = 1, rank_ = 0;
};

template <class T>
class DataParallel {
 public:
  // Attaches to g, before or after its parameters are made (the buckets are cut at the first
  // backward); comm's ranks each build the same graph.
  // overlap false: every bucket is summed after the backward, in order (what the overlap saves
  // is measured against it: apps/bench_ranks.cc --overlap=off). shard_optimizer: ZeRO stage 1;
  // the step is then sharded_step(), not the graph's.
  DataParallel(TensorGraph<T>& g, MPI_Comm comm, size_t bucket_bytes = size_t(1) << 20,
               bool overlap = true, bool shard_optimizer = false)
      : graph_(g),
        comm_(comm),
        bucket_bytes_(bucket_bytes),
        overlap_(overlap),
        sharded_(shard_optimizer) {
    ranks_ = ranks_of(comm_);
    rank_ = rank_of(comm_);
    g.on_gradient_final([this](size_t offset, size_t elems) { gradient_final(offset, elems); });
    worker_ = std::thread([this] { communicate(); });
  }
  ~DataParallel() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    ready_.notify_all();
    worker_.join();
    graph_.on_gradient_final(nullptr);
  }
  DataParallel(const DataParallel&) = delete;
  DataParallel& operator=(const DataParallel&) = delete;

  // After backward(): waits until every bucket is summed; the gradients are then the ranks' mean.
  void finish() {
    std::unique_lock<std::mutex> lock(mutex_);
    if (!overlap_ && started_ == buckets_.size()) {  // every gradient final: now, from the last
      for (size_t k = buckets_.size(); k-- > 0;) queue_.push_back(k);
      ready_.notify_one();
    }
    if (started_ != buckets_.size()) {  // backward() started every bucket it would, on this thread
      std::fprintf(stderr,
                   "error: DataParallel::finish: %zu of %zu buckets started; was backward() "
                   "called this step?\n",
                   started_, buckets_.size());
      std::abort();
    }
    done_.wait(lock, [&] { return reduced_ == started_; });
    reduced_ = started_ = head_ = 0;
    queue_.clear();
    for (Bucket& b : buckets_) b.waiting = b.params;
    flagged_ = 0;  // every rank's count of (rank, bucket) pairs flagged: the same on every rank
    if (sharded_)
      for (size_t k = 0; k < buckets_.size(); k++)
        flagged_ += trailers_[k * size_t(ranks_) + size_t(owned_chunk(rank_, ranks_))];
  }

  // After finish(), with the optimizer sharded: AdamW (adamw given) or SGD at lr on this rank's
  // shard, counted and skipped as the graph's own steps are, then every bucket's values gathered.
  void sharded_step(const AdamWConfig* adamw, double lr) {
    if (!sharded_) fail("sharded_step: this DataParallel was made with shard_optimizer false");
    FlatView<T> flat = graph_.flat_view();
    if (flat.half)
      fail(
          "sharded_step: the optimizer sharded (--zero=1) gathers no bf16 copy of the weights; "
          "valid: float32");
    if (!graph_.count_step(flagged_ == T(0))) return;
    if (adamw && m_.empty()) m_.assign(shard_elems_, T(0)), v_.assign(shard_elems_, T(0));
    const AdamWStep<T> k = adamw ? graph_.next_adamw_step(*adamw) : AdamWStep<T>{};
    size_t at = 0;  // where this bucket's part of the shard starts in the moments
    for (const Bucket& b : buckets_) {
      const Chunk c = chunk_of(b.end - b.begin, ranks_, owned_chunk(rank_, ranks_));
      const size_t from = b.begin + c.begin;
      FlatView<T> shard{flat.values + from, flat.grads + from, nullptr, nullptr, nullptr};
      if (adamw) {
        shard.m = m_.data() + at, shard.v = v_.data() + at;
        adamw_pass(shard, k, c.size);
      } else {
        sgd_pass(shard, T(lr), c.size);
      }
      at += c.size;
    }
    for (size_t j = 0; j < buckets_.size(); j++)
      ring_all_gather(flat.values + buckets_[j].begin, buckets_[j].end - buckets_[j].begin, comm_,
                      int(j % 32768));
  }
  // After finish(), with the optimizer sharded: every rank's shard of the mean gradient gathered,
  // so that every gradient can be read (a check does; a step does not need it).
  void gather_gradients() {
    for (size_t j = 0; j < buckets_.size(); j++)
      ring_all_gather(graph_.flat_grads() + buckets_[j].begin, buckets_[j].end - buckets_[j].begin,
                      comm_, int(j % 32768));
  }
  // AdamW's moments this rank keeps: all of them, in the graph, unless the optimizer is sharded.
  size_t optimizer_state_bytes() const {
    return sharded_ ? (m_.size() + v_.size()) * sizeof(T)
                    : (graph_.adamw_steps() ? 2 * graph_.flat_size() * sizeof(T) : 0);
  }
  size_t buckets() const { return buckets_.size(); }  // 0 before the first backward
  int ranks() const { return ranks_; }

 private:
  struct Bucket {
    size_t begin, end;       // its range of the flat buffer, padding included
    size_t params, waiting;  // its parameters, and those whose gradient is not final yet
  };

  // Buckets from the end of the buffer, each whole parameters, at least bucket_bytes (the first
  // may be smaller). Parameters start where the one before ends, padded to a cache line.
  void cut_buckets(size_t bucket_bytes) {  // on this thread, before any bucket is started
    const std::vector<size_t> starts = param_offsets();  // ascending
    const size_t total = graph_.flat_size();
    size_t end = total, params = 0;
    for (size_t k = starts.size(); k-- > 0;) {
      params++;
      if ((end - starts[k]) * sizeof(T) >= bucket_bytes || k == 0) {
        buckets_.push_back({starts[k], end, params, params});
        end = starts[k], params = 0;
      }
    }
    std::reverse(buckets_.begin(), buckets_.end());  // ascending, for the lookup
    size_t longest = 0;
    for (const Bucket& b : buckets_) longest = std::max(longest, b.end - b.begin);
    scratch_.resize(ring_scratch_elems(longest, ranks_));
    trailers_.resize(buckets_.size() * size_t(ranks_));
    for (const Bucket& b : buckets_)
      shard_elems_ += chunk_of(b.end - b.begin, ranks_, owned_chunk(rank_, ranks_)).size;
    queue_.reserve(buckets_.size());  // a step's pushes allocate nothing
  }
  std::vector<size_t> param_offsets() const {
    std::vector<size_t> out;
    for (size_t p = 0; p < graph_.num_params(); p++)
      if (const size_t at = graph_.param_offset(p); at != SIZE_MAX) out.push_back(at);
    return out;
  }

  void gradient_final(size_t offset, size_t) {
    if (buckets_.empty()) cut_buckets(bucket_bytes_);  // the first backward: parameters are made
    auto it = std::upper_bound(buckets_.begin(), buckets_.end(), offset,
                               [](size_t o, const Bucket& b) { return o < b.begin; });
    Bucket& b = *(it - 1);
    std::lock_guard<std::mutex> lock(mutex_);
    if (--b.waiting == 0) {
      started_++;
      if (!overlap_) return;  // finish() starts it
      queue_.push_back(size_t(&b - buckets_.data()));
      ready_.notify_one();
    }
  }

  // This rank's communication thread: each bucket in the order it became ready (the same on
  // every rank), summed over the ranks and scaled, one at a time.
  void communicate() {
    const T scale = T(1) / T(ranks_);
    for (;;) {
      size_t k;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        ready_.wait(lock, [&] { return stop_ || head_ < queue_.size(); });
        if (head_ == queue_.size()) return;
        k = queue_[head_++];
      }
      const Bucket& b = buckets_[k];
      T* g = graph_.flat_grads() + b.begin;
      const size_t n = b.end - b.begin;
      if (sharded_) {
        T* trailers = trailers_.data() + k * size_t(ranks_);
        std::fill(trailers, trailers + ranks_, out_of_bounds(g, n) ? T(1) : T(0));
        ring_reduce_scatter(g, n, scratch_.data(), comm_, int(k % 32768), trailers);
        const Chunk c = chunk_of(n, ranks_, owned_chunk(rank_, ranks_));
        g += c.begin;
        if (ranks_ > 1)
          for (size_t i = 0; i < c.size; i++) g[i] *= scale;
      } else {
        ring_allreduce(g, n, scratch_.data(), comm_, int(k % 32768));
        if (ranks_ > 1)
          for (size_t i = 0; i < n; i++) g[i] *= scale;
      }
      {
        std::lock_guard<std::mutex> lock(mutex_);
        reduced_++;
      }
      done_.notify_all();
    }
  }

  // Whether g holds a NaN, an Inf or a value whose sum over the ranks might overflow.
  bool out_of_bounds(const T* g, size_t n) const {
    const T bound = std::numeric_limits<T>::max() / T(ranks_);
    bool out = false;
#pragma omp simd reduction(| : out)
    for (size_t i = 0; i < n; i++) out |= !(std::abs(g[i]) <= bound);  // NaN compares false
    return out;
  }
  [[noreturn]] static void fail(const char* what) {
    std::fprintf(stderr, "error: DataParallel::%s\n", what);
    std::abort();
  }

  TensorGraph<T>& graph_;
  MPI_Comm comm_;
  size_t bucket_bytes_;
  bool overlap_, sharded_;
  int ranks_ = 1, rank_ = 0;
  std::vector<T> trailers_;  // sharded: one per chunk of each bucket, bucket-major
  T flagged_ = 0;            // sharded: the last step's flags summed (an integer)
  size_t shard_elems_ = 0;   // sharded: this rank's chunks of every bucket
  std::vector<T> m_, v_;     // sharded: AdamW's moments of this rank's shard
  std::vector<Bucket> buckets_;
  std::vector<T> scratch_;
  std::mutex mutex_;
  std::condition_variable ready_, done_;
  std::vector<size_t> queue_;  // buckets in the order they became ready; head_: the next to sum
  size_t head_ = 0, started_ = 0, reduced_ = 0;
  bool stop_ = false;
  std::thread worker_;
};

}  // namespace bp::dist
