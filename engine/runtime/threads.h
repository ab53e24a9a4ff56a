// engine/runtime/threads.h: the engine's one pool of threads, made once at start (--threads), and
// parallel_for, which splits a kernel's independent pieces (output tiles, rows, chunks) over it.
//
// A job is split into at most `size()` contiguous parts; the calling thread runs part 0 and the
// workers the rest, each part writing outputs no other part writes. The kernels keep every sum in
// one fixed order whatever the split (a row's reduction stays in one part; cross-row reductions
// run after, in row order), so results are bitwise the same at any thread count
// (engine/runtime/threads_test.cc checks products and every op at 1 to 4 threads,
// engine/compiled/compiled_test.cc every model workload).
//
// Between jobs a worker spins a while (kSpinRounds pauses: ops follow each other that closely in a
// step), then sleeps on a futex (std::atomic::wait) until the next job: an idle engine costs no
// CPU between steps. More threads than CPUs run (the results say so): then nobody spins.
// A parallel_for inside a part runs inline, so a kernel may be split at any level.
//
// Not here: work stealing, priorities, NUMA. One job at a time, from one calling thread.
//
//   bp::thread_pool().resize(2);
//   bp::parallel_for(rows, /*grain=*/64, [&](int64_t r0, int64_t r1) { ... rows [r0, r1) ... });
#pragma once

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <thread>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace bp {

class ThreadPool {
 public:
  ThreadPool() = default;
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;
  ~ThreadPool() { stop(); }

  // The threads that run a job, the caller included. Changes only between jobs.
  int size() const { return int(workers_.size()) + 1; }
  // The CPUs this process may run on (its affinity mask), at least 1.
  static int cpus() {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) != 0) return 1;
    return std::max(1, CPU_COUNT(&set));
  }

  void resize(int threads) {
    if (threads < 1 || threads > kMaxThreads) {
      std::fprintf(stderr, "bp::ThreadPool::resize: %d threads; valid: 1 to %d\n", threads,
                   kMaxThreads);
      std::exit(2);
    }
    if (threads == size()) return;
    stop();
    quit_.store(false);
    spin_ = threads <= cpus() ? kSpinRounds : 0;
    const uint32_t now = generation_.load();  // a worker waits for the job after this one
    for (int i = 1; i < threads; i++) workers_.emplace_back([this, i, now] { work(i, now); });
  }

  // In the child of a fork(): the workers were not copied into it, so their handles are dropped
  // unjoined (joining would wait forever) and as many new ones started.
  void restart_after_fork() {
    const int threads = size();
    (void)new std::vector<std::thread>(std::move(workers_));  // never destroyed, never joined
    workers_.clear();
    pending_.store(0), sleepers_.store(0), quit_.store(false), generation_.store(0);
    resize(threads);
  }

  // f(part, parts) for part in [0, parts), parts <= size(); returns when every part is done.
  template <class F>
  void run(int parts, F&& f) {
    if (parts <= 1 || in_part_ || workers_.empty()) {
      for (int p = 0; p < parts; p++) f(p, parts);
      return;
    }
    parts = std::min(parts, size());
    ctx_ = &f;
    call_ = [](void* ctx, int part, int n) { (*static_cast<F*>(ctx))(part, n); };
    parts_ = parts;
    pending_.store(int(workers_.size()), std::memory_order_relaxed);  // each worker checks in
    generation_.fetch_add(1, std::memory_order_release);
    if (sleepers_.load(std::memory_order_acquire) > 0) generation_.notify_all();
    in_part_ = true;
    f(0, parts);
    in_part_ = false;
    while (pending_.load(std::memory_order_acquire) != 0)  // oversubscribed: give the CPU up
      spin_ ? pause() : std::this_thread::yield();
  }

 private:
  static constexpr int kMaxThreads = 256;
  static constexpr int kSpinRounds = 1 << 14;  // a few microseconds of pause before sleeping

  static void pause() {
#if defined(__x86_64__)
    _mm_pause();
#else
    std::this_thread::yield();
#endif
  }
  void work(int index, uint32_t seen) {
    for (;;) {
      uint32_t now = seen;
      for (int i = 0; i < spin_ && now == seen; i++) {
        pause();
        now = generation_.load(std::memory_order_acquire);
      }
      while (now == seen) {
        sleepers_.fetch_add(1, std::memory_order_acq_rel);
        generation_.wait(seen, std::memory_order_acquire);
        sleepers_.fetch_sub(1, std::memory_order_acq_rel);
        now = generation_.load(std::memory_order_acquire);
      }
      seen = now;
      if (quit_.load(std::memory_order_acquire)) return;
      if (index < parts_) {
        in_part_ = true;
        call_(ctx_, index, parts_);
        in_part_ = false;
      }
      pending_.fetch_sub(1, std::memory_order_acq_rel);
    }
  }
  void stop() {
    if (workers_.empty()) return;
    parts_ = 0;  // no part to run: each worker only counts itself done
    pending_.store(int(workers_.size()));
    quit_.store(true, std::memory_order_release);
    generation_.fetch_add(1, std::memory_order_release);
    generation_.notify_all();
    for (std::thread& t : workers_) t.join();
    workers_.clear();
  }

  std::vector<std::thread> workers_;
  int spin_ = kSpinRounds;
  // The job: written by the caller before generation_ moves, read by workers after they see it.
  void* ctx_ = nullptr;
  void (*call_)(void*, int, int) = nullptr;
  int parts_ = 0;
  std::atomic<uint32_t> generation_{0};
  std::atomic<int> pending_{0}, sleepers_{0};
  std::atomic<bool> quit_{false};
  static inline thread_local bool in_part_ = false;
};

// Below these sizes a kernel runs on the calling thread: waking the workers would cost more than
// it saves. Kernels read them as they split; the tests lower them to split everything.
struct SplitThresholds {
  int64_t elems = int64_t(1) << 12;      // elementwise and row-wise ops: elements of the op
  int64_t macs = int64_t(1) << 19;       // products: multiply-adds
  int32_t rows = 64;                     // products split by rows when each part gets this many
  int64_t pair_macs = int64_t(1) << 15;  // a backward's two products side by side, each this many
  // Compiled mode: independent small ops side by side when each thread gets this many elements'
  // work (engine/compiled/waves.h).
  int64_t side_by_side = int64_t(1) << 11;
};
// BP_SPLIT=elems=N,macs=N,rows=N,pairs=N,side=N in the environment overrides any of them, for
// the lab's sweeps (dev/threads_sweep.sh; dev/notes.md, "Past two cores"); anything else there
// stops the process in one line.
inline SplitThresholds split_thresholds_from(const char* spec) {
  SplitThresholds t;
  for (const char* p = spec; p && *p;) {
    const char* eq = std::strchr(p, '=');
    const char* end = std::strchr(p, ',');
    if (!end) end = p + std::strlen(p);
    char* stop = nullptr;
    errno = 0;
    long long v = eq && eq < end ? std::strtoll(eq + 1, &stop, 10) : -1;
    if (errno == ERANGE) v = -1;  // past 2^63: refused, not saturated
    const std::string_view key(p, eq && eq < end ? size_t(eq - p) : size_t(end - p));
    if (end == p) {
      std::fprintf(stderr, "BP_SPLIT=%s: an empty field (NAME=N, comma-separated)\n", spec);
      std::exit(2);
    }
    int64_t* field = key == "elems"   ? &t.elems
                     : key == "macs"  ? &t.macs
                     : key == "pairs" ? &t.pair_macs
                     : key == "side"  ? &t.side_by_side
                                      : nullptr;
    if ((!field && key != "rows") || stop != end || v < 1 || (key == "rows" && v > INT32_MAX)) {
      std::fprintf(stderr,
                   "BP_SPLIT: '%.*s' is not NAME=N (N >= 1; names: elems, macs, rows, pairs, "
                   "side)\n",
                   int(end - p), p);
      std::exit(2);
    }
    if (field)
      *field = v;
    else
      t.rows = int32_t(v);
    p = *end ? end + 1 : end;
    if (*end && !*p) {  // a comma at the end: an empty last field
      std::fprintf(stderr, "BP_SPLIT=%s: an empty field (NAME=N, comma-separated)\n", spec);
      std::exit(2);
    }
  }
  return t;
}
inline SplitThresholds& split_thresholds() {
  static SplitThresholds t = split_thresholds_from(std::getenv("BP_SPLIT"));
  return t;
}

// The process's pool (one thread until resized).
inline ThreadPool& thread_pool() {
  static ThreadPool pool;
  return pool;
}

// f(begin, end) over [0, n) in contiguous parts of at least `grain` items each (at most one part
// per thread; inline when one part would do). Which thread runs which part never changes what a
// part computes.
inline int parallel_parts(int64_t n, int64_t grain) {
  const int64_t most = std::max<int64_t>(1, n / std::max<int64_t>(grain, 1));
  return int(std::min<int64_t>(thread_pool().size(), most));
}
template <class F>
void parallel_for(int64_t n, int64_t grain, F&& f) {
  const int parts = parallel_parts(n, grain);
  if (parts <= 1) {
    if (n > 0) f(int64_t(0), n);
    return;
  }
  thread_pool().run(parts, [&](int part, int total) {
    const int64_t begin = n * part / total, end = n * (part + 1) / total;
    if (begin < end) f(begin, end);
  });
}

}  // namespace bp
