// harness/results.h: the one reader of benchmark results, and the summary built from them.
//
// read_benchmark_result turns one process's Google Benchmark JSON into seconds and bytes (the
// median over repetitions, its unit converted once). The Summary is every benchmark of a run as a
// table: each cell's median, memory and status, and each backend's ratio to the run's reference
// backend. bench_run writes it twice: summary.json, which plots/plot.py draws (it computes no
// number of its own), and summary.txt, the same table for people.
//   Tests: harness/harness_test.cc, and harness/tests/ on real runs.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "harness/json.h"
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
// (engine/compiled.h); what the recurrent workloads' strategies did in their last sequence.
inline constexpr const char* kExtraCounters[] = {
    "arena_bytes", "planned_arena_bytes", "lower_bound_bytes", "unplanned_bytes", "instructions",
    "compile_seconds", "first_step_seconds", "memory_budget_bytes", "recomputed_nodes",
    "dialect_selection_seconds", "jit_seconds", "generated_code_bytes",
    // the recurrent workloads' strategies (engine/backend.h, engine/checkpoint.h)
    "snapshots", "most_snapshots_alive", "advanced_steps", "advanced_per_step",
    "predicted_advanced_per_step", "advance_seconds", "measured_advance_ratio", "reverse_seconds",
    "interval", "interval_given", "records", "bytes_written", "bytes_read", "write_wait_seconds",
    "read_wait_seconds", "write_seconds_measured", "step_seconds_measured", "o_direct"};

struct BenchmarkResult {
  std::string status = "failed";  // ok | failed | skipped
  std::string message;
  double median_seconds = NAN;  // median over repetitions of the real time of one step
  MedianInterval interval;      // of that median, in seconds (harness/results.h)
  double peak_rss_bytes = NAN;  // the benchmark's own counter (high-water mark during it)
  // The largest of the repetitions' counters. A repetition resets the high-water mark before it
  // runs (harness/proc.h), which the kernel's ru_maxrss follows: a peak before the last reset
  // (a setup run once for all repetitions, --warm_once) is in this counter and not in wait4's.
  double largest_peak_rss_bytes = NAN;
  double items_per_second = NAN;           // scalar_chain: nodes per second
  std::vector<double> repetition_seconds;  // each repetition's time per step, in their order
  std::map<std::string, double> counters;  // those of kExtraCounters it reported (median)
};

inline double seconds_per_unit(const std::string& unit) {
  return unit == "s" ? 1 : unit == "ms" ? 1e-3 : unit == "us" ? 1e-6 : unit == "ns" ? 1e-9 : NAN;
}

// One benchmark process's Google Benchmark JSON. The median aggregate when there are
// repetitions; with one repetition Google Benchmark writes no aggregates, and that run is it.
inline BenchmarkResult read_benchmark_result(const Json& file) {
  BenchmarkResult r;
  const Json* chosen = nullptr;
  std::vector<double>& times = r.repetition_seconds;
  for (const Json& run : file["benchmarks"].array) {
    if (run["error_occurred"].boolean) {
      r.message = run["error_message"].str_or("error");
      r.status = r.message.rfind("skipped", 0) == 0 ? "skipped" : "failed";
      return r;
    }
    if (run["run_type"].str_or("") == "iteration") {
      times.push_back(run["real_time"].num_or(NAN) *
                      seconds_per_unit(run["time_unit"].str_or("?")));
      const double peak = run["peak_rss_bytes"].num_or(NAN);
      if (peak >= 0 && !(peak <= r.largest_peak_rss_bytes)) r.largest_peak_rss_bytes = peak;
    }
    if (run["run_type"].str_or("") == "aggregate" && run["aggregate_name"].str_or("") == "median")
      chosen = &run;
  }
  if (!chosen && times.size() == 1) chosen = &file["benchmarks"].array[0];
  if (!chosen) {
    r.message = "no median in the result file";
    return r;
  }
  r.median_seconds =
      (*chosen)["real_time"].num_or(NAN) * seconds_per_unit((*chosen)["time_unit"].str_or("?"));
  r.peak_rss_bytes = (*chosen)["peak_rss_bytes"].num_or(NAN);
  r.items_per_second = (*chosen)["items_per_second"].num_or(NAN);
  for (const char* name : kExtraCounters)
    if ((*chosen)[name].kind == Json::Kind::number) r.counters[name] = (*chosen)[name].number;
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
  for (const Json& f : files)
    for (const Json& run : f["benchmarks"].array)
      if (run["run_type"].str_or("") == "iteration") runs.push_back(run);
  for (size_t i = 0; i < runs.size(); i++)
    runs[i].set("repetition_index", int64_t(i)).set("repetitions", int64_t(runs.size()));
  auto values = [&](const char* field) {
    std::vector<double> v;
    for (const Json& r : runs)
      if (r[field].kind == Json::Kind::number) v.push_back(r[field].number);
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
  Json benchmarks = Json::array_of(runs);
  if (runs.size() > 1)  // Google Benchmark writes aggregates only over repetitions
    for (const char* kind : {"mean", "median", "stddev", "cv"}) {
      Json a = runs[0];
      const std::string name = runs[0]["run_name"].str_or(runs[0]["name"].str_or("?"));
      a.set("name", name + "_" + kind)
          .set("run_type", "aggregate")
          .set("aggregate_name", kind)
          .set("aggregate_unit", std::string(kind) == "cv" ? "percentage" : "time")
          .set("iterations", int64_t(runs.size()));
      std::vector<const char*> fields = {"real_time", "cpu_time", "peak_rss_bytes",
                                         "items_per_second"};
      fields.insert(fields.end(), std::begin(kExtraCounters), std::end(kExtraCounters));
      for (const char* field : fields) {
        const std::vector<double> v = values(field);
        if (v.size() != runs.size()) continue;
        const std::string k = kind;
        a.set(field, k == "mean"     ? mean(v)
                     : k == "median" ? median_of(v)
                     : k == "stddev" ? stddev(v)
                                     : stddev(v) / mean(v));
      }
      benchmarks.push(std::move(a));
    }
  Json context = files[0]["context"];
  context.set("rounds", std::to_string(files.size()));
  return Json::object_of({{"context", std::move(context)}, {"benchmarks", std::move(benchmarks)}});
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
  bool verified = true;  // false: the check had nothing to compare it with (harness/judge.h)
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
};

struct SummaryRow {
  std::string instance;  // harness/names.h
  const WorkloadInfo* workload;
  int64_t size;
  std::map<std::string, Cell> cells;  // backend -> its benchmark of this instance
};

// The smallest size of a sized workload from which a baseline is faster than the reference at
// every larger size measured, each time beyond doubt: its ratio interval wholly below 1 (0: none
// up to `largest`). A crossover is a claim, so a difference inside the noise does not make one.
struct Crossover {
  std::string workload, size_key, baseline;
  int64_t from = 0, largest = 0;
};

struct Summary {
  std::string run_id, reference;        // reference: whom the ratios divide by
  std::vector<std::string> backends;    // in the runner's fixed order
  std::map<std::string, int> threads;   // backend -> threads it ran with
  Json machine;                         // cpu, cores, git sha: the caption of every plot
  Json options = Json::object_of({});   // the runner's: repetitions, min time, warm-up...
  Json contexts = Json::object_of({});  // backend -> its result files' context (versions, BLAS)
  std::vector<SummaryRow> rows;         // in registry order
  Json kernels;                         // kernel_summary of kernels.json; null without one
  Json intervals;                       // intervals.json's rows (bench_run's interval sweep)

  // backend time / reference time, with its interval; NaN unless both ran. The benchmarks of a
  // row take turns (harness/protocol.h), so repetition i of the backend and of the reference ran
  // moments apart: the ratio is the median of the n pairs' ratios, its interval their
  // median_interval, and a slow drift of the machine cancels out of each pair. Without pairs
  // (unequal repetition counts) it is the ratio of the medians, with the conservative interval
  // of the two medians' intervals (the backend's lowest over the reference's highest, and the
  // reverse).
  struct Ratio {
    double value = NAN, lo = NAN, hi = NAN;
    bool paired = false;
  };
  Ratio ratio_of(const SummaryRow& row, const std::string& backend) const {
    auto b = row.cells.find(backend), r = row.cells.find(reference);
    if (b == row.cells.end() || r == row.cells.end() || b->second.status != "ok" ||
        r->second.status != "ok" || !(r->second.median_seconds > 0))
      return {};
    const std::vector<double>&x = b->second.repetition_seconds, &y = r->second.repetition_seconds;
    if (x.size() == y.size() && x.size() >= 2) {
      std::vector<double> pairs;
      for (size_t i = 0; i < x.size(); i++) pairs.push_back(x[i] / y[i]);
      const MedianInterval m = median_interval(pairs);
      return {median_of(pairs), m.lo, m.hi, true};
    }
    const MedianInterval &bi = b->second.interval, &ri = r->second.interval;
    return {b->second.median_seconds / r->second.median_seconds, bi.lo / ri.hi, bi.hi / ri.lo};
  }
  double ratio(const SummaryRow& row, const std::string& backend) const {
    return ratio_of(row, backend).value;
  }

  std::vector<Crossover> crossovers() const {
    std::vector<Crossover> out;
    std::vector<std::string_view> seen;
    for (const SummaryRow& first : rows) {
      const WorkloadInfo& w = *first.workload;
      if (!w.sizes.sized() || std::find(seen.begin(), seen.end(), w.name) != seen.end()) continue;
      seen.push_back(w.name);
      for (const std::string& b : backends) {
        if (b == reference) continue;
        Crossover c{std::string(w.name), std::string(w.sizes.key), b};
        std::vector<std::pair<int64_t, double>> highest;  // by size: the ratio interval's top
        for (const SummaryRow& row : rows)
          if (row.workload == &w && std::isfinite(ratio(row, b)))
            highest.push_back({row.size, ratio_of(row, b).hi});
        if (highest.size() < 2) continue;
        std::sort(highest.begin(), highest.end());
        c.largest = highest.back().first;
        for (size_t i = highest.size(); i-- > 0 && highest[i].second < 1;)
          c.from = highest[i].first;
        out.push_back(c);
      }
    }
    return out;
  }
};

inline std::string human_time(double seconds) {
  if (!(seconds >= 0)) return "-";
  if (seconds < 1e-6) return fmt::format("{:.1f} ns", seconds * 1e9);
  if (seconds < 1e-3) return fmt::format("{:.2f} us", seconds * 1e6);
  if (seconds < 1) return fmt::format("{:.2f} ms", seconds * 1e3);
  return fmt::format("{:.2f} s", seconds);
}
inline std::string human_mb(double bytes) {
  return bytes > 0 ? fmt::format("{:.1f} MB", bytes / 1e6) : "-";
}
// Memory sizes beyond the tables: GB from 10 GB on.
inline std::string human_bytes(double bytes) {
  return bytes >= 1e10 ? fmt::format("{:.1f} GB", bytes / 1e9) : human_mb(bytes);
}
// Two significant digits below 10x, so a ratio under 1 never reads as 0.0x.
inline std::string human_ratio(double r) {
  if (!std::isfinite(r)) return "-";
  if (r >= 100) return fmt::format("{:.0f}x", r);
  if (r >= 1) return fmt::format("{:.1f}x", r);
  return fmt::format("{:.2g}x", r);
}

inline Json summary_json(const Summary& s) {
  auto number_or_null = [](double x) { return std::isfinite(x) ? Json(x) : Json(); };
  Json rows = Json::array_of();
  for (const SummaryRow& row : s.rows) {
    Json cells = Json::object_of({});
    for (const auto& [backend, c] : row.cells) {
      const Summary::Ratio ratio = s.ratio_of(row, backend);
      Json cell = Json::object_of({{"status", c.status}, {"verified", c.verified}});
      if (!c.message.empty()) cell.set("message", c.message);
      cell.set("median_seconds", number_or_null(c.median_seconds))
          .set("median_interval_seconds",
               Json::numbers(std::vector<double>{c.interval.lo, c.interval.hi}))
          .set("median_interval_level", number_or_null(c.interval.level))
          .set("wide", c.status == "ok" && c.wide())
          .set("ratio_to_reference", number_or_null(ratio.value))
          .set("ratio_interval", Json::numbers(std::vector<double>{ratio.lo, ratio.hi}))
          .set("ratio_paired", ratio.paired)
          .set("repetition_seconds", Json::numbers(c.repetition_seconds))
          .set("max_rss_bytes", number_or_null(c.max_rss_bytes))
          .set("peak_rss_bytes", number_or_null(c.peak_rss_bytes))
          .set("items_per_second", number_or_null(c.items_per_second))
          .set("file", c.file);
      if (!c.check_losses.empty()) cell.set("check_losses", Json::numbers(c.check_losses));
      Json counters = Json::object_of({});
      for (const auto& [name, value] : c.counters) counters.set(name, value);
      cell.set("counters", std::move(counters));
      cells.set(backend, std::move(cell));
    }
    const WorkloadInfo& w = *row.workload;
    rows.push(Json::object_of({{"instance", row.instance},
                               {"phase", w.phase},
                               {"workload", w.name},
                               {"size_key", w.sizes.key},
                               {"size", row.size},
                               {"backends", std::move(cells)}}));
  }
  Json threads = Json::object_of({});
  for (const auto& [b, n] : s.threads) threads.set(b, n);
  Json crossovers = Json::array_of();
  for (const Crossover& c : s.crossovers())
    crossovers.push(Json::object_of({{"workload", c.workload},
                                     {"size_key", c.size_key},
                                     {"baseline", c.baseline},
                                     {"from", c.from ? Json(c.from) : Json()},
                                     {"largest", c.largest}}));
  Json backends = Json::array_of();
  for (const std::string& b : s.backends) backends.push(b);
  return Json::object_of({{"format_version", kResultFormat},
                          {"run_id", s.run_id},
                          {"reference", s.reference},
                          {"backends", std::move(backends)},
                          {"threads", std::move(threads)},
                          {"machine", s.machine},
                          {"options", s.options},
                          {"backend_contexts", s.contexts},
                          {"rows", std::move(rows)},
                          {"crossovers", std::move(crossovers)},
                          {"kernels", s.kernels},
                          {"intervals", s.intervals}});
}

// The kernel rows of bench_compiled --kernel_rows (harness/kernel_rows.h), per op shape: each
// dialect's median seconds, the one auto chose in its setup, and how auto's choice compares with
// the fastest here; then the FMA peak. {"peak_gflops": x, "shapes": [{"shape", "flops", "auto",
// "best", "median_seconds": {dialect: s}, "auto_over_best", "auto_gflops",
// "auto_fraction_of_peak"}]}.
inline Json kernel_summary(const Json& file) {
  std::map<std::string, std::vector<double>> times;  // row name -> seconds per repetition
  std::map<std::string, const Json*> first;
  std::vector<std::string> order;
  for (const Json& b : file["benchmarks"].array) {
    if (b["run_type"].str_or("") != "iteration" || b["error_occurred"].boolean) continue;
    const std::string name = b["run_name"].str_or(b["name"].str_or(""));
    const double scale = b["time_unit"].str_or("") == "us" ? 1e-6 : 1e-9;
    if (!times.count(name)) order.push_back(name), first[name] = &b;
    times[name].push_back(b["real_time"].num_or(NAN) * scale);
  }
  // In registration order (Google Benchmark's family_index), whatever order the file lists them
  // in: the rows' repetitions run interleaved, and each row is written when its last one ends.
  std::stable_sort(order.begin(), order.end(), [&](const std::string& x, const std::string& y) {
    return (*first[x])["family_index"].num_or(0) < (*first[y])["family_index"].num_or(0);
  });
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty()      ? NAN
           : v.size() % 2 ? v[v.size() / 2]
                          : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
  };
  double peak = NAN;
  Json shapes = Json::array_of();
  std::map<std::string, size_t> shape_at;
  for (const std::string& name : order) {
    if (name.rfind("peak/", 0) == 0) {
      peak = (*first[name])["flops"].num_or(NAN) / median(times[name]) * 1e-9;
      continue;
    }
    const size_t cut = name.rfind('/');  // kernel/<instance>/<op shape>/<dialect>
    if (name.rfind("kernel/", 0) != 0 || cut == std::string::npos) continue;
    const std::string shape = name.substr(7, cut - 7), dialect = name.substr(cut + 1);
    if (!shape_at.count(shape)) {
      shape_at[shape] = shapes.array.size();
      shapes.push(Json::object_of({{"shape", shape},
                                   {"flops", (*first[name])["flops"].num_or(NAN)},
                                   {"median_seconds", Json::object_of({})}}));
    }
    Json& row = shapes.array[shape_at[shape]];
    row.set("median_seconds", Json(row["median_seconds"]).set(dialect, median(times[name])));
    if ((*first[name])["auto"].num_or(0) == 1) row.set("auto", dialect);
  }
  for (Json& row : shapes.array) {
    std::string best;
    double best_s = INFINITY;
    for (const auto& [d, v] : row["median_seconds"].object)
      if (v.num_or(INFINITY) < best_s) best = d, best_s = v.number;
    row.set("best", best);
    const double auto_s = row["median_seconds"][row["auto"].str_or("")].num_or(NAN);
    const double gflops = row["flops"].num_or(NAN) / auto_s * 1e-9;
    row.set("auto_over_best", auto_s / best_s)
        .set("auto_gflops", gflops)
        .set("auto_fraction_of_peak", gflops / peak);
  }
  return Json::object_of({{"peak_gflops", peak}, {"shapes", std::move(shapes)}});
}

// The tables a person reads at the end: per instance each backend's median time and its ratio to
// the reference; then each benchmark process's peak RSS; then where the reference loses.
inline std::string summary_text(const Summary& s) {
  auto cell_text = [](const SummaryRow& row, const std::string& b, bool memory) {
    auto it = row.cells.find(b);
    if (it == row.cells.end()) return std::string("-");
    const Cell& c = it->second;
    if (c.status == "not_run") return std::string("not run");
    if (c.status == "out_of_memory") return std::string("out of mem");
    if (c.status != "ok") return c.status;
    return (memory ? human_mb(c.max_rss_bytes) : human_time(c.median_seconds)) +
           (c.verified ? "" : "?") + (!memory && c.wide() ? "~" : "");
  };
  bool any_wide = false;
  double level = NAN;
  for (const SummaryRow& row : s.rows)
    for (const auto& [b, c] : row.cells)
      if (c.status == "ok" && std::isfinite(c.interval.level))
        any_wide |= c.wide(), level = c.interval.level;
  bool any_unverified = false;
  for (const SummaryRow& row : s.rows)
    for (const auto& [b, c] : row.cells) any_unverified |= c.status == "ok" && !c.verified;
  size_t width = 8;
  for (const SummaryRow& row : s.rows) width = std::max(width, row.instance.size());
  std::string threads;
  for (const std::string& b : s.backends)
    threads += fmt::format("{}{} {}", threads.empty() ? "" : ", ", b, s.threads.at(b));
  const Json& env = s.machine["environment"];
  const std::string kernel = env["kernel"].str_or("?");  // its release: what comes before ' #
  std::string out = fmt::format(
      "\nsummary (threads: {})\nmachine: {} ({} family {} model {} stepping {}), CPUs {} of {}, "
      "kernel {}, governor {}\nmedian time per step, and backend time / {} time:\n{:<{}}",
      threads, s.machine["cpu_model"].str_or("?"), env["cpu_vendor"].str_or("?"),
      env["cpu_family"].str_or("?"), env["cpu_model_number"].str_or("?"),
      env["cpu_stepping"].str_or("?"), env["cpu_affinity"].str_or("?"),
      env["cpus_online"].str_or("?"), kernel.substr(0, kernel.find(' ')),
      env["cpu_governor"].str_or("?"), s.reference, "workload", width);
  for (const std::string& b : s.backends) out += fmt::format(" {:>11}", b);
  for (const std::string& b : s.backends)
    if (b != s.reference) out += fmt::format(" {:>12}", b + "/" + s.reference);
  out += "\n";
  for (const SummaryRow& row : s.rows) {
    out += fmt::format("{:<{}}", row.instance, width);
    for (const std::string& b : s.backends) out += fmt::format(" {:>11}", cell_text(row, b, false));
    for (const std::string& b : s.backends)
      if (b != s.reference)
        out += fmt::format(" {:>{}}", human_ratio(s.ratio(row, b)),
                           std::max<size_t>(12, b.size() + 1 + s.reference.size()));
    out += "\n";
  }
  out += fmt::format("\npeak RSS of each benchmark's process (wait4):\n{:<{}}", "workload", width);
  for (const std::string& b : s.backends) out += fmt::format(" {:>11}", b);
  out += "\n";
  for (const SummaryRow& row : s.rows) {
    out += fmt::format("{:<{}}", row.instance, width);
    for (const std::string& b : s.backends) out += fmt::format(" {:>11}", cell_text(row, b, true));
    out += "\n";
  }
  if (any_wide)
    out += fmt::format(
        "~ wide: the {:.1f}% interval of the median (order statistics of the repetitions, "
        "summary.json) spans more than {:.0f}% of it\n",
        level * 100, Cell::kWideSpread * 100);
  if (any_unverified)
    out +=
        "? unverified: the check had no other backend and no answer of the workload's own to "
        "compare it with (check.json)\n";
  std::map<std::string, std::vector<std::string>> by_workload;
  for (const Crossover& c : s.crossovers())
    by_workload[c.workload].push_back(
        c.from ? fmt::format("{} faster from {}={}", c.baseline, c.size_key, c.from)
               : fmt::format("{} none up to {}={}", c.baseline, c.size_key, c.largest));
  if (!by_workload.empty())
    out += fmt::format(
        "\ncrossovers (a baseline faster than {} from that size on, every ratio interval below "
        "1x):\n",
        s.reference);
  for (const SummaryRow& row : s.rows) {
    auto it = by_workload.find(std::string(row.workload->name));
    if (it == by_workload.end()) continue;
    out += fmt::format("  {:<{}} {}\n", it->first, width - 2, fmt::join(it->second, "; "));
    by_workload.erase(it);
  }
  if (s.kernels.kind == Json::Kind::object) {
    out += fmt::format(
        "\nmatmul kernels, forward and backward of one op (median per dialect; bench_compiled "
        "--kernel_rows); FMA peak {:.1f} GFLOP/s:\n",
        s.kernels["peak_gflops"].num_or(NAN));
    for (const Json& row : s.kernels["shapes"].array) {
      std::string times;
      for (const auto& [d, v] : row["median_seconds"].object)
        times += fmt::format(" {}{} {}", d, d == row["auto"].str_or("") ? "*" : "",
                             human_time(v.num_or(NAN)));
      out += fmt::format("  {}:{}\n    auto {:.2f}x the fastest, {:.1f} GFLOP/s, {:.0f}% of peak\n",
                         row["shape"].str_or("?"), times, row["auto_over_best"].num_or(NAN),
                         row["auto_gflops"].num_or(NAN),
                         100 * row["auto_fraction_of_peak"].num_or(NAN));
    }
    out += "  * auto's choice, made in the step's own setup\n";
  }
  if (s.intervals.kind == Json::Kind::array && !s.intervals.array.empty()) {
    out +=
        "\nmultistage against its checkpoint interval k, time per sequence over store-all's "
        "(medians of 5 ratios of repetitions that took turns):\n";
    std::map<std::string, std::string> lines;  // "workload length" -> its k's
    for (const Json& r : s.intervals.array) {
      std::string& line =
          lines[fmt::format("{} length {}", r["workload"].str_or("?"), r["length"].num_or(NAN))];
      const std::string k = r["k"].str_or("?");
      line += k == "auto" ? fmt::format("  auto (k={:.0f}) {:.2f}x", r["interval"].num_or(NAN),
                                        r["slowdown"].num_or(NAN))
                          : fmt::format("  {} {:.2f}x", k, r["slowdown"].num_or(NAN));
    }
    for (const auto& [what, line] : lines) out += fmt::format("  {}:{}\n", what, line);
  }
  return out;
}

}  // namespace bp
