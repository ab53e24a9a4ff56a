// harness/backend_main.h: the main() of every C++ backend binary (bench_engine, bench_compiled,
// bench_libtorch).
//
// It speaks harness/protocol.h. bench_run tells it exactly which instances to run (--instance,
// each already named and validated); run by hand, it registers every workload of the registry at
// its default sizes, so Google Benchmark's own flags work as usual:
//   build/bench_engine --benchmark_filter=small_graph
//   build/bench_engine --instance=workload=scalar_chain,size=5000 --benchmark_repetitions=3
//   build/bench_engine --instance=workload=tiny_graph --check_out=/dev/stdout
//   build/bench_compiled --instance=workload=mini_gpt_wide,size=32 --memory_budget=0.5
//   build/bench_compiled --instance=workload=char_mlp,size=1024 --dialect=matmul:blis
//   build/bench_compiled --instance=workload=mini_gpt,size=8 --time_first_step   # cold starts
//   build/bench_compiled --kernel_rows --instance=workload=char_mlp,size=1024
// --backend_name=NAME: what the results call the backend (bench_run names its variants so).
// Every workload of a kind the backend implements (B::implements, held to its concept at compile
// time) is instantiated on it: a workload that does not compile on a backend that claims its kind
// is a build error, never a silent skip. Workloads of a kind the backend does not implement are
// reported as skipped, with that reason.
//
// Test hook: BACKPROP_BENCH_FAULT=KIND:TEXT breaks the instances whose benchmark name contains
// TEXT, so the tests can prove that the runner survives and reports it (harness/tests/). KIND is
// `crash`, `hang`, `oom` or `slowN` (while benchmarking; `slowN` does every timed step N times,
// 2 to 100, a regression bench_run compare must catch), `check-crash`, `wrong`, `nan` or `reset`
// (during the check; `wrong` adds 1 to every value and loss it reports, `nan` makes them NaN,
// `reset` adds 1 only to the repeated step's).
#pragma once

#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <new>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "engine/dialects.h"
#include "harness/json.h"
#include "harness/names.h"
#include "harness/proc.h"
#include "harness/protocol.h"
#include "workloads/data.h"
#include "workloads/registry.h"

namespace bp {

// What a backend binary tells the harness about itself.
struct BackendInfo {
  std::string version;                                       // e.g. libtorch 1.13.1
  int max_threads = 1;                                       // --threads accepts 1..max_threads
  std::function<void(int)> set_threads = [](int) {};         // called once, before any work
  std::function<void()> before_work = [] {};                 // process settings, first thing
  std::vector<std::pair<std::string, std::string>> context;  // extra context (e.g. the BLAS)
  // context known only after set_threads ran (what the libraries report back)
  std::function<std::vector<std::pair<std::string, std::string>>()> late_context = [] {
    return std::vector<std::pair<std::string, std::string>>{};
  };
  // --kernel_rows: registers kernel benchmarks on the instances' shapes instead of their steps
  // (bench_compiled: harness/kernel_rows.h); null: the flag is refused.
  std::function<void(const std::vector<InstanceSpec>&)> kernel_rows;
};

[[noreturn]] inline void backend_usage_error(const std::string& what) {
  fmt::print(stderr, "error: {}\n", what);
  std::exit(2);
}

// The test hook described at the top of this file: crashes and hangs happen here; returns the
// fault's kind for this benchmark ("" for none).
inline std::string inject_fault(const std::string& name, bool checking) {
  const char* spec = std::getenv("BACKPROP_BENCH_FAULT");
  const char* colon = spec ? std::strchr(spec, ':') : nullptr;
  if (!colon || name.find(colon + 1) == std::string::npos) return "";
  const std::string kind(spec, colon);
  if (kind == (checking ? "check-crash" : "crash")) {
    fmt::print(stderr, "BACKPROP_BENCH_FAULT: crashing in {}\n", name);
    std::abort();
  }
  if (kind == "hang" && !checking)
    while (true) std::this_thread::sleep_for(std::chrono::seconds(1));
  if (kind == "oom" && !checking) throw std::bad_alloc();
  return kind;
}

// The fault `slowN`: N steps per timed iteration (0: no such fault).
inline int slowdown(const std::string& fault) {
  if (fault.rfind("slow", 0) != 0) return 0;
  const std::optional<int64_t> n = parse_whole(fault.substr(4));
  if (!n || *n < 2 || *n > 100)
    backend_usage_error("BACKPROP_BENCH_FAULT=" + fault + ": slowN, N 2 to 100");
  return int(*n);
}

// --take_turns (harness/protocol.h): before each repetition's timed loop, say ready on fd 4 and
// wait for "go" on fd 3; the runner closing fd 3 instead means it wants no more: stop, quietly.
// Google Benchmark's first repetition is the last call of its iteration search (1, 10, 100...
// iterations until --benchmark_min_time is reached), and every later one repeats that count: so
// the first call of a benchmark waits for its turn and its search runs within that turn, and
// after it a call waits only when its count equals the previous call's (a repetition; the search
// strictly grows the count). Each repetition is then one turn, as in the Python backends.
inline bool g_take_turns = false;
inline void wait_for_turn(const std::string& benchmark, int64_t iterations) {
  static std::string previous_benchmark;
  static int64_t previous_iterations = -1;
  const bool repetition = benchmark != previous_benchmark || iterations == previous_iterations;
  previous_benchmark = benchmark, previous_iterations = iterations;
  if (!g_take_turns || !repetition) return;
  if (write(4, "ready\n", 6) != 6) std::_Exit(0);
  for (char c = 0; c != '\n';)
    if (read(3, &c, 1) != 1) std::_Exit(0);
}

// The corpus the model workloads read, loaded once by backend_main before anything runs.
inline Corpus& loaded_corpus() {
  static Corpus corpus;
  return corpus;
}

// ---- the timed loops: setup outside, one workload step per iteration ----
// Peak RSS is reset before the setup, so the counter covers everything this benchmark holds.

template <class B>
void report_counters(benchmark::State& state, const B& backend) {
  state.counters["peak_rss_bytes"] = double(proc_peak_rss_bytes());
  if constexpr (requires { backend.arena_bytes(); })
    state.counters["arena_bytes"] = double(backend.arena_bytes());
  if constexpr (requires { backend.extra_counters(); })  // the compiled mode's plan and timings
    for (const auto& [name, value] : backend.extra_counters()) state.counters[name] = value;
  if constexpr (requires { backend.kernel_report(); })  // which kernel served each op
    state.SetLabel(backend.kernel_report());
}

// An allocation refused: std::bad_alloc (new, our arenas), or libtorch's CPU allocator, which
// throws c10::Error "DefaultCPUAllocator: can't allocate memory: you tried to allocate N bytes".
// The first line of an exception's text: libtorch's errors append a whole backtrace.
inline std::string first_line(const std::exception& e) {
  const std::string text = e.what();
  return text.substr(0, text.find('\n'));
}

inline bool is_out_of_memory(const std::exception& e) {
  return dynamic_cast<const std::bad_alloc*>(&e) || std::strstr(e.what(), "can't allocate memory");
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

// One step of scalar graph W. A backend that has compiled the step replays it without the
// workload's code (the compiled mode: engine/compiled_scalar.h); the check and the timed loop
// both come here, so what is timed is what is checked.
template <class W, class B>
double scalar_step(B& backend, typename W::template Run<B>& run,
                   std::span<double, W::num_grads> grads) {
  if constexpr (requires { backend.replay_scalar_step(std::span<double>(grads)); })
    if (backend.can_replay_scalar_step()) return backend.replay_scalar_step(grads);
  return run.step(backend, grads);
}

// --time_first_step: each iteration is a whole cold start, timed: the backend made, the workload
// set up, its first step run (for the compiled mode: captured, kernels chosen with auto's
// verdicts forgotten, planned, run). Only for backends that compile (first_step_seconds).
inline bool g_time_first_step = false;

// One cold start of workload W on B per iteration (--time_first_step); the counters are the last
// one's.
template <class W, class B, class... Corpus>
void bench_first_step(benchmark::State& state, int64_t size, const Corpus&... corpus) {
  std::optional<B> backend;
  std::optional<typename W::template Run<B>> run;
  for (auto _ : state) {
    run.reset(), backend.reset();
    DialectSelector<float>::forget_verdicts();
    configure(backend.emplace());
    run.emplace(*backend, size, corpus...);
    if constexpr (ScalarWorkload<W>) {
      std::array<double, W::num_grads> grads{};
      benchmark::DoNotOptimize(
          scalar_step<W>(*backend, *run, std::span<double, W::num_grads>(grads)));
    } else {
      benchmark::DoNotOptimize(run->step(*backend));
    }
  }
  report_counters(state, *backend);
}

// --warm_once (harness/protocol.h): a benchmark's setup, warmed up, is kept from one call to
// the next of the same benchmark (Google Benchmark calls the function once per repetition, after
// the calls of its iteration search), so the repetitions of a long step follow one another on
// one run. A call takes it and puts it back only when it returns normally: an exception drops it.
inline bool g_warm_once = false;
template <class Setup>
struct KeptSetup {
  static inline std::unique_ptr<Setup> setup;
  static inline std::string owner;
  static std::unique_ptr<Setup> take(const std::string& name) {
    if (owner != name) setup.reset();  // another benchmark's: freed before this one starts
    owner = name;
    return std::move(setup);
  }
  static void keep(std::unique_ptr<Setup> s) {
    if (g_warm_once) setup = std::move(s);
  }
};

template <class W, class B>
void bench_scalar_graph(benchmark::State& state, const std::string& name, int64_t size,
                        int warmup_steps) {
  const int slow = slowdown(inject_fault(name, false));
  struct Setup {
    B backend;
    std::optional<typename W::template Run<B>> run;
  };
  std::unique_ptr<Setup> setup = KeptSetup<Setup>::take(name);
  proc_reset_peak_rss();
  if (g_time_first_step) return bench_first_step<W, B>(state, size);
  const bool fresh = !setup;
  if (fresh) {
    setup = std::make_unique<Setup>();
    configure(setup->backend);
    setup->run.emplace(setup->backend, size);
  }
  B& backend = setup->backend;
  typename W::template Run<B>& run = *setup->run;
  std::array<double, W::num_grads> grads{};
  auto step = [&] {
    const double out = scalar_step<W>(backend, run, std::span<double, W::num_grads>(grads));
    benchmark::DoNotOptimize(out);
    if constexpr (W::num_grads > 0) benchmark::DoNotOptimize(grads);
  };
  if (fresh)
    for (int i = 0; i < warmup_steps; i++) step();
  wait_for_turn(name, state.max_iterations);
  if (slow)  // two loops, so that the hook costs the timed one nothing
    for (auto _ : state)
      for (int i = 0; i < slow; i++) step();
  else
    for (auto _ : state) step();
  report_counters(state, backend);
  if (W::sizes.sized()) state.SetItemsProcessed(state.iterations() * size);  // nodes/s
  KeptSetup<Setup>::keep(std::move(setup));
}

template <class W, class B>
void bench_model(benchmark::State& state, const std::string& name, int64_t size, int warmup_steps) {
  const int slow = slowdown(inject_fault(name, false));
  struct Setup {
    B backend;
    std::optional<typename W::template Run<B>> run;
  };
  std::unique_ptr<Setup> setup = KeptSetup<Setup>::take(name);
  proc_reset_peak_rss();
  if (g_time_first_step) return bench_first_step<W, B>(state, size, loaded_corpus());
  const bool fresh = !setup;
  if (fresh) {
    setup = std::make_unique<Setup>();
    configure(setup->backend);
    setup->run.emplace(setup->backend, size, loaded_corpus());
  }
  B& backend = setup->backend;
  auto step = [&] {
    const double out = setup->run->step(backend);
    benchmark::DoNotOptimize(out);
  };
  if (fresh)
    for (int i = 0; i < warmup_steps; i++) step();
  wait_for_turn(name, state.max_iterations);
  if (slow)
    for (auto _ : state)
      for (int i = 0; i < slow; i++) step();
  else
    for (auto _ : state) step();
  report_counters(state, backend);
  KeptSetup<Setup>::keep(std::move(setup));
}

// ---- the check: raw numbers, in the records of harness/protocol.h ----

inline double check_seconds(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

template <class W, class B>
Json check_scalar_graph(const std::string& name, int64_t size) {
  const std::string fault = inject_fault(name, true);
  const double wrong = fault == "wrong" ? 1.0 : fault == "nan" ? NAN : 0.0;
  const auto start = std::chrono::steady_clock::now();
  B backend;
  configure(backend);
  typename W::template Run<B> run(backend, size);
  auto one_step = [&](double offset) {
    std::array<double, W::num_grads> grads{};
    const double value =
        scalar_step<W>(backend, run, std::span<double, W::num_grads>(grads)) + offset;
    return Json::object_of({{"value", value}, {"grads", Json::numbers(grads)}});
  };
  Json first = one_step(wrong);
  Json second = one_step(wrong + (fault == "reset" ? 1.0 : 0.0));
  return Json::object_of({{"name", name},
                          {"status", "ok"},
                          {"step", std::move(first)},
                          {"step_after_reset", std::move(second)},
                          {"step_seconds", check_seconds(start) / 2}});
}

template <class W, class B>
Json check_model(const std::string& name, int64_t size, int check_steps) {
  const std::string fault = inject_fault(name, true);
  const double wrong = fault == "wrong" ? 1.0 : fault == "nan" ? NAN : 0.0;
  const double broken_reset = fault == "reset" ? 1.0 : 0.0;
  using Run = typename W::template Run<B>;
  // Step 0 up to the gradients: its loss and every parameter's gradient norm (in double).
  auto step0 = [&](B& be, Run& run, double offset = 0) {
    be.zero_grad();
    const double loss = run.forward_backward(be, 0);
    Json norms = Json::array_of();
    std::vector<float> g;
    for (size_t i = 0; i < run.params.size(); i++) {
      g.resize(run.param_sizes[i]);
      be.read_grad(run.params[i], g);
      double sq = 0;
      for (float v : g) sq += double(v) * v;
      norms.push(std::sqrt(sq));
    }
    return Json::object_of({{"loss", loss + wrong + offset}, {"grad_norms", norms}});
  };
  const auto start = std::chrono::steady_clock::now();
  Json record = Json::object_of({{"name", name}, {"status", "ok"}});
  std::vector<double> losses;
  {
    B backend;
    configure(backend);
    Run run(backend, size, loaded_corpus());
    Json first = step0(backend, run);
    backend.end_step();  // no update: the same step again must give the same numbers
    Json again = step0(backend, run, broken_reset);
    losses.push_back(first["loss"].num_or(NAN));
    backend.optimizer_step();
    backend.end_step();
    run.next_batch = 1;
    for (int s = 1; s < check_steps; s++) losses.push_back(run.step(backend) + wrong);
    record.set("step0", std::move(first)).set("step0_after_reset", std::move(again));
  }
  B backend;  // made after the first one trained: state leaking between setups would show
  configure(backend);
  Run run(backend, size, loaded_corpus());
  record.set("step0_fresh_setup", step0(backend, run));
  backend.end_step();
  record.set("step_seconds", check_seconds(start) / (check_steps + 2));
  return record.set("losses", Json::numbers(losses));
}

// ---- instances ----

// One instance on backend B: its benchmark and its check.
struct Job {
  InstanceSpec spec;  // complete: named, with its check steps
  const WorkloadInfo* info = nullptr;
  std::function<void(benchmark::State&)> bench;
  std::function<Json()> check;
};

template <class B>
Job make_job(const InstanceSpec& spec, int warmup) {
  Job job;
  job.spec = spec;
  auto skipped = [&job](const std::string& why) {
    job.bench = [why](benchmark::State& s) { s.SkipWithError(("skipped: " + why).c_str()); };
    job.check = [name = job.spec.name, why] {
      return Json::object_of({{"name", name}, {"status", "skipped"}, {"message", why}});
    };
  };
  auto guarded = [name = spec.name](auto fn) {  // an exception is a failed record, not a crash
    return [name, fn]() -> Json {
      try {
        return fn();
      } catch (const std::exception& e) {
        return Json::object_of({{"name", name},
                                {"status", is_out_of_memory(e) ? "out_of_memory" : "failed"},
                                {"message", first_line(e)}});
      }
    };
  };
  for_each_workload([&]<class W>() {
    if (W::name != spec.workload) return;
    job.info = find_workload(W::name);
    const std::string name = spec.name;
    const int64_t size = *spec.size;
    if constexpr (ScalarWorkload<W>) {
      if constexpr (implements_scalar_graphs(B::implements)) {
        job.bench = [name, size, warmup](benchmark::State& s) {
          reporting_exceptions(s, [&] { bench_scalar_graph<W, B>(s, name, size, warmup); });
        };
        job.check = guarded([name, size] { return check_scalar_graph<W, B>(name, size); });
      } else {
        skipped(fmt::format("{} does not implement scalar graphs (ScalarBackend)", B::name));
      }
    } else {
      if constexpr (implements_models(B::implements)) {
        const int steps = spec.check_steps;
        job.bench = [name, size, warmup](benchmark::State& s) {
          reporting_exceptions(s, [&] { bench_model<W, B>(s, name, size, warmup); });
        };
        job.check = guarded([name, size, steps] { return check_model<W, B>(name, size, steps); });
      } else {
        skipped(fmt::format("{} does not implement models (TensorBackend)", B::name));
      }
    }
  });
  return job;
}

struct BackendFlags {
  std::vector<InstanceSpec> instances;
  std::string check_out, data = kDefaultCorpus;
  int threads = 1, warmup_steps = 3;
  bool kernel_rows = false;
  std::string backend_name;  // --backend_name: what results call this backend (a variant's name)
};

// --memory_budget=BYTES or a fraction in (0, 1]: the compiled mode's planned-arena budget
// (engine/compiled.h), for every benchmark and check of the process; a fraction of the plan's
// peak without recomputation, so 1 recomputes nothing (without the flag the planner recomputes
// what is nearly free: engine/program.h). Backends without a budget refuse the flag.
struct MemoryBudget {
  size_t bytes = 0;
  double fraction = 0;
};
inline MemoryBudget g_memory_budget;
// --dialect=SPEC: how the compiled mode chooses its kernels (engine/dialects.h); its default is
// auto, the fastest measured kernel per op and shape (or a higher-priority one within 10%).
inline std::string g_dialect_spec = "auto";
// --strategy=NAME, --snapshots=C, --interval=K|auto, --checkpoint_dir=DIR: how the recurrent
// workloads go back through time (workloads/backend.h's ThroughTime), for backends that have
// strategies.
inline ThroughTime g_through_time;
template <class B>
void configure(B& backend) {
  if constexpr (requires { backend.use_through_time(g_through_time); })
    backend.use_through_time(g_through_time);
  if constexpr (requires { backend.budget_bytes; }) {
    backend.budget_bytes = g_memory_budget.bytes;
    backend.budget_fraction = g_memory_budget.fraction;
  }
  if constexpr (requires { backend.dialects; }) {
    std::string error;
    backend.dialects = *parse_dialect_spec(g_dialect_spec, &error);  // checked with the flags
  }
}

// One of the flags of g_through_time; a backend without strategies refuses them all.
template <class B>
void parse_through_time(const std::string& arg) {
  const size_t eq = arg.find('=');
  const std::string flag = arg.substr(0, eq), v = arg.substr(eq + 1);
  if constexpr (!requires { B::through_time_strategies; }) {
    backend_usage_error(
        fmt::format("{}: {} has one way back through time (autograd over the unrolled sequence)",
                    arg, B::name));
  } else {
    if (flag == "--strategy") {
      std::vector<std::string_view> valid(std::begin(B::through_time_strategies),
                                          std::end(B::through_time_strategies));
      if (std::find(valid.begin(), valid.end(), v) == valid.end())
        backend_usage_error(
            fmt::format("--strategy={}: {} has {}", v, B::name, fmt::join(valid, ", ")));
      g_through_time.strategy = v;
    } else if (flag == "--snapshots") {
      const std::optional<int64_t> n = parse_whole(v);
      if (!n || *n < 1 || *n > 1 << 20)
        backend_usage_error(fmt::format("--snapshots={}: expected a whole number from 1", v));
      g_through_time.snapshots = int32_t(*n);
    } else if (flag == "--interval") {
      const std::optional<int64_t> n = parse_whole(v);
      if (v != "auto" && (!n || *n < 1))
        backend_usage_error(
            fmt::format("--interval={}: expected auto or a whole number of steps from 1", v));
      g_through_time.interval = v == "auto" ? 0 : *n;
    } else {
      if (v.empty()) backend_usage_error("--checkpoint_dir=: name a directory");
      g_through_time.directory = v;
    }
  }
}

// Takes our flags out of argv (Google Benchmark gets the rest), validates them against the
// registry and completes every instance (name, check steps).
template <class B>
BackendFlags parse_backend_flags(int& argc, char** argv, const BackendInfo& info) {
  BackendFlags flags;
  auto value_of = [](const std::string& arg, std::string_view flag) -> const char* {
    return arg.rfind(flag, 0) == 0 ? arg.c_str() + flag.size() : nullptr;
  };
  int kept = 1;
  for (int i = 1; i < argc; i++) {
    const std::string arg = argv[i];
    std::string error;
    if (const char* v = value_of(arg, "--instance=")) {
      std::optional<InstanceSpec> spec = parse_instance_spec(v, &error);
      if (!spec) backend_usage_error(error);
      flags.instances.push_back(*spec);
    } else if (const char* v = value_of(arg, "--check_out=")) {
      flags.check_out = v;
    } else if (arg == "--take_turns") {
      g_take_turns = true;
    } else if (arg == "--warm_once") {
      g_warm_once = true;
    } else if (const char* v = value_of(arg, "--data=")) {
      flags.data = v;
    } else if (const char* v = value_of(arg, "--warmup_steps=")) {
      const std::optional<int64_t> n = parse_whole(v);
      if (!n || *n < 0 || *n > 1000)
        backend_usage_error(fmt::format("--warmup_steps={}: expected 0 to 1000", v));
      flags.warmup_steps = int(*n);
    } else if (const char* v = value_of(arg, "--memory_budget=")) {
      if constexpr (!requires(B b) { b.budget_bytes; })
        backend_usage_error(fmt::format("--memory_budget={}: {} has no memory budget", v, B::name));
      char* end = nullptr;
      const double x = std::strtod(v, &end);
      if (!*v || *end || !(x > 0) || (x > 1 && x != std::floor(x)))
        backend_usage_error(fmt::format(
            "--memory_budget={}: expected bytes (a whole number above 1) or a fraction of the "
            "unbudgeted plan's peak in (0, 1]",
            v));
      if (x > 1)
        g_memory_budget.bytes = size_t(x);
      else
        g_memory_budget.fraction = x;
    } else if (arg.rfind("--strategy=", 0) == 0 || arg.rfind("--snapshots=", 0) == 0 ||
               arg.rfind("--interval=", 0) == 0 || arg.rfind("--checkpoint_dir=", 0) == 0) {
      parse_through_time<B>(arg);
    } else if (const char* v = value_of(arg, "--backend_name=")) {
      flags.backend_name = v;
    } else if (arg == "--kernel_rows") {
      if (!info.kernel_rows)
        backend_usage_error(fmt::format("--kernel_rows: {} has none", B::name));
      flags.kernel_rows = true;
    } else if (arg == "--time_first_step") {
      if constexpr (!requires(B b) { b.first_step_seconds; })
        backend_usage_error(fmt::format("--time_first_step: {} compiles nothing", B::name));
      g_time_first_step = true;
    } else if (const char* v = value_of(arg, "--dialect=")) {
      if constexpr (!requires(B b) { b.dialects; })
        backend_usage_error(fmt::format("--dialect={}: {} has no kernel dialects", v, B::name));
      else if (!parse_dialect_spec(v, &error))
        backend_usage_error(fmt::format("--dialect={}: {}", v, error));
      g_dialect_spec = v;
    } else if (const char* v = value_of(arg, "--threads=")) {
      const std::optional<int64_t> n = parse_whole(v);
      if (!n || *n < 1 || *n > info.max_threads)
        backend_usage_error(
            fmt::format("--threads={}: this backend runs 1 to {} threads", v, info.max_threads));
      flags.threads = int(*n);
    } else {
      argv[kept++] = argv[i];
    }
  }
  argc = kept;
  if (flags.instances.empty())  // run by hand: everything, at the default sizes
    for (const WorkloadInfo& w : kWorkloads)
      for (int64_t size : w.sizes.defaults())
        flags.instances.push_back(InstanceSpec{.workload = std::string(w.name), .size = size});
  for (InstanceSpec& spec : flags.instances) {
    const WorkloadInfo* w = find_workload(spec.workload);
    if (!w) {
      std::string valid;
      for (const WorkloadInfo& v : kWorkloads)
        valid += (valid.empty() ? "" : ", ") + std::string(v.name);
      backend_usage_error(fmt::format("unknown workload '{}'; valid: {}", spec.workload, valid));
    }
    if (!spec.size) spec.size = w->sizes.defaults()[0];  // 0 for an unsized workload
    if (std::string why = size_error(*w, *spec.size); !why.empty()) backend_usage_error(why);
    if (spec.name.empty()) spec.name = bench_name(*w, *spec.size, B::name, flags.threads);
    if (spec.check_steps == 0) spec.check_steps = w->check_steps_at(spec.size.value_or(0));
  }
  return flags;
}

template <class B>
int backend_main(int argc, char** argv, const BackendInfo& info) {
  if constexpr (implements_scalar_graphs(B::implements)) static_assert(ScalarBackend<B>);
  if constexpr (implements_models(B::implements)) static_assert(TensorBackend<B>);
  info.before_work();
  BackendFlags flags = parse_backend_flags<B>(argc, argv, info);
  info.set_threads(flags.threads);
  const char* sha = std::getenv("BACKPROP_BENCH_GIT_SHA");
  // bench_run's file of auto's kernel verdicts, shared by the run's processes (engine/dialects.h);
  // a cold first step measures its own.
  if (const char* verdicts = std::getenv("BACKPROP_BENCH_DIALECT_VERDICTS"))
    if (!g_time_first_step) DialectSelector<float>::share_verdicts(verdicts);

  std::vector<std::pair<std::string, std::string>> context = {
      {"backend", flags.backend_name.empty() ? std::string(B::name) : flags.backend_name},
      {"backend_version", info.version},
      {"threads", std::to_string(flags.threads)},
      {"warmup_steps", std::to_string(flags.warmup_steps)},
      {"compiler", "g++ " __VERSION__},
      {"cxx_flags", BP_CXX_FLAGS},
      {"cpu_model", proc_cpu_model()},
      {"git_sha", sha ? sha : "unknown (not run by bench_run)"},
  };
  for (auto& kv : proc_environment()) context.push_back(kv);
  context.insert(context.end(), info.context.begin(), info.context.end());
  for (auto& kv : info.late_context()) context.push_back(kv);

  std::vector<Job> jobs;
  int32_t corpus_context = 0;
  for (const InstanceSpec& spec : flags.instances) {
    jobs.push_back(make_job<B>(spec, flags.warmup_steps));
    corpus_context = std::max(corpus_context, jobs.back().info->corpus.context);
  }
  if (corpus_context > 0) {
    try {
      loaded_corpus() = load_corpus(flags.data, size_t(corpus_context) + 1);
    } catch (const std::exception& e) {
      backend_usage_error(e.what());
    }
    context.push_back(
        {"data", fmt::format("{} ({} bytes, vocabulary {})", flags.data,
                             loaded_corpus().tokens.size(), loaded_corpus().vocab_size)});
  }

  if (!flags.check_out.empty()) {
    FILE* out = std::fopen(flags.check_out.c_str(), "w");
    if (!out) backend_usage_error(fmt::format("--check_out={}: cannot write", flags.check_out));
    Json head = Json::object_of({});
    for (const auto& [key, value] : context) head.set(key, value);
    // One record per line, flushed as it is made: a crash later keeps what was checked.
    fmt::print(out, "{{\"context\": {},\n \"records\": [", head.dump());
    for (size_t i = 0; i < jobs.size(); i++) {
      fmt::print(out, "{}\n  {}", i ? "," : "", jobs[i].check().dump());
      std::fflush(out);
    }
    fmt::print(out, "\n]}}\n");
    return std::fclose(out) == 0 ? 0 : 1;
  }

  for (const auto& [key, value] : context) benchmark::AddCustomContext(key, value);
  if (flags.kernel_rows)
    info.kernel_rows(flags.instances);
  else
    for (const Job& job : jobs)
      benchmark::RegisterBenchmark(job.spec.name.c_str(), job.bench)->Unit(benchmark::kMicrosecond);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

}  // namespace bp
