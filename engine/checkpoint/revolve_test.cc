// engine/checkpoint/revolve_test.cc: Revolve's schedule (engine/checkpoint/revolve.h) executed on a
// model of the states.
//
// The model keeps which state is in memory and which state each snapshot holds, and refuses any
// move that a real chain could not execute (advancing backwards or from no state, restoring an
// empty snapshot, reversing a step out of order or from the wrong state). For c <= 64, over every
// n <= 1000 and, up to n = 5000, every n within 2 of a change of the repetition number r and
// every 61st (every n <= 800 under a sanitizer, where the sweep is ~10x slower), it checks that
// the schedule advances exactly t(n, c) = r n - beta(c + 1, r - 1) steps (Griewank and Walther),
// that it reverses every step once, from n - 1 down to 0, and that it never holds more than c
// snapshots and frees them all. Every n to 5000 passed as well, at some 20 times the work (the
// sum of n): the schedule's shape changes where r does, and those n are all here.
#include "engine/checkpoint/revolve.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <thread>
#include <vector>

namespace {

using bp::revolve::Action;
using bp::revolve::Move;
using bp::revolve::Schedule;

struct ScheduleOutcome {
  int64_t advanced = 0;
  int32_t most_snapshots = 0;
  std::string error;  // the first illegal move, "" if none
};

ScheduleOutcome execute(int64_t n, int32_t c) {
  Schedule schedule(n, c);
  ScheduleOutcome out;
  std::vector<int64_t> snapshot(size_t(c), -1);  // the state each slot holds, -1: empty
  int64_t at = 0, next_reverse = n - 1;          // state_0 is in memory at the start
  int32_t alive = 0;
  auto fail = [&](const Move& m, const char* why) {
    char buf[200];
    std::snprintf(buf, sizeof buf, "n %lld c %d: %s step %lld slot %d: %s", (long long)n, c,
                  bp::revolve::action_names[int(m.action)], (long long)m.step, m.slot, why);
    out.error = buf;
  };
  for (int64_t moves = 0; out.error.empty(); moves++) {
    const Move m = schedule.next();
    if (moves > 64 * (n + 2) * 8) {
      fail(m, "far more moves than the steps need");
      break;
    }
    const bool slot_ok = m.slot >= 0 && m.slot < c;
    switch (m.action) {
      case Action::advance:
        if (at < 0 || m.step <= at || m.step > n) fail(m, "not forward from a state in memory");
        out.advanced += m.step - at;
        at = m.step;
        break;
      case Action::store:
        if (!slot_ok || snapshot[size_t(m.slot)] != -1 || at != m.step)
          fail(m, "not the state in memory into an empty snapshot");
        else
          snapshot[size_t(m.slot)] = m.step, alive++;
        out.most_snapshots = std::max(out.most_snapshots, alive);
        break;
      case Action::restore:
        if (!slot_ok || snapshot[size_t(m.slot)] != m.step)
          fail(m, "the snapshot does not hold it");
        at = m.step;
        break;
      case Action::free:
        if (!slot_ok || snapshot[size_t(m.slot)] != m.step)
          fail(m, "the snapshot does not hold it");
        else
          snapshot[size_t(m.slot)] = -1, alive--;
        break;
      case Action::reverse:
        if (m.step != next_reverse || at != m.step) fail(m, "out of order or from another state");
        next_reverse--;
        at = -1;
        break;
      case Action::done:
        if (next_reverse != -1 || alive != 0) fail(m, "steps left or snapshots held");
        return out;
    }
  }
  return out;
}

TEST(Revolve, BinomialCounts) {
  EXPECT_EQ(bp::revolve::beta(3, 2), 10u);  // C(5, 3)
  EXPECT_EQ(bp::revolve::beta(1, 0), 1u);
  EXPECT_EQ(bp::revolve::beta(4, -1), 0u);
  EXPECT_EQ(bp::revolve::beta(64, 1000000), std::numeric_limits<uint64_t>::max());  // saturates
  // c = 1: every step from state_0 again, 0 + 1 + ... + (n - 1).
  EXPECT_EQ(bp::revolve::forward_steps(10, 1), 45);
  // c >= n - 1: one forward sweep storing every state but the last.
  EXPECT_EQ(bp::revolve::forward_steps(10, 9), 9);
  EXPECT_EQ(bp::revolve::forward_steps(1, 1), 0);
  // n = 10^6, c = 64: C(68, 4) = 814,385 < 10^6 <= C(69, 5) = 11,238,513, so r = 5.
  EXPECT_EQ(bp::revolve::beta(64, 4), 814385u);
  EXPECT_EQ(bp::revolve::repetitions(1000000, 64), 5);
}

TEST(Revolve, EveryScheduleIsLegalMinimalAndWithinItsSnapshots) {
#if defined(__SANITIZE_ADDRESS__)
  const int64_t kEveryStepTo = 800, kMaxSteps = 800;
#else
  const int64_t kEveryStepTo = 1000, kMaxSteps = 5000;
#endif
  auto checked_at = [&](int64_t n, int32_t c) {
    return n <= kEveryStepTo || n % 61 == 0 ||
           bp::revolve::repetitions(n - 2, c) != bp::revolve::repetitions(n + 2, c);
  };
  // Two threads (the CI machines have two cores), each its own values of c; failures are
  // collected and reported from this thread.
  std::vector<std::string> failures[2];
  int64_t checked[2] = {0, 0};
  auto sweep = [&](int half) {
    for (int32_t c = 1 + half; c <= 64; c += 2)
      for (int64_t n = 1; n <= kMaxSteps; n++) {
        if (!checked_at(n, c)) continue;
        const ScheduleOutcome o = execute(n, c);
        const int64_t want = bp::revolve::forward_steps(n, c);
        checked[half]++;
        if (!o.error.empty() || o.advanced != want || o.most_snapshots > c)
          failures[half].push_back("n " + std::to_string(n) + " c " + std::to_string(c) +
                                   ": advanced " + std::to_string(o.advanced) + ", t(n, c) " +
                                   std::to_string(want) + ", snapshots " +
                                   std::to_string(o.most_snapshots) + " " + o.error);
      }
  };
  std::thread other(sweep, 1);
  sweep(0);
  other.join();
  const size_t wrong = failures[0].size() + failures[1].size();
  for (const auto& list : failures)
    for (size_t i = 0; i < list.size() && i < 5; i++) ADD_FAILURE() << list[i];
  std::printf(
      "  %lld schedules (every n <= %lld, then to %lld near each change of r; c <= 64): "
      "%zu wrong\n",
      (long long)(checked[0] + checked[1]), (long long)kEveryStepTo, (long long)kMaxSteps, wrong);
  EXPECT_EQ(wrong, 0u);
}

// A long chain with few snapshots: the schedule holds ranges, not moves.
TEST(Revolve, AMillionStepsWithEightSnapshots) {
  const ScheduleOutcome o = execute(1000000, 8);
  EXPECT_EQ(o.error, "");
  EXPECT_EQ(o.advanced, bp::revolve::forward_steps(1000000, 8));
  EXPECT_LE(o.most_snapshots, 8);
  std::printf("  n 10^6, c 8: %lld steps advanced (%.2f per step), at most %d snapshots\n",
              (long long)o.advanced, double(o.advanced) / 1e6, o.most_snapshots);
}

TEST(Revolve, NoStepsOrNoSnapshotsIsOneLine) {
  EXPECT_EXIT(Schedule(0, 4), testing::ExitedWithCode(2),
              "n = 0 steps, c = 4 snapshots; both must be >= 1");
  EXPECT_EXIT(Schedule(10, 0), testing::ExitedWithCode(2),
              "n = 10 steps, c = 0 snapshots; both must be >= 1");
}

}  // namespace
