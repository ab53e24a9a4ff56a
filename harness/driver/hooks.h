// harness/driver/hooks.h: what a backend binary tells the generic driver about itself
// (BackendHooks), and what the driver was told on its command line (DriverFlags).
//
// The driver (harness/driver/backend_main.h) knows workloads and the protocol, never a backend:
// everything particular to one, its version, its threads, its own flags (the compiled mode's
// --dialect and --memory_budget), its counters, is a hook its main() fills in
// (apps/bench_engine.cc, apps/bench_compiled.cc, apps/bench_libtorch.cc). A hook left empty is a
// capability the backend lacks, and the flag that needs it is refused.
#pragma once

#include <benchmark/benchmark.h>

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "harness/common/protocol.h"
#include "harness/driver/shared_lines.h"
#include "workloads/backend.h"
#include "workloads/data.h"

namespace bp {

using ContextPairs = std::vector<std::pair<std::string, std::string>>;

template <class B>
struct BackendHooks {
  std::string version;                                // e.g. libtorch 1.13.1
  int max_threads = 1;                                // --threads accepts 1..max_threads
  std::function<void(int)> set_threads = [](int) {};  // called once, before any work
  std::function<void()> before_work = [] {};          // process settings, first thing
  ContextPairs context;                               // extra context (e.g. the BLAS)
  std::function<ContextPairs()> late_context = [] { return ContextPairs{}; };  // after set_threads

  // The backend's own flags: each flag the driver does not know is offered here; true if taken.
  // A bad value is the hook's to refuse (backend_usage_error: one line, exit 2).
  std::function<bool(std::string_view arg)> flag = [](std::string_view) { return false; };
  // Applies what the backend's flags set to a backend object just made, before a workload uses it.
  std::function<void(B&)> configure = [](B&) {};
  // --precision=bf16: mixed precision (bfloat16 products, float32 accumulation, master weights
  // and optimizer) set on a backend object just made, before its parameters; null: the backend
  // runs float32 only and the flag is refused.
  std::function<void(B&)> use_bf16;
  // The ways back through time it has (--strategy; the first is autograd over the unrolled
  // sequence) and how one is applied to a backend; empty: the flags are refused.
  std::vector<std::string_view> strategies;
  std::function<void(B&, const ThroughTime&)> use_through_time;
  // After a benchmark's timed loop: counters and a label for its results (peak RSS is the
  // driver's own).
  std::function<void(const B&, benchmark::State&)> report = [](const B&, benchmark::State&) {};
  // After the process waited `seconds` for its turn (--take_turns): what times its own steps
  // (our pool's windows, engine/runtime/threads.h) leaves the wait out, as it is no step's.
  std::function<void(double seconds)> after_wait = [](double) {};
  // --time_first_step: what a cold start must forget (kernel verdicts); null: the backend
  // compiles nothing and the flag is refused.
  std::function<void()> forget_warm_state;
  // --verdicts=FILE: the run's file of kernel verdicts, handed over once; null: refused.
  std::function<void(const SharedLines&)> share_verdicts;
  // --kernel_rows: registers kernel benchmarks on the instances' shapes instead of their steps
  // (studies/kernels/kernel_rows.h); null: refused.
  std::function<void(const std::vector<InstanceSpec>&, const Corpus&)> kernel_rows;
  // --ranks=N: this process is one of N data-parallel ranks started by mpirun (apps/bench_ranks.cc,
  // engine/distributed/); the hook says which rank of how many MPI started. null: one process
  // only, and --ranks above 1 is refused.
  std::function<Shard()> world;
};

struct DriverFlags {
  std::vector<InstanceSpec> instances;
  std::string check_out, data = kDefaultCorpus;
  std::string backend_name;  // --backend_name: what results call this backend (a variant's name)
  std::string verdicts;      // --verdicts: the run's file of kernel verdicts
  int threads = 1, warmup_steps = 3;
  bool bf16 = false;  // --precision=bf16 (fp32 is the default)
  bool kernel_rows = false, take_turns = false, warm_once = false, time_first_step = false;
  std::optional<ThroughTime> through_time;  // --strategy and its companions, when given
  // --ranks=N, --scaling=strong|weak, --iterations=N (data parallel: every rank times the same
  // count of steps, since each step waits for the others)
  int ranks = 1, iterations = 20;
  bool weak_scaling = false;
};

}  // namespace bp
