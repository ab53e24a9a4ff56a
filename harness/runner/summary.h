// harness/runner/summary.h: every benchmark of a run as one table (Summary): each cell's median,
// memory and status, and each backend's ratio to the run's reference backend with its interval.
// bench_run writes it as summary.json, which plots/plot.py draws (it computes no number of its
// own), and as summary.txt (harness/runner/summary_text.h), the same tables for people.
//   Tests: harness/runner/results_test.cc, and harness/tests/ on real runs.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "harness/common/json.h"
#include "harness/runner/backends.h"
#include "harness/runner/results.h"
#include "workloads/workload.h"

namespace bp {

struct SummaryRow {
  std::string instance;  // harness/common/names.h
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
  std::string run_id, reference;       // reference: whom the ratios divide by
  std::string study = "main";          // harness/runner/studies.h
  std::vector<std::string> backends;   // in the runner's fixed order
  std::map<std::string, int> threads;  // backend -> threads it ran with
  Json machine;                        // cpu, cores, git sha: the caption of every plot
  Json options = Json::object({});     // the runner's: repetitions, min time, warm-up...
  Json contexts = Json::object({});    // backend -> its result files' context (versions, BLAS)
  std::vector<SummaryRow> rows;        // in registry order
  Json kernels;                        // kernel_summary of kernels.json; null without one
  Json intervals;                      // intervals.json's rows (bench_run's interval sweep)

  // backend time / reference time, with its interval; NaN unless both ran. The benchmarks of a
  // row take turns (harness/common/protocol.h), so repetition i of the backend and of the reference
  // ran moments apart: the ratio is the median of the n pairs' ratios, its interval their
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
        const BackendSpec* spec = find_backend(b);
        if (b == reference || (spec && spec->not_judged)) continue;  // a bound is no baseline
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
  if (r >= 0.995) return fmt::format("{:.3f}x", r);  // not "1x", which reads as 1 or more
  return fmt::format("{:.2g}x", r);
}

inline Json summary_json(const Summary& s) {
  auto number_or_null = [](double x) { return std::isfinite(x) ? Json(x) : Json(); };
  Json rows = Json::array();
  for (const SummaryRow& row : s.rows) {
    Json cells = Json::object({});
    for (const auto& [backend, c] : row.cells) {
      const Summary::Ratio ratio = s.ratio_of(row, backend);
      Json cell = Json::object({{"status", c.status}, {"verified", c.verified}});
      if (!c.message.empty()) cell["message"] = c.message;
      cell.update(
          Json::object({{"median_seconds", number_or_null(c.median_seconds)},
                        {"median_interval_seconds",
                         json_numbers(std::vector<double>{c.interval.lo, c.interval.hi})},
                        {"median_interval_level", number_or_null(c.interval.level)},
                        {"wide", c.status == "ok" && c.wide()},
                        {"ratio_to_reference", number_or_null(ratio.value)},
                        {"ratio_interval", json_numbers(std::vector<double>{ratio.lo, ratio.hi})},
                        {"ratio_paired", ratio.paired},
                        {"repetition_seconds", json_numbers(c.repetition_seconds)},
                        {"max_rss_bytes", number_or_null(c.max_rss_bytes)},
                        {"peak_rss_bytes", number_or_null(c.peak_rss_bytes)},
                        {"items_per_second", number_or_null(c.items_per_second)},
                        {"file", c.file}}));
      if (!c.check_losses.empty()) cell["check_losses"] = json_numbers(c.check_losses);
      Json counters = Json::object({});
      for (const auto& [name, value] : c.counters) counters[name] = value;
      cell["counters"] = std::move(counters);
      cells[backend] = std::move(cell);
    }
    const WorkloadInfo& w = *row.workload;
    rows.push_back(Json::object({{"instance", row.instance},
                                 {"phase", w.phase},
                                 {"workload", w.name},
                                 {"family", w.family},
                                 {"size_key", w.sizes.key},
                                 {"size", row.size},
                                 {"backends", std::move(cells)}}));
  }
  Json threads = Json::object({});
  for (const auto& [b, n] : s.threads) threads[b] = n;
  Json crossovers = Json::array();
  for (const Crossover& c : s.crossovers())
    crossovers.push_back(Json::object({{"workload", c.workload},
                                       {"size_key", c.size_key},
                                       {"baseline", c.baseline},
                                       {"from", c.from ? Json(c.from) : Json()},
                                       {"largest", c.largest}}));
  Json backends = Json::array(), styles = Json::object({});
  for (const std::string& b : s.backends) {
    backends.push_back(b);
    if (const BackendSpec* spec = find_backend(b))  // an imported tool has none: the plot picks
      styles[b] =
          Json::object({{"color", spec->color}, {"marker", spec->marker}, {"main", spec->main}});
  }
  return Json::object({{"format_version", kResultFormat},
                       {"run_id", s.run_id},
                       {"study", s.study},
                       {"reference", s.reference},
                       {"backends", std::move(backends)},
                       {"backend_styles", std::move(styles)},
                       {"threads", std::move(threads)},
                       {"machine", s.machine},
                       {"options", s.options},
                       {"backend_contexts", s.contexts},
                       {"rows", std::move(rows)},
                       {"crossovers", std::move(crossovers)},
                       {"kernels", s.kernels},
                       {"intervals", s.intervals}});
}

// summary.csv: the run's table for a spreadsheet or pandas, one line per benchmark (an instance
// on a backend), skipped and failed ones included with their reason; the conditions every result
// depends on (threads, precision, instruction set) are columns, so that two runs' files
// concatenated stay apart. RFC 4180: a comma, a quote or a line break puts the field in quotes,
// its quotes doubled; a number is written to round trip (%.17g), a missing one left empty.
inline std::string csv_field(const std::string& f) {
  if (f.find_first_of(",\"\r\n") == std::string::npos) return f;
  std::string quoted = "\"";
  for (char c : f) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
  return quoted + "\"";
}
inline std::string summary_csv(const Summary& s) {
  auto number = [](double x) { return std::isfinite(x) ? fmt::format("{:.17g}", x) : ""; };
  const JsonView options(s.options);
  const std::string precision = options["precision"].str_or("fp32"),
                    isa = options["isa"].str_or("");
  std::string out =
      "run_id,instance,phase,workload,size_key,size,backend,status,verified,threads,precision,"
      "isa,median_seconds,interval_lo_seconds,interval_hi_seconds,interval_level,repetitions,"
      "ratio_to_reference,ratio_lo,ratio_hi,max_rss_bytes,items_per_second,message\r\n";
  for (const SummaryRow& row : s.rows)
    for (const std::string& backend : s.backends) {
      const auto cell = row.cells.find(backend);
      if (cell == row.cells.end()) continue;
      const Cell& c = cell->second;
      const Summary::Ratio r = s.ratio_of(row, backend);
      const auto threads = s.threads.find(backend);
      const std::vector<std::string> fields = {
          s.run_id,
          row.instance,
          std::string(row.workload->phase),
          std::string(row.workload->name),
          std::string(row.workload->sizes.key),
          std::to_string(row.size),
          backend,
          c.status,
          c.verified ? "yes" : "no",
          threads == s.threads.end() ? "" : std::to_string(threads->second),
          precision,
          isa,
          number(c.median_seconds),
          number(c.interval.lo),
          number(c.interval.hi),
          number(c.interval.level),
          std::to_string(c.repetition_seconds.size()),
          number(r.value),
          number(r.lo),
          number(r.hi),
          number(c.max_rss_bytes),
          number(c.items_per_second),
          c.message};
      for (size_t i = 0; i < fields.size(); i++) out += (i ? "," : "") + csv_field(fields[i]);
      out += "\r\n";
    }
  return out;
}

// The kernel rows of bench_compiled --kernel_rows (studies/kernels/kernel_rows.h), per op shape:
// each dialect's median seconds, the one auto chose in its setup, and how auto's choice compares
// with the fastest here; then the FMA peak; and each dialect's GFLOP/s per thread as a fraction of
// the FMA loop timed in turn with it (median over repetitions; a repetition whose FMA loop ran
// below half the peak row is left out: another library's idle threads held the cores, and the
// loop measured them rather than the machine). {"peak_gflops": x, "shapes":
// [{"shape", "flops", "auto", "best", "median_seconds": {dialect: s}, "fraction_of_fma": {dialect:
// f}, "auto_over_best", "auto_gflops", "auto_fraction_of_peak", "auto_fraction_of_fma"}]}.
inline Json kernel_summary(JsonView file) {
  std::map<std::string, std::vector<double>> times;  // row name -> seconds per repetition
  // row name -> per repetition: fraction_of_fma, and the in-turn loop's GFLOP/s per core
  std::map<std::string, std::vector<std::pair<double, double>>> of_fma;
  std::map<std::string, const Json*> first;
  std::vector<std::string> order;
  for (JsonView b : file["benchmarks"].elements()) {
    if (b["run_type"].str_or("") != "iteration" || b["error_occurred"].bool_or(false)) continue;
    std::string name = b["run_name"].str_or(b["name"].str_or(""));
    if (name.ends_with("/manual_time")) name.resize(name.size() - 12);  // timed by the row itself
    const double scale = b["time_unit"].str_or("") == "us" ? 1e-6 : 1e-9;
    if (!times.count(name)) order.push_back(name), first[name] = &b.json();
    times[name].push_back(b["real_time"].num_or(NAN) * scale);
    if (b["fraction_of_fma"].is_number())
      of_fma[name].push_back(
          {b["fraction_of_fma"].num_or(NAN), b["fma_gflops_per_core"].num_or(NAN)});
  }
  // In registration order (Google Benchmark's family_index), whatever order the file lists them
  // in: the rows' repetitions run interleaved, and each row is written when its last one ends.
  std::stable_sort(order.begin(), order.end(), [&](const std::string& x, const std::string& y) {
    return JsonView(*first[x])["family_index"].num_or(0) <
           JsonView(*first[y])["family_index"].num_or(0);
  });
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty()      ? NAN
           : v.size() % 2 ? v[v.size() / 2]
                          : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
  };
  double peak = NAN;  // the peak row (registered last), first: the fractions are checked by it
  for (const std::string& name : order)
    if (name.rfind("peak/", 0) == 0)
      peak = JsonView(*first[name])["flops"].num_or(NAN) / median(times[name]) * 1e-9;
  Json shapes = Json::array();
  std::map<std::string, size_t> shape_at;
  for (const std::string& name : order) {
    if (name.rfind("peak/", 0) == 0) continue;
    const size_t cut = name.rfind('/');  // kernel/<instance>/<op shape>/<dialect>
    if (name.rfind("kernel/", 0) != 0 || cut == std::string::npos) continue;
    const std::string shape = name.substr(7, cut - 7), dialect = name.substr(cut + 1);
    if (!shape_at.count(shape)) {
      shape_at[shape] = shapes.size();
      shapes.push_back(Json::object({{"shape", shape},
                                     {"flops", JsonView(*first[name])["flops"].num_or(NAN)},
                                     {"median_seconds", Json::object({})},
                                     {"fraction_of_fma", Json::object({})}}));
    }
    Json& row = shapes[shape_at[shape]];
    row["median_seconds"][dialect] = median(times[name]);
    std::vector<double> fractions;
    for (const auto& [fraction, fma_gflops] : of_fma[name])
      if (fma_gflops >= peak / 2) fractions.push_back(fraction);
    if (!fractions.empty()) row["fraction_of_fma"][dialect] = median(fractions);
    if (JsonView(*first[name])["auto"].num_or(0) == 1) row["auto"] = dialect;
  }
  for (Json& row_json : shapes) {
    const JsonView row = row_json;
    std::string best;
    double best_s = INFINITY;
    for (const auto& [d, v] : row["median_seconds"].members())
      if (v.num_or(INFINITY) < best_s) best = d, best_s = v.num_or(INFINITY);
    const std::string chosen = row["auto"].str_or("");
    const double auto_s = row["median_seconds"][chosen].num_or(NAN);
    const double gflops = row["flops"].num_or(NAN) / auto_s * 1e-9;
    const double of_fma_loop = row["fraction_of_fma"][chosen].num_or(NAN);
    row_json.update(Json::object({{"best", best},
                                  {"auto_over_best", auto_s / best_s},
                                  {"auto_gflops", gflops},
                                  {"auto_fraction_of_peak", gflops / peak},
                                  {"auto_fraction_of_fma", of_fma_loop}}));
  }
  return Json::object({{"peak_gflops", peak}, {"shapes", std::move(shapes)}});
}

}  // namespace bp
