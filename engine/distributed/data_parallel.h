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
// MPI is called by the communication thread alone during steps (MPI_THREAD_SERIALIZED asked of
// the library: Ranks below). Tests: engine/distributed/data_parallel_test.cc.
#pragma once

#include <mpi.h>

#include <algorithm>
#include <condition_variable>
#include <cstdio>
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
  // is measured against it: apps/bench_ranks.cc --overlap=off).
  DataParallel(TensorGraph<T>& g, MPI_Comm comm, size_t bucket_bytes = size_t(1) << 20,
               bool overlap = true)
      : graph_(g), comm_(comm), bucket_bytes_(bucket_bytes), overlap_(overlap) {
    ranks_ = ranks_of(comm_);
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

  // For a backward that tells no gradient's end (the compiled mode's program, for now): every
  // gradient final at once, each bucket summed after it (as overlap false).
  void all_final() {
    for (size_t p = 0; p < graph_.num_params(); p++)
      if (const size_t at = graph_.param_offset(p); at != SIZE_MAX) gradient_final(at, 0);
  }
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
      ring_allreduce(g, n, scratch_.data(), comm_, int(k % 32768));
      if (ranks_ > 1)
        for (size_t i = 0; i < n; i++) g[i] *= scale;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        reduced_++;
      }
      done_.notify_all();
    }
  }

  TensorGraph<T>& graph_;
  MPI_Comm comm_;
  size_t bucket_bytes_;
  bool overlap_;
  int ranks_ = 1;
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
