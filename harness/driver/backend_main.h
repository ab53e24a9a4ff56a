// harness/driver/backend_main.h: the main() of every C++ backend binary (bench_engine,
// bench_compiled, bench_libtorch), generic over the backend: it includes nothing of one, and
// what is particular to a backend reaches it through that backend's hooks (harness/driver/hooks.h).
//
// It speaks harness/common/protocol.h. bench_run tells it exactly which instances to run
// (--instance, each already named and validated); run by hand, it registers every workload of the
// registry at its default sizes, so Google Benchmark's own flags work as usual:
//   build/bench_engine --benchmark_filter=small_graph
//   build/bench_engine --instance=workload=scalar_chain,size=5000 --benchmark_repetitions=3
//   build/bench_engine --instance=workload=tiny_graph --check_out=/dev/stdout
//   build/bench_compiled --instance=workload=mini_gpt,size=8 --time_first_step   # cold starts
// --backend_name=NAME: what the results call the backend (bench_run names its variants so).
// Every workload of a kind the backend implements (B::implements, held to its concept at compile
// time) is instantiated on it: a workload that does not compile on a backend that claims its kind
// is a build error, never a silent skip. Workloads of a kind the backend does not implement are
// reported as skipped, with that reason. Faults for the tests: harness/driver/faults.h.
#pragma once

#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "harness/common/isa_cap.h"
#include "harness/common/json.h"
#include "harness/common/names.h"
#include "harness/common/proc.h"
#include "harness/common/protocol.h"
#include "harness/driver/check_records.h"
#include "harness/driver/faults.h"
#include "harness/driver/hooks.h"
#include "harness/driver/timed_loops.h"
#include "workloads/data.h"
#include "workloads/registry.h"

namespace bp {

// One instance on backend B: its benchmark and its check.
struct Job {
  InstanceSpec spec;  // complete: named, with its check steps
  const WorkloadInfo* info = nullptr;
  std::function<void(benchmark::State&)> bench;
  std::function<Json()> check;
};

template <class B>
Job make_job(const BackendProcess<B>& p, const InstanceSpec& spec) {
  Job job{.spec = spec, .info = find_workload(spec.workload), .bench = {}, .check = {}};
  auto skipped = [&job](const std::string& why) {
    job.bench = [why](benchmark::State& s) { s.SkipWithError(("skipped: " + why).c_str()); };
    job.check = [name = job.spec.name, why] {
      return Json::object({{"name", name}, {"status", "skipped"}, {"message", why}});
    };
  };
  auto guarded = [name = spec.name](auto fn) {  // an exception is a failed record, not a crash
    return [name, fn]() -> Json {
      try {
        return fn();
      } catch (const std::exception& e) {
        return Json::object({{"name", name},
                             {"status", is_out_of_memory(e) ? "out_of_memory" : "failed"},
                             {"message", first_line(e)}});
      }
    };
  };
  for_each_workload([&]<class W>() {
    if (W::name != spec.workload) return;
    constexpr bool implemented = ScalarWorkload<W> ? implements_scalar_graphs(B::implements)
                                                   : implements_models(B::implements);
    if (ScalarWorkload<W> && p.flags.bf16) {
      skipped("--precision=bf16 is for the float32 models; a scalar graph is computed in double");
    } else if (p.flags.bf16 && !p.hooks.use_bf16) {
      skipped(fmt::format("--precision=bf16: {} runs float32 only", B::name));
    } else if constexpr (!implemented) {
      skipped(fmt::format(
          "{} does not implement {}", B::name,
          ScalarWorkload<W> ? "scalar graphs (ScalarBackend)" : "models (TensorBackend)"));
    } else {
      job.bench = [&p, spec](benchmark::State& s) {
        reporting_exceptions(s, [&] { bench_steps<W>(s, p, spec); });
      };
      if constexpr (ScalarWorkload<W>)
        job.check = guarded([&p, spec] { return check_scalar_graph<W>(p, spec); });
      else
        job.check = guarded([&p, spec] { return check_model<W>(p, spec); });
    }
  });
  return job;
}

// --strategy, --snapshots, --interval, --checkpoint_dir: how the recurrent workloads go back
// through time (workloads/backend.h's ThroughTime); a backend without strategies refuses them.
template <class B>
void parse_through_time(const BackendHooks<B>& hooks, const std::string& arg, DriverFlags& flags) {
  const size_t eq = arg.find('=');
  const std::string flag = arg.substr(0, eq), v = arg.substr(eq + 1);
  if (hooks.strategies.empty())
    backend_usage_error(
        fmt::format("{}: {} has one way back through time (autograd over the unrolled sequence)",
                    arg, B::name));
  ThroughTime& t = flags.through_time ? *flags.through_time : flags.through_time.emplace();
  if (flag == "--strategy") {
    if (std::find(hooks.strategies.begin(), hooks.strategies.end(), v) == hooks.strategies.end())
      backend_usage_error(
          fmt::format("--strategy={}: {} has {}", v, B::name, fmt::join(hooks.strategies, ", ")));
    t.strategy = v;
  } else if (flag == "--snapshots") {
    const std::optional<int64_t> n = parse_whole(v);
    if (!n || *n < 1 || *n > 1 << 20)
      backend_usage_error(fmt::format("--snapshots={}: expected a whole number from 1", v));
    t.snapshots = int32_t(*n);
  } else if (flag == "--interval") {
    const std::optional<int64_t> n = parse_whole(v);
    if (v != "auto" && (!n || *n < 1))
      backend_usage_error(
          fmt::format("--interval={}: expected auto or a whole number of steps from 1", v));
    t.interval = v == "auto" ? 0 : *n;
  } else {
    if (v.empty()) backend_usage_error("--checkpoint_dir=: name a directory");
    t.directory = v;
  }
}

// One of the driver's own flags taken into `flags`; false if it is none of them.
template <class B>
bool parse_driver_flag(const BackendHooks<B>& hooks, const std::string& arg, DriverFlags& flags) {
  auto value_of = [&arg](std::string_view flag) -> const char* {
    return arg.rfind(flag, 0) == 0 ? arg.c_str() + flag.size() : nullptr;
  };
  auto count = [](const char* flag, const char* v, int lo, int hi) {
    const std::optional<int64_t> n = parse_whole(v);
    if (!n || *n < lo || *n > hi)
      backend_usage_error(
          fmt::format("{}{}: expected a whole number from {} to {}", flag, v, lo, hi));
    return int(*n);
  };
  std::string error;
  if (const char* v = value_of("--instance=")) {
    std::optional<InstanceSpec> spec = parse_instance_spec(v, &error);
    if (!spec) backend_usage_error(error);
    flags.instances.push_back(*spec);
  } else if (const char* v = value_of("--check_out=")) {
    flags.check_out = v;
  } else if (arg == "--take_turns") {
    flags.take_turns = true;
  } else if (arg == "--warm_once") {
    flags.warm_once = true;
  } else if (const char* v = value_of("--data=")) {
    flags.data = v;
  } else if (const char* v = value_of("--warmup_steps=")) {
    flags.warmup_steps = count("--warmup_steps=", v, 0, 1000);
  } else if (const char* v = value_of("--threads=")) {
    const std::optional<int64_t> n = parse_whole(v);
    if (!n || *n < 1 || *n > hooks.max_threads)
      backend_usage_error(
          fmt::format("--threads={}: this backend runs 1 to {} threads", v, hooks.max_threads));
    flags.threads = int(*n);
  } else if (const char* v = value_of("--precision=")) {
    if (!valid_precision(v)) backend_usage_error(precision_refusal(arg, v));
    flags.bf16 = std::string_view(v) == "bf16";
  } else if (arg.rfind("--strategy=", 0) == 0 || arg.rfind("--snapshots=", 0) == 0 ||
             arg.rfind("--interval=", 0) == 0 || arg.rfind("--checkpoint_dir=", 0) == 0) {
    parse_through_time(hooks, arg, flags);
  } else if (const char* v = value_of("--backend_name=")) {
    flags.backend_name = v;
  } else if (const char* v = value_of("--verdicts=")) {
    if (!hooks.share_verdicts)
      backend_usage_error(fmt::format("--verdicts={}: {} chooses no kernels", v, B::name));
    if (!*v) backend_usage_error("--verdicts=: name a file");
    flags.verdicts = v;
  } else if (arg == "--kernel_rows") {
    if (!hooks.kernel_rows) backend_usage_error(fmt::format("--kernel_rows: {} has none", B::name));
    flags.kernel_rows = true;
  } else if (const char* v = value_of("--ranks=")) {
    flags.ranks = count("--ranks=", v, 1, 4096);
    if (flags.ranks > 1 && !hooks.world)
      backend_usage_error(
          fmt::format("--ranks={}: {} runs in one process; data parallel is "
                      "bench_ranks under mpirun",
                      v, B::name));
  } else if (const char* v = value_of("--scaling=")) {
    if (std::string_view(v) != "strong" && std::string_view(v) != "weak")
      backend_usage_error(
          fmt::format("--scaling={}: valid: strong (the batch split over the "
                      "ranks), weak (each rank the whole batch)",
                      v));
    flags.weak_scaling = std::string_view(v) == "weak";
  } else if (const char* v = value_of("--iterations=")) {
    flags.iterations = count("--iterations=", v, 1, 1000000);
  } else if (arg == "--time_first_step") {
    if (!hooks.forget_warm_state)
      backend_usage_error(fmt::format("--time_first_step: {} compiles nothing", B::name));
    flags.time_first_step = true;
  } else {
    return false;
  }
  return true;
}

// Takes the driver's and the backend's flags out of argv (Google Benchmark gets the rest),
// validates them against the registry and completes every instance (name, check steps).
template <class B>
DriverFlags parse_backend_flags(int& argc, char** argv, const BackendHooks<B>& hooks) {
  DriverFlags flags;
  const std::optional<Shard> world = hooks.world ? std::optional(hooks.world()) : std::nullopt;
  usage_errors_quiet() = world && world->rank > 0;
  int kept = 1;
  for (int i = 1; i < argc; i++) {
    const std::string arg = argv[i];
    if (parse_driver_flag(hooks, arg, flags) || hooks.flag(arg)) continue;
    // Google Benchmark's own flags go on to it; anything else is a flag of another backend.
    if (arg.rfind("--benchmark_", 0) != 0 && arg.rfind("--v=", 0) != 0)
      backend_usage_error(fmt::format("{}: {} takes no such flag", arg, B::name));
    argv[kept++] = argv[i];
  }
  argc = kept;
  if (world && world->ranks != flags.ranks)  // under mpirun: the ranks it started
    backend_usage_error(
        fmt::format("--ranks={}: mpirun started {} process{}", flags.ranks, world->ranks,
                    world->ranks == 1 ? " (or none: run it under mpirun -n N)" : "es"));
  if (flags.instances.empty())  // run by hand: everything, at the default sizes
    for (const WorkloadInfo& w : kWorkloads)
      for (int64_t size : w.sizes.defaults())
        flags.instances.push_back(InstanceSpec{.workload = std::string(w.name), .size = size});
  for (InstanceSpec& spec : flags.instances) {
    const WorkloadInfo* w = find_workload(spec.workload);
    if (!w) {
      std::vector<std::string_view> valid;
      for (const WorkloadInfo& v : kWorkloads) valid.push_back(v.name);
      backend_usage_error(
          fmt::format("unknown workload '{}'; valid: {}", spec.workload, fmt::join(valid, ", ")));
    }
    if (!spec.size) spec.size = w->sizes.defaults()[0];  // 0 for an unsized workload
    if (std::string why = size_error(*w, *spec.size); !why.empty()) backend_usage_error(why);
    if (spec.name.empty()) spec.name = bench_name(*w, *spec.size, B::name, flags.threads);
    if (spec.check_steps == 0) spec.check_steps = w->check_steps_at(spec.size.value_or(0));
    if (flags.ranks > 1) {
      if (!w->batch_rows)
        backend_usage_error(
            fmt::format("--ranks={}: {} has no batch to shard over ranks", flags.ranks, w->name));
      const std::string why =
          Shard{0, flags.ranks, flags.weak_scaling}.refusal(w->batch_rows(*spec.size));
      if (!why.empty())
        backend_usage_error(
            fmt::format("--ranks={}: {} {}: {}", flags.ranks, w->name, *spec.size, why));
    }
  }
  if (world) {  // this rank's shard of every batch
    if (flags.take_turns && flags.ranks > 1)
      backend_usage_error("--take_turns: ranks wait on each other every step; not with --ranks");
    process_shard() = Shard{world->rank, world->ranks, flags.weak_scaling};
  }
  return flags;
}

// This process's cap on its address space (bench_run's --memory-limit, a data-parallel row's
// share of it per rank): bytes, or "none".
inline std::string address_space_limit_text() {
  rlimit cap{};
  if (getrlimit(RLIMIT_AS, &cap) != 0 || cap.rlim_cur == RLIM_INFINITY) return "none";
  return std::to_string(uint64_t(cap.rlim_cur));
}

// What every result of this process says about where its numbers come from.
template <class B>
ContextPairs result_context(const BackendHooks<B>& hooks, const DriverFlags& flags) {
  const char* sha = std::getenv("BACKPROP_BENCH_GIT_SHA");
  ContextPairs context = {
      {"backend", flags.backend_name.empty() ? std::string(B::name) : flags.backend_name},
      {"backend_version", hooks.version},
      {"threads", std::to_string(flags.threads)},
      {"precision", flags.bf16 ? "bf16" : "fp32"},
      {"isa_cap", isa_cap_in_effect()},
      {"cpus", std::to_string(process_cpus())},
      // every rank on this host runs the threads
      {"oversubscribed", flags.threads * ranks_on_this_host() > process_cpus() ? "yes" : "no"},
      {"warmup_steps", std::to_string(flags.warmup_steps)},
      {"address_space_limit", address_space_limit_text()},
      {"compiler", "g++ " __VERSION__},
      {"cxx_flags", BP_CXX_FLAGS},
      {"cpu_model", proc_cpu_model()},
      {"git_sha", sha ? sha : "unknown (not run by bench_run)"},
      // the busy processes bench_run --background ran beside its timed steps
      {"background", std::getenv("BP_BACKGROUND") ? std::getenv("BP_BACKGROUND") : "none"},
  };
  if (flags.ranks > 1) {  // data parallel: every rank runs the threads above
    context.push_back({"ranks", std::to_string(flags.ranks)});
    context.push_back({"scaling", flags.weak_scaling ? "weak" : "strong"});
  }
  for (auto& kv : proc_environment()) context.push_back(kv);
  context.insert(context.end(), hooks.context.begin(), hooks.context.end());
  for (auto& kv : hooks.late_context()) context.push_back(kv);
  return context;
}

// --check_out: every instance's record, one per line, flushed as it is made, into `<path>.tmp`,
// renamed over `<path>` when every record is in: a crash leaves the records checked so far in the
// temporary file (the runner reads it), and a write that fails (a full disk) removes it and is
// one line and exit 1, never a file cut short under the final name. A path that is not a regular
// file (/dev/stdout, a pipe) is written in place.
inline int write_check_records(const std::string& path, const ContextPairs& context,
                               const std::vector<Job>& jobs) {
  struct stat st {};
  const bool in_place = stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode);
  const std::string tmp = in_place ? path : path + ".tmp";
  FILE* out = std::fopen(tmp.c_str(), "w");
  if (!out) backend_usage_error(fmt::format("--check_out={}: cannot write", path));
  int err = 0;  // the first failure's errno
  const auto failed = [&](bool ok) { return !ok && !err ? (err = errno ? errno : EIO) : err; };
  Json head = Json::object({});
  for (const auto& [key, value] : context) head[key] = value;
  fmt::print(out, "{{\"context\": {},\n \"records\": [", dump_json(head));
  for (size_t i = 0; i < jobs.size(); i++) {
    failed(std::fflush(out) == 0);  // the records so far on disk before a check that may crash
    // Every rank makes every record, a full disk or not: a check's steps are collective, and a
    // rank that stopped making them would leave the others waiting for it forever.
    const auto record = jobs[i].check();
    if (!err) fmt::print(out, "{}\n  {}", i ? "," : "", dump_json(record));
  }
  fmt::print(out, "\n]}}\n");
  failed(std::fflush(out) == 0 && (in_place || fsync(fileno(out)) == 0));
  failed(std::fclose(out) == 0);
  if (!err && !in_place) failed(std::rename(tmp.c_str(), path.c_str()) == 0);
  if (!err) return 0;
  if (!in_place) std::remove(tmp.c_str());
  std::fprintf(stderr, "error: --check_out=%s: cannot write: %s\n", path.c_str(),
               std::strerror(err));
  return 1;
}

// What a rank other than the first prints: nothing (rank 0 reports the run).
struct SilentReporter : benchmark::BenchmarkReporter {
  bool ReportContext(const Context&) override { return true; }
  void ReportRuns(const std::vector<Run>&) override {}
};

template <class B>
int backend_main(int argc, char** argv, const BackendHooks<B>& hooks) {
  if constexpr (implements_scalar_graphs(B::implements)) static_assert(ScalarBackend<B>);
  if constexpr (implements_models(B::implements)) static_assert(TensorBackend<B>);
  hooks.before_work();
  const DriverFlags flags = parse_backend_flags<B>(argc, argv, hooks);
  hooks.set_threads(flags.threads);
  // A kernel's speed depends on the threads it runs with (a library's wake per call): one file of
  // verdicts per thread count, `<file>` at one thread and `<stem>.threads-N<ext>` at N.
  std::string verdicts_file = flags.verdicts;
  if (!verdicts_file.empty() && flags.threads > 1) {
    const size_t dot = verdicts_file.rfind('.'), slash = verdicts_file.rfind('/');
    const size_t at = dot == std::string::npos || (slash != std::string::npos && dot < slash)
                          ? verdicts_file.size()
                          : dot;
    verdicts_file.insert(at, fmt::format(".threads-{}", flags.threads));
  }
  const SharedLines verdicts(verdicts_file);
  // A cold first step measures its own verdicts.
  if (!flags.verdicts.empty() && !flags.time_first_step) hooks.share_verdicts(verdicts);
  ContextPairs context = result_context(hooks, flags);

  Corpus corpus;
  const BackendProcess<B> process{hooks, flags, corpus};
  std::vector<Job> jobs;
  int32_t corpus_context = 0;
  for (const InstanceSpec& spec : flags.instances) {
    jobs.push_back(make_job<B>(process, spec));
    corpus_context = std::max(corpus_context, jobs.back().info->corpus.context);
  }
  if (corpus_context > 0) {
    try {
      corpus = load_corpus(flags.data, size_t(corpus_context) + 1);
    } catch (const std::exception& e) {
      backend_usage_error(e.what());
    }
    context.push_back({"data", fmt::format("{} ({} bytes, vocabulary {})", flags.data,
                                           corpus.tokens.size(), corpus.vocab_size)});
  }
  if (!flags.check_out.empty())  // every rank checks (its steps wait on the others); one writes
    return write_check_records(process_shard().rank == 0 ? flags.check_out : "/dev/null", context,
                               jobs);

  for (const auto& [key, value] : context) benchmark::AddCustomContext(key, value);
  if (flags.kernel_rows)
    hooks.kernel_rows(flags.instances, corpus);
  else
    for (const Job& job : jobs) {
      benchmark::internal::Benchmark* b =
          benchmark::RegisterBenchmark(job.spec.name.c_str(), job.bench);
      b->Unit(benchmark::kMicrosecond);
      if (flags.ranks > 1) b->Iterations(flags.iterations);  // the same on every rank
    }
  if (process_shard().rank > 0)  // one file of results, rank 0's: the others write none
    argc = int(std::remove_if(argv + 1, argv + argc,
                              [](const char* a) {
                                return std::string_view(a).starts_with("--benchmark_out");
                              }) -
               argv);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  if (process_shard().rank > 0) {  // rank 0 reports for all (peak RSS: the most of any rank)
    SilentReporter silent;
    benchmark::RunSpecifiedBenchmarks(&silent);
  } else {
    benchmark::RunSpecifiedBenchmarks();
  }
  benchmark::Shutdown();
  return 0;
}

}  // namespace bp
