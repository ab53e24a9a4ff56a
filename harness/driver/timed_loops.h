// harness/driver/timed_loops.h: the timed loops of a backend process, one workload step per
// Google Benchmark iteration, the setup outside the loop.
//
// Peak RSS is reset before each setup, so the counter covers everything the benchmark holds.
// --take_turns (harness/common/protocol.h): before each repetition's loop the process says
// ready on fd 4 and waits for "go" on fd 3. --warm_once: a setup, warmed up, is kept from one
// repetition to the next. --time_first_step: each iteration is a whole cold start.
#pragma once

#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>
#include <new>
#include <optional>
#include <span>
#include <string>

#include "harness/common/proc.h"
#include "harness/common/protocol.h"
#include "harness/driver/faults.h"
#include "harness/driver/hooks.h"
#include "harness/driver/rank_progress.h"
#include "workloads/workload.h"

namespace bp {

// The hooks and flags of this process, and what every loop and check needs of them.
template <class B>
struct BackendProcess {
  const BackendHooks<B>& hooks;
  const DriverFlags& flags;
  const Corpus& corpus;

  // A backend object just made, given the options of the command line.
  void configure(B& backend) const {
    hooks.configure(backend);
    if (flags.bf16) hooks.use_bf16(backend);
    if (flags.through_time) hooks.use_through_time(backend, *flags.through_time);
  }
  // One step of scalar graph W: a compiled step replays without the workload's code. The check
  // and the timed loop both come here, so what is timed is what is checked.
  template <class W>
  double scalar_step(B& backend, typename W::template Run<B>& run, GradSpan<W> grads) const {
    if constexpr (ReplaysScalarSteps<B>)
      if (backend.can_replay_scalar_step()) return backend.replay_scalar_step(grads);
    return run.step(backend, grads);
  }
  template <class W>
  auto make_run(B& backend, int64_t size) const {
    if constexpr (ScalarWorkload<W>)
      return std::make_unique<typename W::template Run<B>>(backend, size);
    else
      return std::make_unique<typename W::template Run<B>>(backend, size, corpus);
  }
  template <class W>
  double step(B& backend, typename W::template Run<B>& run) const {
    if constexpr (ScalarWorkload<W>) {
      auto grads = grads_storage<W>(run);
      const double out = scalar_step<W>(backend, run, GradSpan<W>(grads));
      if constexpr (W::num_grads != 0) benchmark::DoNotOptimize(grads);
      return out;
    } else {
      return run.step(backend);
    }
  }
};

// Before each repetition's timed loop, wait for this process's turn. Google Benchmark's first
// repetition is the last call of its iteration search (1, 10, 100... iterations until
// --benchmark_min_time), and every later one repeats that count: so the first call of a
// benchmark waits and its search runs within that turn, and after it a call waits only when its
// count equals the previous call's (the search strictly grows the count). Each repetition is then
// one turn, as in the Python backends. The runner closing fd 3 means no more: stop, quietly.
// Returns the seconds it waited (the backend's own timing of its steps must not count them).
inline double wait_for_turn(const std::string& benchmark, int64_t iterations) {
  static std::string previous_benchmark;
  static int64_t previous_iterations = -1;
  const bool repetition = benchmark != previous_benchmark || iterations == previous_iterations;
  previous_benchmark = benchmark, previous_iterations = iterations;
  if (!repetition) return 0;
  const auto start = std::chrono::steady_clock::now();
  if (write(4, "ready\n", 6) != 6) std::_Exit(0);
  for (char c = 0; c != '\n';)
    if (read(3, &c, 1) != 1) std::_Exit(0);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// An allocation refused: std::bad_alloc (new, our arenas), or libtorch's CPU allocator, which
// throws c10::Error "DefaultCPUAllocator: can't allocate memory: you tried to allocate N bytes".
inline bool is_out_of_memory(const std::exception& e) {
  return dynamic_cast<const std::bad_alloc*>(&e) || std::strstr(e.what(), "can't allocate memory");
}
// The first line of an exception's text: libtorch's errors append a whole backtrace.
inline std::string first_line(const std::exception& e) {
  const std::string text = e.what();
  return text.substr(0, text.find('\n'));
}

// A setup that throws (a corpus too short) fails this benchmark, not the process. Out of memory
// ends the process (each benchmark has its own) with the protocol's status, whether it happened
// in the setup or in the timed loop, which Google Benchmark does not let an exception leave.
template <class Fn>
void reporting_exceptions(benchmark::State& state, Fn&& fn) {
  try {
    fn();
  } catch (const std::exception& e) {
    if (is_out_of_memory(e)) {
      fmt::print(stderr, "out of memory: {}\n", first_line(e));
      std::fflush(stderr);
      std::_Exit(kExitOutOfMemory);
    }
    state.SkipWithError(fmt::format("failed: {}", first_line(e)).c_str());
  }
}

// A benchmark's setup kept from one call to the next of the same benchmark (--warm_once; Google
// Benchmark calls the function once per repetition, after the calls of its iteration search). A
// call takes it and puts it back only when it returns normally: an exception drops it.
template <class Setup>
struct KeptSetup {
  static inline std::unique_ptr<Setup> setup;
  static inline std::string owner;
  static std::unique_ptr<Setup> take(const std::string& name) {
    if (owner != name) setup.reset();  // another benchmark's: freed before this one starts
    owner = name;
    return std::move(setup);
  }
  static void keep(std::unique_ptr<Setup> s) { setup = std::move(s); }
};

// One cold start of W per iteration (--time_first_step): the backend made, the workload set up,
// its first step run (for the compiled mode: captured, kernels chosen afresh, planned, run).
template <class W, class B>
void bench_first_step(benchmark::State& state, const BackendProcess<B>& p, int64_t size) {
  std::unique_ptr<B> backend;
  std::unique_ptr<typename W::template Run<B>> run;
  for (auto _ : state) {
    run.reset(), backend.reset();
    p.hooks.forget_warm_state();
    backend = std::make_unique<B>();
    p.configure(*backend);
    run = p.template make_run<W>(*backend, size);
    benchmark::DoNotOptimize(p.template step<W>(*backend, *run));
  }
  state.counters["peak_rss_bytes"] = double(proc_peak_rss_bytes());
  p.hooks.report(*backend, state);
}

// The steady state of W: set up (or the kept setup), warmed up, then one step per iteration.
template <class W, class B>
void bench_steps(benchmark::State& state, const BackendProcess<B>& p, const InstanceSpec& spec) {
  const int64_t size = *spec.size;
  const std::string fault = inject_fault(spec.name, false);
  const int slow = slowdown(fault);
  struct Setup {
    B backend;
    std::unique_ptr<typename W::template Run<B>> run;
  };
  std::unique_ptr<Setup> setup = KeptSetup<Setup>::take(spec.name);
  proc_reset_peak_rss();
  if (p.flags.time_first_step) return bench_first_step<W>(state, p, size);
  const bool fresh = !setup;
  if (fresh) {
    setup = std::make_unique<Setup>();
    p.configure(setup->backend);
    setup->run = p.template make_run<W>(setup->backend, size);
  }
  const bool rank_fault = is_rank_fault(fault);
  auto timed = [&](auto step) {
    if (fresh)
      for (int i = 0; i < p.flags.warmup_steps; i++) step();
    if (p.flags.take_turns) p.hooks.after_wait(wait_for_turn(spec.name, state.max_iterations));
    const auto start = std::chrono::steady_clock::now();
    if (slow)  // two loops, so that the hook costs the timed one nothing
      for (auto _ : state)
        for (int i = 0; i < slow; i++) step();
    else if (process_shard().ranks > 1)  // each step said (rank_progress) for a rank that hangs
      for (int64_t i = 0; auto _ : state) {
        rank_progress().in_step(i);
        step();
        rank_progress().between_steps(++i);
        if (rank_fault && i == 3) fail_as_the_last_rank(fault, spec.name);
      }
    else
      for (auto _ : state) step();
    timed_loop_seconds() =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  if constexpr (ScalarWorkload<W>) {  // the gradients' array made once, outside the loop
    auto grads = grads_storage<W>(*setup->run);
    timed([&] {
      benchmark::DoNotOptimize(
          p.template scalar_step<W>(setup->backend, *setup->run, GradSpan<W>(grads)));
      if constexpr (W::num_grads != 0) benchmark::DoNotOptimize(grads);
    });
  } else {
    timed([&] { benchmark::DoNotOptimize(setup->run->step(setup->backend)); });
  }
  state.counters["peak_rss_bytes"] = double(proc_peak_rss_bytes());
  p.hooks.report(setup->backend, state);
  if (ScalarWorkload<W> && W::sizes.sized())
    state.SetItemsProcessed(state.iterations() * size);  // nodes/s
  if (p.flags.warm_once) KeptSetup<Setup>::keep(std::move(setup));
}

}  // namespace bp
