// engine/checkpoint/revolve.h: Revolve, the binomial checkpointing schedule (Griewank and Walther,
// ACM TOMS 2000), for reversing a chain of n steps (backpropagation through time) with c snapshots
// of the state in memory.
//
// A chain of n steps runs state_0 -> state_1 -> ... -> state_n; its reverse sweep needs, for each
// step i from n-1 down to 0, the state before it. Keeping all n states costs n snapshots. With
// c < n, Revolve keeps c of them and recomputes the others: it advances (runs steps forward
// without taping) from a snapshot, stores a new snapshot at a point chosen by the binomial
// partition, and recurses. The number of advanced steps is the least possible for c snapshots,
// as Griewank and Walther prove:
//     t(n, c) = r n - beta(c + 1, r - 1),  beta(s, r) = C(s + r, s),
// with r the repetition number, the smallest r with beta(c, r) >= n (no step is advanced more
// than r times). Snapshots count the one holding state_0. Reversing a step (`reverse`) runs it
// forward once more with its tape and then backward; that forward is not in t.
//
// Here the schedule only: a generator of moves (advance, store, restore, free, reverse) that the
// caller executes on its own states. It holds a stack of O(c + r) ranges, never the n moves, so
// a schedule over a million steps costs no memory to speak of. The recursion of the textbook
// algorithm is an explicit stack.
// Not here: the execution (the recurrent workload's runner), multistage checkpointing to disk.
// Tests: engine/checkpoint/revolve_test.cc (every n <= 5000 and c <= 64: the moves are legal,
// advance exactly t(n, c) steps, reverse every step once in reverse order, and keep at most c
// snapshots).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <vector>

namespace bp::revolve {

// beta(s, r) = C(s + r, s), the most steps c = s snapshots can reverse with no step advanced
// more than r times; 0 for r < 0, saturating at the largest uint64_t.
inline uint64_t beta(int64_t s, int64_t r) {
  if (r < 0 || s < 0) return 0;
  const int64_t k = s < r ? s : r;  // C(s + r, k), built as a product of k exact quotients
  uint64_t value = 1;
  for (int64_t i = 1; i <= k; i++) {
    const uint64_t num = uint64_t(s + r - k + i);  // value * num / i is exact after each step
    if (value > std::numeric_limits<uint64_t>::max() / num)
      return std::numeric_limits<uint64_t>::max();
    value = value * num / uint64_t(i);
  }
  return value;
}
// The repetition number: the smallest r with beta(c, r) >= n (n >= 1, c >= 1).
inline int64_t repetitions(int64_t n, int64_t c) {
  int64_t r = 0;
  while (beta(c, r) < uint64_t(n)) r++;
  return r;
}
// t(n, c): the steps Revolve advances to reverse n steps with c snapshots.
inline int64_t forward_steps(int64_t n, int64_t c) {
  const int64_t r = repetitions(n, c);
  return r * n - int64_t(beta(c + 1, r - 1));
}

enum class Action : uint8_t {
  advance,  // run steps forward, untaped, from the state in memory up to the state `step`
  store,    // copy the state in memory (state `step`) into snapshot `slot`
  restore,  // make snapshot `slot` (state `step`) the state in memory
  free,     // snapshot `slot` (state `step`) is not needed any more
  reverse,  // the state in memory is state `step`: run step `step` with its tape, then backward
  done,     // every step reversed, every snapshot freed
};
inline constexpr const char* action_names[] = {"advance", "store",   "restore",
                                               "free",    "reverse", "done"};
static_assert(std::size(action_names) == size_t(Action::done) + 1, "name every action");

struct Move {
  Action action;
  int64_t step;  // a state index, 0..n
  int32_t slot;  // store, restore, free: the snapshot, 0..c-1
};

// Moves of the schedule for n steps and c snapshots, one per next(). The first stores state_0;
// the last reverses step 0 and frees its snapshot.
class Schedule {
 public:
  Schedule(int64_t n, int32_t c) : n_(n), c_(c) {
    if (n < 1 || c < 1) {
      std::fprintf(stderr,
                   "bp::revolve::Schedule: n = %lld steps, c = %d snapshots; both must be >= 1\n",
                   (long long)n, c);
      std::exit(2);
    }
    for (int32_t s = c - 1; s >= 0; s--) free_slots_.push_back(s);
  }
  int64_t steps() const { return n_; }
  int32_t snapshots() const { return c_; }

  Move next() {
    if (!started_) {  // state_0 is the first snapshot: the root range starts from it
      started_ = true;
      const int32_t slot = take_slot();
      ranges_.push_back({0, n_, c_, slot});
      at_ = 0;
      return {Action::store, 0, slot};
    }
    if (pending_store_) {  // the second half of "advance to the split, store it there"
      pending_store_ = false;
      const Range& right = ranges_.back();
      return {Action::store, right.start, right.slot};
    }
    if (ranges_.empty()) return {Action::done, n_, -1};
    Range& r = ranges_.back();
    if (r.end == r.start) {  // every step of the range reversed: its snapshot goes
      const Range done = r;
      ranges_.pop_back();
      free_slots_.push_back(done.slot);
      return {Action::free, done.start, done.slot};
    }
    if (at_ == r.end - 1) {  // the state before the range's last step: reverse that step
      r.end--;
      at_ = -1;  // the taped forward and backward leave no state to continue from
      return {Action::reverse, r.end, -1};
    }
    if (at_ != r.start) {
      at_ = r.start;
      return {Action::restore, r.start, r.slot};
    }
    const int64_t length = r.end - r.start;  // >= 2 here
    if (r.snapshots == 1) {                  // only the range's own: advance to its last step
      at_ = r.end - 1;
      return {Action::advance, at_, -1};
    }
    // The binomial split (Griewank and Walther): the right part [start + m, end) is reversed
    // first with one snapshot fewer, each of its steps advanced at most r times; the left part
    // [start, start + m) afterwards with all of them, at most r - 1 more times, since the
    // advance to the split already ran it once. m as small as the right part allows, but past
    // beta(c, r - 2), where the left part would need fewer repetitions than it is given.
    const int64_t reps = repetitions(length, r.snapshots);
    const uint64_t right_max = std::min(beta(r.snapshots - 1, reps), uint64_t(length));
    int64_t m = length - int64_t(right_max);
    const uint64_t left_floor = beta(r.snapshots, reps - 2);
    if (m <= int64_t(left_floor)) m = int64_t(left_floor) + 1;
    if (m < 1) m = 1;
    if (m > length - 1) m = length - 1;
    const int64_t split = r.start + m;
    const Range right{split, r.end, r.snapshots - 1, take_slot()};
    r.end = split;  // r is now the left part, with r's snapshot
    ranges_.push_back(right);
    at_ = split;
    pending_store_ = true;
    return {Action::advance, split, -1};
  }

 private:
  // A range of steps still to reverse. A split leaves the left part in the range itself (with
  // its snapshot) and pushes the right part, with a new snapshot, above it.
  struct Range {
    int64_t start, end;  // steps [start, end); the state `start` is in snapshot `slot`
    int32_t snapshots;   // snapshots the range may hold, its own included
    int32_t slot;
  };
  int32_t take_slot() {
    if (free_slots_.empty()) {  // the split rule never needs more than c: a bug, not bad input
      std::fprintf(stderr, "bp::revolve::Schedule: more than %d snapshots needed (n = %lld)\n", c_,
                   (long long)n_);
      std::abort();
    }
    const int32_t s = free_slots_.back();
    free_slots_.pop_back();
    return s;
  }

  int64_t n_;
  int32_t c_;
  std::vector<Range> ranges_;  // innermost last
  std::vector<int32_t> free_slots_;
  int64_t at_ = -1;  // the state in memory, -1 after a reverse
  bool started_ = false, pending_store_ = false;
};

}  // namespace bp::revolve
