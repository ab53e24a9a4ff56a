// harness/driver/faults.h: the test hook that breaks a backend on purpose, so that the tests can
// prove the runner survives and reports it (harness/tests/test_faults.py).
//
// BACKPROP_BENCH_FAULT=KIND:TEXT breaks the instances whose benchmark name contains TEXT. KIND is
// `crash`, `hang`, `oom` or `slowN` while benchmarking (`slowN` runs every timed step N times,
// 2 to 100: a regression `bench_run compare` must catch), or, during the check, `check-crash`,
// `check-hang`, `wrong` (adds 1 to every value and loss reported), `nan` (makes them NaN) or
// `reset` (adds 1 only to the repeated step's). Data-parallel ranks: `rank-crash`, `rank-hang`
// and `rank-stop` make the last rank abort, loop outside its steps, or stop itself (SIGSTOP: it
// can answer nothing) at its third timed step (the runner must end the row, name the rank and
// leave no process); `slow-start` holds every rank 4 s before main, as a
// slow library start would (harness/common/proc.h: a launcher killed then takes its ranks).
// baselines/pytorch/pytorch_bench.py reads the same variable.
#pragma once

#include <fmt/format.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <new>
#include <optional>
#include <string>
#include <thread>

#include "harness/common/text.h"
#include "workloads/data.h"

namespace bp {

// Under mpirun every rank finds the same mistake: only rank 0 says it (usage_errors_quiet()),
// and no rank leaves before it has (usage_errors_wait(): mpirun ends the job at the first rank
// that exits, which could be before rank 0 had printed).
inline bool& usage_errors_quiet() {
  static bool quiet = false;
  return quiet;
}
inline std::function<void()>& usage_errors_wait() {
  static std::function<void()> wait;
  return wait;
}
[[noreturn]] inline void backend_usage_error(const std::string& what) {
  if (!usage_errors_quiet()) fmt::print(stderr, "error: {}\n", what);
  std::fflush(stderr);
  if (usage_errors_wait()) usage_errors_wait()();
  std::exit(2);
}

// Crashes and hangs happen here; returns the fault's kind for this benchmark ("" for none).
inline std::string inject_fault(const std::string& name, bool checking) {
  const char* spec = std::getenv("BACKPROP_BENCH_FAULT");
  const char* colon = spec ? std::strchr(spec, ':') : nullptr;
  if (!colon || name.find(colon + 1) == std::string::npos) return "";
  const std::string kind(spec, colon);
  if (kind == (checking ? "check-crash" : "crash")) {
    fmt::print(stderr, "BACKPROP_BENCH_FAULT: crashing in {}\n", name);
    std::abort();
  }
  if (kind == (checking ? "check-hang" : "hang"))
    while (true) std::this_thread::sleep_for(std::chrono::seconds(1));
  if (kind == "oom" && !checking) throw std::bad_alloc();
  return kind;
}

// rank-crash, rank-hang and rank-stop, on the last rank (workloads/data.h's process_shard) alone.
inline bool is_rank_fault(const std::string& fault) {
  return fault == "rank-crash" || fault == "rank-hang" || fault == "rank-stop";
}
inline void fail_as_the_last_rank(const std::string& fault, const std::string& name) {
  const Shard& me = process_shard();
  if (me.rank != me.ranks - 1) return;
  fmt::print(stderr, "BACKPROP_BENCH_FAULT: rank {} {} in {}\n", me.rank,
             fault == "rank-crash"  ? "crashing"
             : fault == "rank-stop" ? "stopping itself"
                                    : "hanging",
             name);
  std::fflush(stderr);
  if (fault == "rank-crash") std::abort();
  if (fault == "rank-stop") raise(SIGSTOP);
  while (true) std::this_thread::sleep_for(std::chrono::seconds(1));
}

// The fault `slowN`: N steps per timed iteration (0: no such fault).
inline int slowdown(const std::string& fault) {
  if (fault.rfind("slow", 0) != 0) return 0;
  const std::optional<int64_t> n = parse_whole(fault.substr(4));
  if (!n || *n < 2 || *n > 100)
    backend_usage_error("BACKPROP_BENCH_FAULT=" + fault + ": slowN, N 2 to 100");
  return int(*n);
}

// What the check reports under the faults `wrong` and `nan`: added to every number.
inline double check_offset(const std::string& fault) {
  return fault == "wrong" ? 1.0 : fault == "nan" ? NAN : 0.0;
}

}  // namespace bp
