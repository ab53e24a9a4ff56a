// harness/backend_main.h: the main() of every backend binary (bench_engine, bench_libtorch).
//
// A backend binary registers every workload of workloads/registry.h on one backend with Google
// Benchmark and runs either
//   - the benchmarks (all of Google Benchmark's flags work: --benchmark_filter, --benchmark_out,
//     --benchmark_repetitions, ...), each reporting the counter `peak_rss_bytes`, or
//   - the correctness check (--check_out=FILE): every selected instance stepped twice, its value
//     and gradients written as JSON for harness/run.cc to compare across backends.
// Our own flags:
//   --workloads=a,b        only these workloads (default: all)
//   --sizes=KEY=N,N,...    replace the default sizes of every workload sized by KEY (repeatable,
//                          one per key)
//   --threads=N            intra-op threads, for backends that have them (default 1)
//   --data=FILE            the character corpus of the model workloads (default
//                          /usr/share/dict/words); read only if a selected workload needs it
//   --check_out=FILE       run the correctness check instead of the benchmarks
// Bad flags print one line (what is wrong, what is valid) and exit 2.
//
// Test hook: BACKPROP_BENCH_FAULT=KIND:REGEX breaks the matching instances on purpose, so the tests
// can prove that the runner survives and reports it (harness/tests/): KIND is `crash` or `hang`
// (while benchmarking), `check-crash` or `wrong` (during the check; `wrong` adds 1 to the value).
#pragma once

#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <regex.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <span>
#include <thread>
#include <tuple>
#include <vector>

#include "harness/names.h"
#include "harness/proc.h"
#include "harness/text.h"
#include "workloads/data.h"
#include "workloads/registry.h"

namespace bp {

// What a backend binary tells the harness about itself.
struct BackendInfo {
  std::string version;                                      // e.g. libtorch 1.13.1
  int max_threads = 1;                                      // --threads accepts 1..max_threads
  std::function<void(int)> set_threads = [](int) {};        // called once, before any work
  std::function<void()> before_work = [] {};                // process settings, first thing
  std::vector<std::pair<std::string, std::string>> context;  // extra context (e.g. the BLAS)
  // context known only after set_threads ran (what the libraries report back)
  std::function<std::vector<std::pair<std::string, std::string>>()> late_context = [] {
    return std::vector<std::pair<std::string, std::string>>{};
  };
};

[[noreturn]] inline void backend_usage_error(const std::string& what) {
  fmt::print(stderr, "error: {}\n", what);
  std::exit(2);
}

// One workload at one size on one backend: a benchmark and a check.
struct Instance {
  std::string name, instance;
  size_t corpus_bytes = 0;  // the corpus size it needs; 0 if it needs none
  std::function<void(benchmark::State&)> bench;
  std::function<std::string()> check;  // one JSON object
};

// --benchmark_filter semantics of Google Benchmark 1.7.1: POSIX extended regex, a leading '-'
// negates, and "", "all" and "." match everything.
class NameFilter {
 public:
  explicit NameFilter(std::string pattern) {
    if (pattern.empty() || pattern == "all" || pattern == ".") return;
    if (pattern[0] == '-') negate_ = true, pattern.erase(0, 1);
    if (regcomp(&re_, pattern.c_str(), REG_EXTENDED | REG_NOSUB) != 0)
      backend_usage_error(fmt::format("filter '{}' is not a valid regular expression",
                                      pattern));
    active_ = true;
  }
  ~NameFilter() {
    if (active_) regfree(&re_);
  }
  NameFilter(const NameFilter&) = delete;
  bool matches(const std::string& name) const {
    if (!active_) return true;
    return (regexec(&re_, name.c_str(), 0, nullptr, 0) == 0) != negate_;
  }

 private:
  regex_t re_{};
  bool active_ = false, negate_ = false;
};

// The test hook described at the top of this file. Returns true for a `wrong` fault.
inline bool maybe_inject_fault(const std::string& name, bool checking) {
  const char* spec = std::getenv("BACKPROP_BENCH_FAULT");
  if (!spec) return false;
  std::string s = spec;
  const size_t colon = s.find(':');
  if (colon == std::string::npos) return false;
  NameFilter filter(s.substr(colon + 1));
  if (!filter.matches(name)) return false;
  const std::string kind = s.substr(0, colon);
  if (kind == (checking ? "check-crash" : "crash")) {
    fmt::print(stderr, "BACKPROP_BENCH_FAULT: crashing in {}\n", name);
    std::abort();
  }
  if (kind == "hang" && !checking)
    while (true) std::this_thread::sleep_for(std::chrono::seconds(1));
  return kind == "wrong" && checking;
}

// The corpus the model workloads read, loaded once by backend_main before anything runs.
inline Corpus& loaded_corpus() {
  static Corpus corpus;
  return corpus;
}

template <class W>
constexpr bool is_model = ModelWorkload<W>;

// A workload's Run on backend B: scalar workloads take (backend, size), models also the corpus.
template <class W, class B>
auto make_run(B& backend, int64_t size) {
  if constexpr (is_model<W>)
    return typename W::template Run<B>(backend, size, loaded_corpus());
  else
    return typename W::template Run<B>(backend, size);
}

// The timed loop: one workload step per iteration, setup outside it. Peak RSS is reset before the
// setup so that the counter covers everything this benchmark holds.
template <class W, class B>
void run_benchmark(benchmark::State& state, const std::string& name, int64_t size) {
  maybe_inject_fault(name, false);
  proc_reset_peak_rss();
  try {
    B backend;
    auto run = make_run<W, B>(backend, size);
    double out = 0;
    if constexpr (is_model<W>) {
      for (auto _ : state) {
        out = run.step(backend);
        benchmark::DoNotOptimize(out);
      }
    } else {
      std::array<double, W::num_grads + 1> grads{};  // +1: no zero-length array to DoNotOptimize
      for (auto _ : state) {
        out = run.step(backend, std::span<double>(grads.data(), W::num_grads));
        benchmark::DoNotOptimize(out);
        benchmark::DoNotOptimize(grads);
      }
    }
    state.counters["peak_rss_bytes"] = double(proc_peak_rss_bytes());
    if constexpr (requires { backend.arena_bytes(); })
      state.counters["arena_bytes"] = double(backend.arena_bytes());
    if (!W::size_key.empty() && !is_model<W>) state.SetItemsProcessed(state.iterations() * size);
  } catch (const std::exception& e) {
    state.SkipWithError(fmt::format("failed: {}", e.what()).c_str());
  }
}

// The correctness record of one instance. Scalar workloads: the value and gradients of a second
// step (the first must give the same numbers, which checks reset). Models: the step-0 loss, each
// parameter's gradient norm, and the losses of the next training steps (TrainingRun).
template <class W, class B>
std::string check_instance(const std::string& name, const std::string& instance, int64_t size) {
  const bool inject_wrong = maybe_inject_fault(name, true);
  std::string head = fmt::format(R"({{"name": "{}", "instance": "{}", )", name, instance);
  try {
    B backend;
    auto run = make_run<W, B>(backend, size);
    if constexpr (is_model<W>) {
      std::vector<double> v = run.check_values(backend, W::check_steps);
      v[0] += inject_wrong ? 1.0 : 0.0;
      std::string rest, losses = json_number(v[0]);  // losses: step 0, then the steps after
      for (size_t i = 1; i < v.size(); i++) rest += (i > 1 ? ", " : "") + json_number(v[i]);
      for (size_t i = 1 + run.params.size(); i < v.size(); i++) losses += ", " + json_number(v[i]);
      return head + fmt::format(
                        R"("status": "ok", "value": {}, "grads": [{}], "repeat_max_diff": 0, )"
                        R"("known_answer": null, "tolerance": {{"rel": {}, "floor": 1e-12}}, )"
                        R"("losses": [{}]}})",
                        json_number(v[0]), rest, W::check_tolerance, losses);
    } else {
      std::vector<double> first(W::num_grads), second(W::num_grads);
      const double v1 = run.step(backend, first);
      const double v2 = run.step(backend, second) + (inject_wrong ? 1.0 : 0.0);
      double repeat_diff = std::fabs(v1 - v2 + (inject_wrong ? 1.0 : 0.0));
      for (int i = 0; i < W::num_grads; i++)
        repeat_diff = std::max(repeat_diff, std::fabs(first[i] - second[i]));
      std::string grads;
      for (int i = 0; i < W::num_grads; i++)
        grads += (i ? ", " : "") + json_number(second[i]);
      std::string known = "null";
      if constexpr (W::known != nullptr) {
        double diff = std::fabs(v2 - W::known->value);
        for (int i = 0; i < W::known->num_grads; i++)
          diff = std::max(diff, std::fabs(second[i] - W::known->grads[i]));
        known = fmt::format(R"({{"max_diff": {}, "tolerance": {}}})", json_number(diff),
                            W::known->tolerance);
      }
      return head + fmt::format(
                        R"("status": "ok", "value": {}, "grads": [{}], "repeat_max_diff": {}, )"
                        R"("known_answer": {}, "tolerance": {{"rel": {}, "floor": 1}}}})",
                        json_number(v2), grads, json_number(repeat_diff), known,
                        W::check_tolerance);
    }
  } catch (const std::exception& e) {
    return head + fmt::format(R"("status": "failed", "message": "{}"}})", json_escape(e.what()));
  }
}

struct BackendFlags {
  std::string check_out, filter, data = "/usr/share/dict/words";
  std::vector<std::pair<std::string, std::vector<int64_t>>> sizes;  // key -> sizes
  std::vector<std::string> workloads;
  int threads = 1;
};

// Takes our flags out of argv (Google Benchmark gets the rest) and validates them.
inline BackendFlags parse_backend_flags(int& argc, char** argv, const BackendInfo& info) {
  BackendFlags flags;
  std::vector<std::string> all_workloads, size_keys;
  std::apply([&](auto... w) { (all_workloads.emplace_back(decltype(w)::name), ...); }, Workloads{});
  std::apply([&](auto... w) { (size_keys.emplace_back(decltype(w)::size_key), ...); }, Workloads{});
  auto value_of = [](const std::string& arg, std::string_view flag) -> const char* {
    return arg.rfind(flag, 0) == 0 ? arg.c_str() + flag.size() : nullptr;
  };
  auto to_int = [](const std::string& text, const std::string& flag) {
    int64_t v = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || end != text.data() + text.size() || text.empty())
      backend_usage_error(fmt::format("{}: '{}' is not a whole number", flag, text));
    return v;
  };
  int kept = 1;
  for (int i = 1; i < argc; i++) {
    const std::string arg = argv[i];
    if (const char* v = value_of(arg, "--check_out=")) {
      flags.check_out = v;
    } else if (const char* v = value_of(arg, "--workloads=")) {
      for (const std::string& w : split(v, ','))
        if (std::find(all_workloads.begin(), all_workloads.end(), w) == all_workloads.end())
          backend_usage_error(fmt::format("unknown workload '{}'; valid: {}", w,
                                          fmt::join(all_workloads, ", ")));
        else
          flags.workloads.push_back(w);
    } else if (const char* v = value_of(arg, "--sizes=")) {
      const std::string spec = v;
      const size_t eq = spec.find('=');
      if (eq == std::string::npos)
        backend_usage_error(fmt::format("--sizes='{}': expected KEY=N,N,... (e.g. nodes=10,1000)",
                                        spec));
      std::vector<int64_t> values;
      for (const std::string& n : split(spec.substr(eq + 1), ','))
        values.push_back(to_int(n, "--sizes"));
      flags.sizes.emplace_back(spec.substr(0, eq), values);
    } else if (const char* v = value_of(arg, "--data=")) {
      flags.data = v;
    } else if (const char* v = value_of(arg, "--threads=")) {
      flags.threads = int(to_int(v, "--threads"));
      if (flags.threads < 1 || flags.threads > info.max_threads)
        backend_usage_error(fmt::format("--threads={}: this backend runs 1 to {} threads",
                                        flags.threads, info.max_threads));
    } else {
      if (const char* v = value_of(arg, "--benchmark_filter=")) flags.filter = v;
      argv[kept++] = argv[i];
    }
  }
  argc = kept;
  // Google Benchmark 1.7.1 treats a filter that does not compile as matching nothing; say why.
  NameFilter validate_filter(flags.filter);
  for (const auto& [key, values] : flags.sizes) {
    bool found = false;
    std::apply([&](auto... w) {
      auto check = [&](auto wl) {
        using W = decltype(wl);
        if (W::size_key != key) return;
        found = true;
        for (int64_t n : values)
          if (n < W::min_size || n > W::max_size)
            backend_usage_error(fmt::format("--sizes: {}={} is out of range for {} ({} to {})",
                                            key, n, W::name, W::min_size, W::max_size));
      };
      (check(w), ...);
    }, Workloads{});
    if (!found) {
      std::vector<std::string> unique_keys;
      for (const std::string& k : size_keys)
        if (!k.empty() && std::find(unique_keys.begin(), unique_keys.end(), k) == unique_keys.end())
          unique_keys.push_back(k);
      backend_usage_error(fmt::format("--sizes: no workload is sized by '{}'; size keys: {}", key,
                                      fmt::join(unique_keys, ", ")));
    }
  }
  return flags;
}

// Every instance of every selected workload on backend B, in registry order.
template <class B>
std::vector<Instance> make_instances(const BackendFlags& flags) {
  std::vector<Instance> out;
  const std::string threads = std::to_string(flags.threads);
  auto add = [&](auto wl) {
    using W = decltype(wl);
    if (!flags.workloads.empty() &&
        std::find(flags.workloads.begin(), flags.workloads.end(), W::name) == flags.workloads.end())
      return;
    std::vector<int64_t> sizes(W::default_sizes.begin(), W::default_sizes.end());
    for (const auto& [key, values] : flags.sizes)
      if (!W::size_key.empty() && W::size_key == key) sizes = values;
    for (int64_t size : sizes) {
      std::vector<NameKey> keys;
      if (!W::size_key.empty()) keys.push_back({std::string(W::size_key), std::to_string(size)});
      keys.push_back({"threads", threads});
      Instance inst;
      if constexpr (is_model<W>)
        if (W::needs_corpus) inst.corpus_bytes = size_t(W::context) + 1;
      inst.name = bench_name(W::phase, W::name, B::name, keys);
      inst.instance = parse_bench_name(inst.name)->instance();
      if constexpr (requires { typename W::template Run<B>; }) {
        inst.bench = [name = inst.name, size](benchmark::State& s) {
          run_benchmark<W, B>(s, name, size);
        };
        inst.check = [name = inst.name, id = inst.instance, size] {
          return check_instance<W, B>(name, id, size);
        };
      } else {
        const std::string why = fmt::format("skipped: {} cannot run {} (its Run<B> requires more "
                                            "than this backend offers)", B::name, W::name);
        inst.bench = [why](benchmark::State& s) { s.SkipWithError(why.c_str()); };
        inst.check = [name = inst.name, id = inst.instance, why] {
          return fmt::format(R"({{"name": "{}", "instance": "{}", "status": "skipped", )"
                             R"("message": "{}"}})", name, id, why);
        };
      }
      out.push_back(std::move(inst));
    }
  };
  std::apply([&](auto... w) { (add(w), ...); }, Workloads{});
  return out;
}

template <class B>
int backend_main(int argc, char** argv, const BackendInfo& info) {
  info.before_work();
  BackendFlags flags = parse_backend_flags(argc, argv, info);
  info.set_threads(flags.threads);
  const char* sha = std::getenv("BACKPROP_BENCH_GIT_SHA");

  std::vector<std::pair<std::string, std::string>> context = {
      {"backend", std::string(B::name)},
      {"backend_version", info.version},
      {"threads", std::to_string(flags.threads)},
      {"compiler", "g++ " __VERSION__},
      {"cxx_flags", BP_CXX_FLAGS},
      {"cpu_model", proc_cpu_model()},
      {"git_sha", sha ? sha : "unknown (not run by bench_run)"},
  };
  context.insert(context.end(), info.context.begin(), info.context.end());
  for (auto& kv : info.late_context()) context.push_back(kv);

  std::vector<Instance> instances = make_instances<B>(flags);
  NameFilter filter(flags.filter);
  size_t corpus_bytes = 0;
  for (const Instance& inst : instances)
    if (filter.matches(inst.name)) corpus_bytes = std::max(corpus_bytes, inst.corpus_bytes);
  if (corpus_bytes > 0) {
    try {
      loaded_corpus() = load_corpus(flags.data, corpus_bytes);
    } catch (const std::exception& e) {
      backend_usage_error(e.what());
    }
    context.push_back({"data", fmt::format("{} ({} bytes, vocabulary {})", flags.data,
                                           loaded_corpus().tokens.size(),
                                           loaded_corpus().vocab_size)});
  }
  if (!flags.check_out.empty()) {
    FILE* out = std::fopen(flags.check_out.c_str(), "w");
    if (!out) backend_usage_error(fmt::format("--check_out={}: cannot write", flags.check_out));
    fmt::print(out, "{{\n  \"context\": {{");
    for (size_t i = 0; i < context.size(); i++)
      fmt::print(out, "{}\"{}\": \"{}\"", i ? ", " : "", context[i].first,
                 json_escape(context[i].second));
    fmt::print(out, "}},\n  \"results\": [");
    bool first = true;
    for (const Instance& inst : instances) {
      if (!filter.matches(inst.name)) continue;
      fmt::print(out, "{}\n    {}", first ? "" : ",", inst.check());
      std::fflush(out);  // a crash later keeps what was checked
      first = false;
    }
    fmt::print(out, "\n  ]\n}}\n");
    return std::fclose(out) == 0 ? 0 : 1;
  }

  for (const auto& [key, value] : context) benchmark::AddCustomContext(key, value);
  for (const Instance& inst : instances)
    benchmark::RegisterBenchmark(inst.name.c_str(), inst.bench)->Unit(benchmark::kMicrosecond);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

}  // namespace bp
