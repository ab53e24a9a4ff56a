// harness/runner/results.h: the one reader of benchmark results. read_benchmark_result turns one
// process's Google Benchmark JSON into seconds and bytes (the median over repetitions, its unit
// converted once, its distribution-free interval); merge_rounds makes one file of a benchmark's
// rounds; a Cell is one benchmark of a run as the tables show it (harness/runner/summary.h).
//   Tests: harness/runner/results_test.cc, and harness/tests/ on real runs.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "harness/common/json.h"
#include "workloads/workload.h"

namespace bp {

// The version of what a run writes (run.json, summary.json): 2 added run.json, paired ratios,
// repetition times, options and backend contexts in the summary; 1 had none of them (and no
// "format_version" key). Readers of older runs (bench_run compare) refuse them in one line.
inline constexpr int kResultFormat = 2;

// The median of x (NaN if empty): the middle value, or the mean of the two middle ones.
inline double median_of(std::vector<double> x) {
  if (x.empty()) return NAN;
  std::sort(x.begin(), x.end());
  const size_t n = x.size();
  return n % 2 ? x[n / 2] : (x[n / 2 - 1] + x[n / 2]) / 2;
}

// A distribution-free interval for the median of n repetitions: between the k-th smallest and
// the k-th largest, where the median lies with probability 1 - 2 P(Binomial(n, 1/2) < k),
// whatever the distribution of the times. k is the largest that keeps 95%; below 6 repetitions
// none does, and the whole range is given with the level it has (5: 93.75%).
struct MedianInterval {
  double lo = NAN, hi = NAN, level = NAN;
};
inline MedianInterval median_interval(std::vector<double> x) {
  const size_t n = x.size();
  if (n < 2) return {};
  std::sort(x.begin(), x.end());
  auto level_of = [n](size_t k) {  // 1 - 2 sum_{i<k} C(n, i) / 2^n
    double tail = 0, choose = 1;
    for (size_t i = 0; i < k; i++) tail += choose, choose = choose * double(n - i) / double(i + 1);
    return 1 - 2 * tail / std::pow(2.0, double(n));
  };
  size_t k = 1;
  while (k + 1 <= n / 2 && level_of(k + 1) >= 0.95) k++;
  return {x[k - 1], x[n - k], level_of(k)};
}

// Counters a backend may report beyond time and memory, carried into summary.json as they are:
// the compiled mode's plan, its time to first step and what choosing its kernels took
// (engine/compiled/backend.h); what the recurrent workloads' strategies did in their last sequence.
inline constexpr const char* kExtraCounters[] = {
    "arena_bytes", "planned_arena_bytes", "lower_bound_bytes", "unplanned_bytes", "instructions",
    "bytes_moved", "bytes_moved_unfused", "fused_groups", "fused_instructions", "compile_seconds",
    "first_step_seconds", "memory_budget_bytes", "recomputed_nodes", "dialect_selection_seconds",
    "jit_seconds", "generated_code_bytes",
    // the recurrent workloads' strategies (engine/backend.h, engine/checkpoint/checkpoint.h)
    "snapshots", "most_snapshots_alive", "advanced_steps", "advanced_per_step",
    "predicted_advanced_per_step", "advance_seconds", "measured_advance_ratio", "reverse_seconds",
    "interval", "interval_given", "records", "bytes_written", "bytes_read", "write_wait_seconds",
    "read_wait_seconds", "write_seconds_measured", "step_seconds_measured", "o_direct",
    // data-parallel rows (apps/bench_ranks.cc, bench_libtorch and pytorch_bench.py --ranks)
    "step_seconds_slowest_rank", "peak_rss_bytes_most_of_ranks",
    "optimizer_state_bytes_most_of_ranks"};

struct BenchmarkResult {
  std::string status = "failed";  // ok | failed | skipped
  std::string message;
  double median_seconds = NAN;  // median over repetitions of the real time of one step
  MedianInterval interval;      // of that median, in seconds (harness/runner/results.h)
  double peak_rss_bytes = NAN;  // the benchmark's own counter (high-water mark during it)
  // The largest of the repetitions' counters. A repetition resets the high-water mark before it
  // runs (harness/common/proc.h), which the kernel's ru_maxrss follows: a peak before the last
  // reset (a setup run once for all repetitions, --warm_once) is in this counter and not in
  // wait4's.
  double largest_peak_rss_bytes = NAN;
  double items_per_second = NAN;           // scalar_chain: nodes per second
  std::vector<double> repetition_seconds;  // each repetition's time per step, in their order
  std::map<std::string, double> counters;  // those of kExtraCounters it reported (median)
};

inline double seconds_per_unit(const std::string& unit) {
  return unit == "s" ? 1 : unit == "ms" ? 1e-3 : unit == "us" ? 1e-6 : unit == "ns" ? 1e-9 : NAN;
}

// A run's time per step: its real time, or a data-parallel row's slowest rank's (each rank times
// its own steps; rank 0 writes the file); its peak RSS, or the largest of every rank's.
inline double step_seconds_of(JsonView run) {
  if (run["step_seconds_slowest_rank"].is_number())
    return run["step_seconds_slowest_rank"].num_or(NAN);
  return run["real_time"].num_or(NAN) * seconds_per_unit(run["time_unit"].str_or("?"));
}
inline double rss_of(JsonView run) {
  return run["peak_rss_bytes_most_of_ranks"].is_number()
             ? run["peak_rss_bytes_most_of_ranks"].num_or(NAN)
             : run["peak_rss_bytes"].num_or(NAN);
}

// One benchmark process's Google Benchmark JSON. The median aggregate when there are
// repetitions; with one repetition Google Benchmark writes no aggregates, and that run is it.
inline BenchmarkResult read_benchmark_result(JsonView file) {
  BenchmarkResult r;
  std::optional<JsonView> chosen;
  std::vector<double>& times = r.repetition_seconds;
  for (JsonView run : file["benchmarks"].elements()) {
    if (run["error_occurred"].bool_or(false)) {
      r.message = run["error_message"].str_or("error");
      r.status = r.message.rfind("skipped", 0) == 0 ? "skipped" : "failed";
      return r;
    }
    if (run["run_type"].str_or("") == "iteration") {
      times.push_back(step_seconds_of(run));
      const double peak = rss_of(run);
      if (peak >= 0 && !(peak <= r.largest_peak_rss_bytes)) r.largest_peak_rss_bytes = peak;
    }
    if (run["run_type"].str_or("") == "aggregate" && run["aggregate_name"].str_or("") == "median")
      chosen = run;
  }
  if (!chosen && times.size() == 1) chosen = file["benchmarks"][0];
  if (!chosen) {
    r.message = "no median in the result file";
    return r;
  }
  r.median_seconds = step_seconds_of(*chosen);
  r.peak_rss_bytes = rss_of(*chosen);
  r.items_per_second = (*chosen)["items_per_second"].num_or(NAN);
  for (const char* name : kExtraCounters)
    if ((*chosen)[name].is_number()) r.counters[name] = (*chosen)[name].num_or(NAN);
  if (!(r.median_seconds >= 0)) {
    r.message = "no time in the result file";
    return r;
  }
  r.interval = median_interval(times);
  r.status = "ok";
  return r;
}

// Rounds (bench_run --rounds): one benchmark's Google Benchmark files, one per round, made one:
// the first's context (with "rounds"), every repetition in round order and renumbered, and each
// aggregate (mean, median, stddev, cv) recomputed over all of them for the times and counters,
// so that a reader of one file (read_benchmark_result, Google Benchmark's compare.py) sees every
// repetition. The files are those of rounds that ended well (a round of one repetition has no
// aggregates of its own: they are made here, as Google Benchmark makes them).
inline Json merge_rounds(const std::vector<Json>& files) {
  std::vector<Json> runs;
  for (JsonView f : files)
    for (JsonView run : f["benchmarks"].elements())
      if (run["run_type"].str_or("") == "iteration") runs.push_back(run.json());
  for (size_t i = 0; i < runs.size(); i++)
    runs[i]["repetition_index"] = int64_t(i), runs[i]["repetitions"] = int64_t(runs.size());
  auto values = [&](const char* field) {
    std::vector<double> v;
    for (JsonView r : runs)
      if (r[field].is_number()) v.push_back(r[field].num_or(NAN));
    return v;
  };
  auto mean = [](const std::vector<double>& v) {
    double sum = 0;
    for (double x : v) sum += x;
    return sum / double(v.size());
  };
  auto stddev = [&](const std::vector<double>& v) {
    const double m = mean(v);
    double sq = 0;
    for (double x : v) sq += (x - m) * (x - m);
    return v.size() > 1 ? std::sqrt(sq / double(v.size() - 1)) : 0.0;
  };
  Json benchmarks = Json(runs);
  if (runs.size() > 1)  // Google Benchmark writes aggregates only over repetitions
    for (const char* kind : {"mean", "median", "stddev", "cv"}) {
      Json a = runs[0];
      const JsonView first = runs[0];
      const std::string name = first["run_name"].str_or(first["name"].str_or("?"));
      a.update(Json::object({{"name", name + "_" + kind},
                             {"run_type", "aggregate"},
                             {"aggregate_name", kind},
                             {"aggregate_unit", std::string(kind) == "cv" ? "percentage" : "time"},
                             {"iterations", int64_t(runs.size())}}));
      std::vector<const char*> fields = {"real_time", "cpu_time", "peak_rss_bytes",
                                         "items_per_second"};
      fields.insert(fields.end(), std::begin(kExtraCounters), std::end(kExtraCounters));
      for (const char* field : fields) {
        const std::vector<double> v = values(field);
        if (v.size() != runs.size()) continue;
        const std::string k = kind;
        a[field] = k == "mean"     ? mean(v)
                   : k == "median" ? median_of(v)
                   : k == "stddev" ? stddev(v)
                                   : stddev(v) / mean(v);
      }
      benchmarks.push_back(std::move(a));
    }
  Json context = JsonView(files[0])["context"].json();
  context["rounds"] = std::to_string(files.size());
  return Json::object({{"context", std::move(context)}, {"benchmarks", std::move(benchmarks)}});
}

// One benchmark of a run: what the runner saw of its process, and what its result file says.
struct Cell {
  std::string status = "not_run";  // ok | failed | timeout | out_of_memory | skipped | not_run
  std::string message;
  double median_seconds = NAN, max_rss_bytes = NAN, peak_rss_bytes = NAN, items_per_second = NAN;
  MedianInterval interval;                 // of median_seconds
  std::vector<double> repetition_seconds;  // in order; repetition i ran in the row's i-th round
  // Wide: the interval spans more than kWideSpread of the median, flagged in tables and plots.
  static constexpr double kWideSpread = 0.10;
  bool wide() const { return interval.hi - interval.lo > kWideSpread * median_seconds; }
  bool verified = true;  // false: the check had nothing to compare it with (harness/runner/judge.h)
  // What its result file says (everything but the runner's own view: max_rss_bytes, file). The
  // process's peak is the larger of wait4's and the repetitions' own (BenchmarkResult).
  void take(const BenchmarkResult& r) {
    max_rss_bytes = std::fmax(max_rss_bytes, r.largest_peak_rss_bytes);  // either may be NaN
    status = r.status, message = r.message;
    median_seconds = r.median_seconds, peak_rss_bytes = r.peak_rss_bytes;
    interval = r.interval, repetition_seconds = r.repetition_seconds;
    items_per_second = r.items_per_second;
    counters = r.counters;
  }
  std::string file;                        // its Google Benchmark JSON, relative to the run folder
  std::vector<double> check_losses;        // models: the training losses its check reported
  std::map<std::string, double> counters;  // kExtraCounters its result file has
  double counter(const std::string& name) const {
    auto it = counters.find(name);
    return it == counters.end() ? NAN : it->second;
  }
};

}  // namespace bp
