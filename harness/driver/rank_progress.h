// harness/driver/rank_progress.h: what a data-parallel rank says of its timed steps. Where it is,
// for the runner to name a rank that hangs, and how long its last timed loop took, for the
// slowest rank's step (apps/bench_ranks.cc, apps/bench_libtorch.cc report it).
#pragma once

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace bp {

// Where a data-parallel rank is in its timed steps, for the runner to name one that hangs: on
// SIGUSR1 (the runner's, at a row's timeout, before it kills the ranks) the rank writes one line,
// "rank R: in timed step N" or "rank R: between timed steps, N done". A rank in a step waits there
// for the others; the one that is not is the one that stopped (harness/runner/bench_phase.cc).
class RankProgress;
RankProgress& rank_progress();
class RankProgress {
 public:
  void in_step(int64_t i) { step_.store(2 * i + 1, std::memory_order_relaxed); }
  void between_steps(int64_t done) { step_.store(2 * done, std::memory_order_relaxed); }
  // Installs the handler; rank is this process's.
  void answer_sigusr1(int rank) {
    rank_ = rank;
    signal(SIGUSR1, [](int) { rank_progress().say(); });
  }
  void say() const {  // async-signal-safe: digits by hand, one write
    char line[96];
    size_t n = 0;
    auto put = [&](const char* t) {
      while (*t && n < sizeof line) line[n++] = *t++;
    };
    auto number = [&](int64_t v) {
      char digits[24];
      size_t k = 0;
      do digits[k++] = char('0' + v % 10), v /= 10;
      while (v > 0 && k < sizeof digits);
      while (k > 0 && n < sizeof line) line[n++] = digits[--k];
    };
    const int64_t s = step_.load(std::memory_order_relaxed);
    put("rank "), number(rank_);
    if (s % 2)
      put(": in timed step "), number(s / 2);
    else
      put(": between timed steps, "), number(s / 2), put(" done");
    put("\n");
    if (write(2, line, n) < 0) {
    }
  }

 private:
  std::atomic<int64_t> step_{0};
  int rank_ = 0;
};
inline RankProgress& rank_progress() {
  static RankProgress p;
  return p;
}

// The seconds of the last timed loop of this process (a rank's, for the slowest rank's step).
inline double& timed_loop_seconds() {
  static double seconds = 0;
  return seconds;
}

}  // namespace bp
