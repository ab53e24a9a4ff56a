// engine/runtime/threads.h: the engine's one pool of threads, made once at start (--threads), and
// parallel_for, which splits a kernel's independent pieces (output tiles, rows, chunks) over it.
//
// A job is split into at most `size()` contiguous parts, each writing outputs no other part
// writes. Any thread runs any part: the caller takes the first part left, then the next, and every
// worker that is running takes what remains (one word holds the job, its parts and the next part
// to take), so a worker that is asleep, late or descheduled by other work on the machine holds
// back only a part it has started; an idle worker's share falls to the caller. What a part
// computes is fixed by its index, never by the thread that runs it, and the kernels keep every sum
// in one fixed order whatever the split (a row's reduction stays in one part; cross-row
// reductions run after, in row order), so results are bitwise the same at any thread count and
// under any interleaving (engine/runtime/threads_test.cc checks products and every op at 1 to 4
// threads, with a worker held back; engine/compiled/compiled_test.cc every model workload).
//
// Waiting is bounded on both sides, as OpenMP runtimes and oneTBB do it: between jobs a worker
// spins a while (kSpinRounds pauses: ops follow each other that closely in a step), then sleeps on
// a futex (std::atomic::wait) until the next job, so an idle engine costs no CPU between steps;
// the caller, its parts done, spins as long, gives the CPU up a few times (a worker descheduled
// beside it may need it), then sleeps until the last part is done. More threads than CPUs run (the
// results say so): then nobody spins. A parallel_for inside a part runs inline, so a kernel may be
// split at any level.
//
// Not here: priorities, NUMA. One job at a time, from one calling thread.
//
//   bp::thread_pool().resize(2);
//   bp::parallel_for(rows, /*grain=*/64, [&](int64_t r0, int64_t r1) { ... rows [r0, r1) ... });
#pragma once

#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
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

  // The threads that run a job, the caller included (1 inside a Serial scope). Changes only
  // between jobs.
  int size() const { return serial_ ? 1 : int(workers_.size()) + 1; }
  // While one lives, the pool is one thread to the calling code: kernels split nothing and a
  // compiled program is planned and run for one thread (the compiled mode's program for the steps
  // the pool runs alone: engine/compiled/backend.h). Made and ended by the thread that calls run.
  class Serial {
   public:
    explicit Serial(ThreadPool& pool) : pool_(pool), was_(pool.serial_) { pool_.serial_ = true; }
    Serial(const Serial&) = delete;
    Serial& operator=(const Serial&) = delete;
    ~Serial() { pool_.serial_ = was_; }

   private:
    ThreadPool& pool_;
    bool was_;
  };
  // Whether a Serial scope is open.
  bool serial() const { return serial_; }
  // Whether step_done() has the caller run the jobs of this step alone (other work on the machine
  // made sharing them slower).
  bool alone() const { return sharing_.alone; }
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
    stats_ = {}, sharing_ = {}, sharing_.window_switches = involuntary_switches();
    quit_.store(false);
    spin_micros_ = threads <= cpus() ? kSpinMicros : 0;
    const uint32_t now = generation_.load();  // a worker waits for the job after this one
    for (int i = 1; i < threads; i++) workers_.emplace_back([this, i, now] { work(i, now); });
  }

  // In the child of a fork(): the workers were not copied into it, so their handles are dropped
  // unjoined (joining would wait forever) and as many new ones started.
  void restart_after_fork() {
    const int threads = size();
    (void)new std::vector<std::thread>(std::move(workers_));  // never destroyed, never joined
    workers_.clear();
    claim_.store(0), done_.store(0), caller_waits_.store(0), sleepers_.store(0);
    quit_.store(false), generation_.store(0);
    resize(threads);
  }

  // f(part, parts) for part in [0, parts), parts <= size(); returns when every part is done.
  // The caller takes parts first and every running worker takes the next one left, so a worker
  // that is asleep, late or descheduled only holds back the one part it has started.
  template <class F>
  void run(int parts, F&& f) {
    if (parts <= 1 || in_part_ || workers_.empty() || serial_) {
      for (int p = 0; p < parts; p++) f(p, parts);
      return;
    }
    parts = std::min(parts, size());
    if (sharing_
            .alone) {  // other work holds the workers back: the caller runs every part (step_done)
      stats_.alone++;
      for (int p = 0; p < parts; p++) f(p, parts);
      return;
    }
    stats_.shared++, sharing_.window_shared++;
    ctx_ = &f;
    call_ = [](void* ctx, int part, int n) { (*static_cast<F*>(ctx))(part, n); };
    done_.store(0, std::memory_order_relaxed);
    job_++;
    claim_.store(uint64_t(job_) << 32 | uint64_t(parts) << 16, std::memory_order_release);
    generation_.fetch_add(1, std::memory_order_seq_cst);
    if (sleepers_.load(std::memory_order_seq_cst) > 0) generation_.notify_all();
    const auto start = Clock::now();
    in_part_ = true;
    int mine = 0;
    for (int p, n; claim(p, n); mine++) f(p, n);
    in_part_ = false;
    last_parts_by_caller_ = mine;
    if (done_.fetch_add(mine, std::memory_order_acq_rel) + mine == parts) return;
    const auto own_end = Clock::now();
    wait_for(parts);
    // Waited past twice the caller's own part: a worker was descheduled holding one.
    const auto own_part = (own_end - start) / std::max(mine, 1);
    if (Clock::now() - own_end > 2 * own_part + std::chrono::microseconds(kLateMicros))
      sharing_.late++;
  }

  // The end of a training step (the eager engine's and the compiled mode's backward call it).
  // Sharing jobs with the workers is right on an idle machine and can be a loss on a busy one,
  // where a worker spinning or holding a part takes the caller's CPU time. So the pool watches
  // windows of steps: while the caller is preempted no more often than on an idle machine and
  // parts come in time, it shares; at a sign of other work it times one window sharing and one
  // alone, keeps the quicker for a while, then looks again (after an untimed window that wakes the
  // workers). Either way wins by a margin, save that a tie goes alone when other work fills the
  // machine. Sharing that wins again is kept twice as long; alone that wins again four times as
  // long, since a hold alone ends at the first window that finds the machine's other work gone
  // (machine_has_room: fewer other threads runnable than the workers would need), as GOMP's
  // OMP_DYNAMIC sizes its teams from the machine's load. A short process (a benchmark's turn)
  // so spends most of its steps on the quicker way, not on probes. The parts are the same either
  // way, so the results are bitwise the same.
  void step_done() {
    if (workers_.empty()) return;
    Sharing& w = sharing_;
    const auto now = Clock::now();
    if (++w.window_steps < kWindowSteps || now - w.window_start < kWindowTime) return;
    const double seconds = std::chrono::duration<double>(now - w.window_start).count();
    const double per_step = seconds / w.window_steps;
    const long switches = involuntary_switches();
    const bool busy = double(switches - w.window_switches) >= kBusySwitchesPerSecond * seconds ||
                      w.late >= std::max<int64_t>(2, w.window_shared / kLateOneIn);
    w.window_start = now, w.window_steps = 0, w.window_switches = switches;
    w.late = 0, w.window_shared = 0;
    switch (w.phase) {
      case Phase::watch:
        if (busy) w.phase = Phase::try_shared;
        break;
      case Phase::settle:  // the workers woken after a while alone: this window not timed
        w.phase = Phase::try_shared;
        break;
      case Phase::try_shared:
        w.shared_step = per_step, w.alone = true, w.phase = Phase::try_alone;
        break;
      case Phase::try_alone: {
        // the quicker by a margin wins; a tie goes alone when other work fills the machine
        const bool alone_wins = machine_has_room() ? per_step < kAloneMargin * w.shared_step
                                                   : !(w.shared_step < kAloneMargin * per_step);
        const int growth = alone_wins ? 4 : 2;
        w.hold_length = alone_wins == w.last_alone_wins
                            ? std::min(w.hold_length * growth, kHoldMost)
                            : (alone_wins ? kFirstHoldAlone : 1);
        w.last_alone_wins = alone_wins, w.alone = alone_wins;
        w.hold_left = w.hold_length, w.phase = Phase::hold, stats_.probes++;
        break;
      }
      case Phase::hold:
        if (w.alone && w.hold_left > 1 && machine_has_room()) w.hold_left = 1, stats_.holds_cut++;
        if (--w.hold_left > 0) break;
        w.phase = w.alone ? Phase::settle : Phase::watch, w.alone = false;
        break;
    }
  }
  // A pause that is no step's (the process waited `seconds` for its turn to be timed): left out
  // of the window of steps step_done() is timing.
  void leave_out_of_window(double seconds) {
    sharing_.window_start +=
        std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  }
  // What the pool did since it was sized: jobs shared with the workers, jobs the caller ran
  // alone, and the times it timed both ways.
  struct Stats {
    int64_t shared = 0, alone = 0, probes = 0;
    int64_t holds_cut = 0;  // holds alone ended early: the machine had room for the workers
  };
  const Stats& stats() const { return stats_; }

  // How many parts of the last job the calling thread ran itself (tests read it).
  int last_parts_by_caller() const { return last_parts_by_caller_; }
  // The share of jobs the caller ran alone since the pool was sized (step_done), 0 to 1.
  double alone_share() const {
    const int64_t jobs = stats_.shared + stats_.alone;
    return jobs ? double(stats_.alone) / double(jobs) : 0.0;
  }
  // A test hook: the steps from now on run alone (or shared) until the pool is resized, whatever
  // step_done() times.
  void hold_alone_for_tests(bool alone) {
    sharing_.alone = alone, sharing_.phase = Phase::hold, sharing_.hold_left = 1 << 30;
  }
  // Whether the machine has a CPU for each worker beside the caller: the threads runnable in the
  // whole system now (/proc/loadavg's fourth field; the caller is one, the workers asleep), less
  // the caller, fit on the online CPUs less the caller's and the workers'. No answer (no /proc):
  // false, so holds run their length. Read once a window (some 10 us). A test may set it.
  bool machine_has_room() const {
    if (room_for_tests_ >= 0) return room_for_tests_ == 1;
    const int running = system_threads_runnable();
    if (running < 1) return false;
    const long online = sysconf(_SC_NPROCESSORS_ONLN);
    return running - 1 <= online - 1 - long(workers_.size());
  }
  static int system_threads_runnable() {
    FILE* f = std::fopen("/proc/loadavg", "r");
    if (!f) return -1;
    double load[3];
    int running = -1, total = 0;
    if (std::fscanf(f, "%lf %lf %lf %d/%d", &load[0], &load[1], &load[2], &running, &total) != 5)
      running = -1;
    std::fclose(f);
    return running;
  }
  // A test hook: machine_has_room() answers `room` (1 yes, 0 no; -1: it reads the machine again).
  void machine_has_room_for_tests(int room) { room_for_tests_ = room; }
  // A test hook: worker `index` (1 to size() - 1; 0: none) sleeps `micros` before it looks for a
  // part (late to a job, as one the system descheduled), or, `holding`, after it has taken one.
  void delay_worker_for_tests(int index, int micros, bool holding) {
    delayed_worker_.store(0), delay_micros_.store(micros), delay_holding_.store(holding);
    delayed_worker_.store(index);
  }

 private:
  static constexpr int kMaxThreads = 256;
  // Of pause before sleeping: ops follow each other that closely in a step; longer, a worker
  // spinning between jobs on a busy machine takes CPU time the caller needs.
  static constexpr int kSpinMicros = 100;
  static constexpr int kLateMicros = 20;  // a part later than its like by this: descheduled
  // step_done's windows: at least this many steps and this long; either way wins only this much
  // quicker (a tie goes alone when the machine is full); a first hold alone, and a decision held
  // at most this many windows.
  static constexpr int kWindowSteps = 2, kHoldMost = 64, kFirstHoldAlone = 2;
  // A busy machine: the caller preempted this often (an idle one: some 50 a second), or one
  // shared job in this many waiting on a late part.
  static constexpr double kBusySwitchesPerSecond = 150;
  static constexpr int64_t kLateOneIn = 20;
  static constexpr std::chrono::milliseconds kWindowTime{20};
  static constexpr double kAloneMargin = 0.9;
  using Clock = std::chrono::steady_clock;
  enum class Phase : uint8_t { watch, settle, try_shared, try_alone, hold };

  // This thread's involuntary context switches: the times the system gave its CPU to another.
  static long involuntary_switches() {
    rusage use;
    return getrusage(RUSAGE_THREAD, &use) == 0 ? use.ru_nivcsw : 0;
  }
  // The spin loops' pause: x86's PAUSE (named so that ::pause(), which waits for a signal, is
  // never what an unqualified call finds).
  static void cpu_relax() {
#if defined(__x86_64__)
    _mm_pause();
#else
    std::this_thread::yield();
#endif
  }
  // Pauses until done() or spin_micros_ have passed; whether done().
  template <class Done>
  bool spin_until(Done&& done) const {
    if (done()) return true;
    if (spin_micros_ == 0) return false;
    const auto end = std::chrono::steady_clock::now() + std::chrono::microseconds(spin_micros_);
    for (;;) {
      for (int i = 0; i < 16; i++) {
        cpu_relax();
        if (done()) return true;
      }
      if (std::chrono::steady_clock::now() >= end) return false;
    }
  }
  // Takes the next part of the job posted last (its index, and the job's parts); false when every
  // part is taken. The job's number sits in the word beside its parts and the next part, so a late
  // worker never takes a part of another job than the one whose function it calls (ctx_ stays
  // until every part is done).
  bool claim(int& part, int& parts) {
    uint64_t word = claim_.load(std::memory_order_acquire);
    for (;;) {
      parts = int(word >> 16 & 0xffff), part = int(word & 0xffff);
      if (part >= parts) return false;
      if (claim_.compare_exchange_weak(word, word + 1, std::memory_order_acq_rel,
                                       std::memory_order_acquire))
        return true;
    }
  }
  // The caller, its own parts done, waits for those the workers took: spins a while (kSpinMicros),
  // then sleeps on done_, leaving its CPU to a worker descheduled beside it.
  void wait_for(int parts) {
    if (spin_until([&] { return done_.load(std::memory_order_acquire) == parts; })) return;
    caller_waits_.store(1, std::memory_order_seq_cst);
    for (int d; (d = done_.load(std::memory_order_seq_cst)) != parts;) done_.wait(d);
    caller_waits_.store(0, std::memory_order_relaxed);
  }
  void work(int index, uint32_t seen) {
    for (;;) {
      uint32_t now = seen;
      spin_until([&] { return (now = generation_.load(std::memory_order_acquire)) != seen; });
      while (now == seen) {
        sleepers_.fetch_add(1, std::memory_order_seq_cst);
        generation_.wait(seen, std::memory_order_acquire);
        sleepers_.fetch_sub(1, std::memory_order_acq_rel);
        now = generation_.load(std::memory_order_acquire);
      }
      seen = now;
      if (quit_.load(std::memory_order_acquire)) return;
      in_part_ = true;
      const bool delayed = delayed_worker_.load(std::memory_order_relaxed) == index;
      const auto delay = std::chrono::microseconds(delay_micros_.load(std::memory_order_relaxed));
      const bool holding = delay_holding_.load(std::memory_order_relaxed);
      if (delayed && !holding) std::this_thread::sleep_for(delay);
      for (int p, n; claim(p, n);) {
        if (delayed && holding) std::this_thread::sleep_for(delay);
        call_(ctx_, p, n);
        done_.fetch_add(1, std::memory_order_seq_cst);
        if (caller_waits_.load(std::memory_order_seq_cst)) done_.notify_one();
      }
      in_part_ = false;
    }
  }
  void stop() {
    if (workers_.empty()) return;
    quit_.store(true, std::memory_order_release);
    generation_.fetch_add(1, std::memory_order_release);
    generation_.notify_all();
    for (std::thread& t : workers_) t.join();
    workers_.clear();
  }

  std::vector<std::thread> workers_;
  int spin_micros_ = kSpinMicros;
  // The job: written by the caller before claim_ names it, read by the workers that take a part.
  void* ctx_ = nullptr;
  void (*call_)(void*, int, int) = nullptr;
  uint32_t job_ = 0;
  // job (32 bits) | parts (16) | next part to take (16)
  std::atomic<uint64_t> claim_{0};
  std::atomic<int> done_{0}, caller_waits_{0};
  std::atomic<uint32_t> generation_{0};  // moves with each job; the sleeping workers wait on it
  std::atomic<int> sleepers_{0};
  std::atomic<bool> quit_{false};
  std::atomic<int> delayed_worker_{0}, delay_micros_{0};  // the test hook
  std::atomic<bool> delay_holding_{false};
  int last_parts_by_caller_ = 0;
  bool serial_ = false;      // a Serial scope is open
  int room_for_tests_ = -1;  // machine_has_room()'s answer set by a test; -1: none
  // step_done()'s state: the window so far, the phase, and whether the caller goes alone
  struct Sharing {
    Clock::time_point window_start = Clock::now();
    int window_steps = 0, hold_left = 0, hold_length = 1;
    int64_t late = 0, window_shared = 0;
    long window_switches = 0;
    Phase phase = Phase::watch;
    bool alone = false, last_alone_wins = false;
    double shared_step = 0;
  } sharing_;
  Stats stats_;
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
