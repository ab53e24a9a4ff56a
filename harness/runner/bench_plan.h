// harness/runner/bench_plan.h: how each benchmark is run, and how long the run has left.
//
// By default as the run says (--repetitions, --rounds, --warmup-steps), each repetition on a
// setup of its own. One whose step, as its check timed it, lasts at least --min-time (a step a
// repetition) sets up and warms up once per process and times its repetitions one after another
// on that run (--warm_once, harness/common/protocol.h): a setup and warm-up each would be most of
// its time. One that would still take past --time-budget gets as many repetitions as fit (at
// least 3), two warm-up steps and one round: a long sequence of the recurrent workloads takes
// seconds a step. Two warm-up steps, not one: our engine's first step grows its arenas block by
// block, and its second still runs slower than the third.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>

#include "harness/runner/run_state.h"
#include "harness/runner/summary_text.h"

namespace bp {

struct BenchPlan {
  int repetitions, rounds, warmup_steps;
  double step_seconds = NAN;  // NAN: not timed (no check record of it)
  bool warm_once = false, shortened = false;
  int repetitions_in(int round) const {
    return round >= rounds ? 0 : repetitions / rounds + (round < repetitions % rounds ? 1 : 0);
  }
};

inline BenchPlan plan_of(const RunState& run, const Selected& s, const std::string& b) {
  const Options& o = run.opt;
  BenchPlan p{o.repetitions, o.rounds, o.warmup_steps};
  auto i = run.step_seconds.find(s.id);
  if (i == run.step_seconds.end() || !i->second.count(b)) return p;
  const double step = p.step_seconds = i->second.at(b);
  p.warm_once = step >= o.min_time;
  const double seconds = p.repetitions * std::max(step, o.min_time) +
                         (p.warm_once ? p.rounds : p.repetitions) * p.warmup_steps * step;
  if (!(seconds > o.time_budget)) return p;
  p.shortened = true, p.rounds = 1, p.warmup_steps = std::min(p.warmup_steps, 2);
  p.repetitions = std::clamp(int(o.time_budget / std::max(step, o.min_time)) - p.warmup_steps,
                             std::min(3, o.repetitions), o.repetitions);
  return p;
}

// The seconds a benchmark's round should take: a process started (Python's is the costly one,
// though two start side by side), each repetition's setup and warm-up (or one, with
// --warm_once), and its timed repetitions, whose first also runs Google Benchmark's search for an
// iteration count.
inline double predicted_seconds(const RunState& run, const std::string& b, const BenchPlan& p,
                                int round) {
  const double start = std::strchr(spec_of(b).program, '/') ? 0.8 : 0.1;
  const double step = std::isfinite(p.step_seconds) ? p.step_seconds : 0.01;
  const int reps = p.repetitions_in(round);
  const double setups = (p.warm_once ? 1 : reps) * (p.warmup_steps + 1) * step;
  return start + setups + (reps + 1) * std::max(step, run.opt.min_time);
}

// The progress line of each row: how many benchmarks are done, the time so far, and about how
// long is left. What is left is predicted per benchmark (predicted_seconds) and scaled by how the
// rows so far compared with their own prediction, so a machine slower than the guess is seen.
class Progress {
 public:
  using Clock = std::chrono::steady_clock;
  int total = 0, done = 0, benchmarks = 0, shortened = 0;
  double predicted_total = 0, predicted_done = 0;
  Clock::time_point started = Clock::now();
  std::map<std::string, double> row_predicted;  // "instance#round" -> seconds

  void announce(const RunState& run) const {
    fmt::print(
        "\n{}",
        wrapped(fmt::format(
                    "benchmarks: {} in {} rounds, {} repetitions of >= {} s each in all{}; the "
                    "backends of "
                    "a row take turns, repetition by repetition; medians; about {} in all",
                    benchmarks, run.opt.rounds, run.opt.repetitions, run.opt.min_time,
                    shortened ? fmt::format(
                                    " ({} with steps too long for it: fewer, in one round, to take "
                                    "about {} s each)",
                                    shortened, run.opt.time_budget)
                              : "",
                    clock_text(predicted_total)),
                4));
  }
  // Prints the row's progress line; false if the row has nothing to run in this round.
  bool start_row(const RunState& run, const Selected& s, int round) {
    int in_row = 0;
    for (const auto& [b, name] : s.names) in_row += round < plan_of(run, s, b).rounds;
    if (in_row == 0) return false;
    const int first = done + 1;
    done += in_row;
    const std::string counter = first == done ? fmt::format("[{:>3}/{}]", done, total)
                                              : fmt::format("[{:>3}-{}/{}]", first, done, total);
    const std::string which =
        run.opt.rounds > 1 ? fmt::format(" (round {} of {})", round + 1, run.opt.rounds) : "";
    const double elapsed = std::chrono::duration<double>(Clock::now() - started).count();
    const double pace = predicted_done > 0 ? std::clamp(elapsed / predicted_done, 0.25, 4.0) : 1;
    const double left = (predicted_total - predicted_done) * pace;
    fmt::print("{} {}{}  {} elapsed, about {} left\n", counter, s.id, which, clock_text(elapsed),
               clock_text(left));
    std::fflush(stdout);
    return true;
  }
  void end_row(const Selected& s, int round) { predicted_done += row_predicted[key(s, round)]; }

  static std::string clock_text(double seconds) {
    const int s = int(std::lround(std::max(0.0, seconds)));
    return s >= 3600 ? fmt::format("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
                     : fmt::format("{}:{:02}", s / 60, s % 60);
  }
  static std::string key(const Selected& s, int round) {
    return s.id + "#" + std::to_string(round);
  }
};

inline Progress plan_progress(const RunState& run) {
  Progress p;
  for (const Selected& s : run.selected)
    for (const auto& [b, name] : s.names) {
      const BenchPlan plan = plan_of(run, s, b);
      p.benchmarks++, p.total += plan.rounds, p.shortened += plan.shortened;
      auto v = run.verdicts.find(s.id);
      const bool runs = v != run.verdicts.end() && v->second.count(b) &&
                        (v->second.at(b).status == "ok" || v->second.at(b).status == "unverified");
      if (!runs) continue;
      for (int round = 0; round < plan.rounds; round++) {
        const double t = predicted_seconds(run, b, plan, round);
        p.predicted_total += t;
        p.row_predicted[Progress::key(s, round)] += t;
      }
    }
  return p;
}

}  // namespace bp
