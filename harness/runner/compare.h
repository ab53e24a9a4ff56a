// harness/runner/compare.h: `bench_run compare BASELINE NEW`, two finished runs side by side,
// usable as a gate. As Google Benchmark's compare.py and asv name them: the baseline is the run
// compared against (before a change), the new run the one judged (after it); "slower" means the
// new run is slower. (In the code, a is the baseline and b the new run.)
//
// Per benchmark (the same instance on the same backend in both runs) the change new/baseline of
// the median time, with an interval from the two medians' intervals (new's lowest over the
// baseline's highest,
// and the reverse: the runs were not paired, so this is the conservative one; when the medians'
// intervals hold at levels p and q, the change's holds at pq or more: 10 repetitions give 95.8%),
// and a verdict: slower when the whole interval lies beyond 1 + threshold (the slowdown exceeds
// the threshold beyond doubt), faster in mirror (below 1 / (1 + threshold)), otherwise same. The
// intervals come from the repetitions of each run (two rounds: two processes minutes apart); the
// threshold covers what differs between hours (docs/reading-a-run.md). A benchmark that ran in
// the baseline and failed in the new run is broken. Only the benchmarks both runs hold are
// compared; the rest are counted in one line. The numbers are read from the runs' own Google
// Benchmark files where the run keeps them, so a result file that is corrupt or cut short is named
// and skipped and the rest compared; a curated run that keeps only its summary (results/reference)
// is read from the repetitions summary.json holds. Runs whose processors, instruction sets, CPUs,
// library versions or runner options differ are refused unless --force, with every difference
// listed; the differences that only inform (microcode, other CPU flags, the kernel release) are
// said (harness/common/environment.h). Writes <out>/<baseline>-vs-<new>.json and .txt (never over
// an earlier comparison's), and plots/compare.py draws <baseline>-vs-<new>.png. Exit status: 0
// nothing slower or broken; 1 something is (a CI gate); 2 bad input, or no benchmark in common.
//   build/bench_run compare results/<baseline> results/<new-run> [--threshold 10] [--force]
//   Tests: harness/tests/test_compare.py.
#pragma once

#include <fmt/format.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "harness/common/environment.h"
#include "harness/common/files.h"
#include "harness/common/json.h"
#include "harness/runner/process.h"
#include "harness/runner/summary.h"

namespace bp {

// One finished run as compare reads it.
struct RunForCompare {
  fs::path dir;
  Json summary_file;
  JsonView summary() const { return summary_file; }
  struct Entry {
    std::string status, message, file;
    BenchmarkResult result;  // valid when status is "ok"
  };
  std::map<std::pair<std::string, std::string>, Entry> entries;  // (instance, backend) -> it
  std::vector<std::string> unreadable;                           // "file: why", each skipped
};

// A benchmark as summary.json holds it: its median, interval and repetitions.
inline BenchmarkResult result_from_summary(JsonView cell) {
  BenchmarkResult r;
  r.status = "ok";
  r.median_seconds = cell["median_seconds"].num_or(NAN);
  const JsonView interval = cell["median_interval_seconds"];
  if (interval.size() == 2)
    r.interval = {interval[0].num_or(NAN), interval[1].num_or(NAN),
                  cell["median_interval_level"].num_or(NAN)};
  for (JsonView t : cell["repetition_seconds"].elements())
    r.repetition_seconds.push_back(t.num_or(NAN));
  return r;
}

// The run in `dir`, or nothing and *error saying in one line why it cannot be compared.
inline std::optional<RunForCompare> load_run_for_compare(const fs::path& dir, std::string* error) {
  RunForCompare run;
  run.dir = dir;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    *error = dir.string() + ": no such run folder";
    return std::nullopt;
  }
  if (fs::exists(dir / "INCOMPLETE", ec)) {
    *error = dir.string() + ": the run is incomplete (interrupted or still running); finish it " +
             "first with: make bench RESUME=" + dir.string();
    return std::nullopt;
  }
  if (!fs::exists(dir / "summary.json", ec)) {
    *error =
        dir.string() + ": no summary.json (not a run folder of bench_run, or a --check-only run)";
    return std::nullopt;
  }
  try {
    run.summary_file = parse_json(read_file(dir / "summary.json"));
  } catch (const std::exception& e) {
    *error = (dir / "summary.json").string() + ": unreadable (" + e.what() + ")";
    return std::nullopt;
  }
  const double version = run.summary()["format_version"].num_or(1);
  if (version != kResultFormat) {
    *error = fmt::format(
        "{}: written in result format {}, and this bench_run reads format {}: "
        "compare runs of one version",
        dir.string(), version, kResultFormat);
    return std::nullopt;
  }
  for (JsonView row : run.summary()["rows"].elements())
    for (const auto& [backend, cell] : row["backends"].members()) {
      RunForCompare::Entry e{
          cell["status"].str_or("?"), cell["message"].str_or(""), cell["file"].str_or(""), {}};
      if (e.status == "ok" && !fs::exists(dir / e.file, ec)) {
        e.result = result_from_summary(cell);  // a curated run: its summary only
      } else if (e.status == "ok") {
        try {
          e.result = read_benchmark_result(parse_benchmark_json(read_file(dir / e.file)));
          if (e.result.status != "ok") throw std::runtime_error(e.result.message);
        } catch (const std::exception& ex) {
          run.unreadable.push_back(fmt::format("{}: {}", (dir / e.file).string(), ex.what()));
          e.status = "unreadable";
        }
      }
      run.entries[{row["instance"].str_or("?"), backend}] = e;
    }
  return run;
}

// What makes two runs' numbers incomparable (decisive): their machines
// (harness/common/environment.h), the runner's options a time depends on, and each backend's
// versions and build; and what only informs.
inline EnvironmentDifferences run_differences(const RunForCompare& a, const RunForCompare& b) {
  EnvironmentDifferences d = environment_differences(a.summary()["machine"]["environment"],
                                                     b.summary()["machine"]["environment"]);
  std::vector<std::string>& out = d.decisive;
  for (const char* option : {"threads", "precision", "ranks", "hostfile", "isa", "repetitions",
                             "rounds", "min_time", "warmup_steps", "data"})
    if (dump_json(a.summary()["options"][option]) != dump_json(b.summary()["options"][option]))
      out.push_back(fmt::format("option {}: {} vs {}", option,
                                dump_json(a.summary()["options"][option]),
                                dump_json(b.summary()["options"][option])));
  // --background (a run before it had none)
  const std::string load_a = a.summary()["options"]["background"].str_or("none"),
                    load_b = b.summary()["options"]["background"].str_or("none");
  if (load_a != load_b) out.push_back(fmt::format("option background: {} vs {}", load_a, load_b));
  for (const auto& [backend, ctx] : a.summary()["backend_contexts"].members()) {
    const JsonView other = b.summary()["backend_contexts"][backend];
    if (other.is_null()) continue;
    for (const char* key : {"backend_version", "compiler", "cxx_flags", "isa", "isa_cap", "blas",
                            "blas_threads", "intra_op_threads", "matmul"})
      if (dump_json(ctx[key]) != dump_json(other[key]))
        out.push_back(fmt::format("{} {}: {} vs {}", backend, key, ctx[key].str_or("-"),
                                  other[key].str_or("-")));
  }
  return d;
}

struct Change {
  std::string instance, backend, verdict;  // faster | slower | same | broken | fixed | not compared
  std::string note;                        // why not compared, or how it broke
  double a = NAN, b = NAN, ratio = NAN, lo = NAN, hi = NAN;
  double level = NAN;  // of [lo, hi]: at least the product of the two medians' levels
};

inline Change compare_entries(const std::string& instance, const std::string& backend,
                              const RunForCompare::Entry* a, const RunForCompare::Entry* b,
                              double threshold) {
  Change c{instance, backend, "not compared", ""};
  if (!a || !b) {
    c.note = !a ? "not in the baseline" : "not in the new run";
    return c;
  }
  if (a->status == "unreadable" || b->status == "unreadable") {
    c.note = a->status == "unreadable" ? "its result file in the baseline is unreadable"
                                       : "its result file in the new run is unreadable";
    return c;
  }
  if (a->status != "ok" || b->status != "ok") {
    if (a->status == "ok" && b->status != "skipped")
      c.verdict = "broken", c.note = fmt::format("{} in the new run: {}", b->status, b->message);
    else if (b->status == "ok" && a->status != "skipped")
      c.verdict = "fixed", c.note = fmt::format("{} in the baseline", a->status);
    else
      c.note = fmt::format("{} in the baseline, {} in the new run", a->status, b->status);
    return c;
  }
  c.a = a->result.median_seconds, c.b = b->result.median_seconds;
  c.ratio = c.b / c.a;
  c.lo = b->result.interval.lo / a->result.interval.hi;
  c.hi = b->result.interval.hi / a->result.interval.lo;
  c.level = a->result.interval.level * b->result.interval.level;
  if (!std::isfinite(c.lo) || !std::isfinite(c.hi)) c.lo = c.hi = c.ratio;  // one repetition
  c.verdict = c.lo > 1 + threshold ? "slower" : c.hi < 1 / (1 + threshold) ? "faster" : "same";
  return c;
}

// Every benchmark of the baseline, then those only in the new run, in the runs' row order.
inline std::vector<Change> compare_runs(const RunForCompare& a, const RunForCompare& b,
                                        double threshold) {
  std::vector<Change> out;
  std::vector<std::pair<std::string, std::string>> keys;
  for (const RunForCompare* run : {&a, &b})
    for (JsonView row : run->summary()["rows"].elements())
      for (const auto& [backend, cell] : row["backends"].members()) {
        std::pair<std::string, std::string> key{row["instance"].str_or("?"), backend};
        if (std::find(keys.begin(), keys.end(), key) == keys.end()) keys.push_back(key);
      }
  for (const auto& key : keys) {
    auto ia = a.entries.find(key), ib = b.entries.find(key);
    const bool unreadable_a = ia == a.entries.end(), unreadable_b = ib == b.entries.end();
    out.push_back(compare_entries(key.first, key.second, unreadable_a ? nullptr : &ia->second,
                                  unreadable_b ? nullptr : &ib->second, threshold));
  }
  return out;
}

inline std::string change_text(double ratio) {
  return std::isfinite(ratio) ? fmt::format("{:+.1f}%", (ratio - 1) * 100) : "-";
}

struct CompareReport {
  std::string text;               // the table and the verdict line
  Json json;                      // the same, for plots/compare.py and for scripts
  bool gate_fails = false;        // something slower or broken
  bool nothing_compared = false;  // no benchmark in both runs: no verdict, exit 2
};

// The compared benchmarks as the table's lines and as JSON rows, and how many got each verdict.
struct CompareTable {
  std::string text;
  Json rows = Json::array();
  std::map<std::string, int> count;
};

inline CompareTable compare_table(const std::vector<Change>& changes) {
  CompareTable t;
  size_t width = 9;
  for (const Change& c : changes) width = std::max(width, c.instance.size() + c.backend.size() + 1);
  t.text = fmt::format("{:<{}} {:>11} {:>11} {:>8}  {:<17} {}\n", "benchmark", width, "baseline",
                       "new", "change", "interval", "verdict");
  auto number = [](double x) { return std::isfinite(x) ? Json(x) : Json(); };
  for (const Change& c : changes) {
    t.count[c.verdict]++;
    const std::string interval =
        std::isfinite(c.lo) ? fmt::format("[{}, {}]", change_text(c.lo), change_text(c.hi)) : "";
    t.text += fmt::format("{:<{}} {:>11} {:>11} {:>8}  {:<17} {}{}\n", c.instance + " " + c.backend,
                          width, human_time(c.a), human_time(c.b), change_text(c.ratio), interval,
                          c.verdict, c.note.empty() ? "" : ": " + c.note);
    t.rows.push_back(
        Json::object({{"instance", c.instance},
                      {"backend", c.backend},
                      {"verdict", c.verdict},
                      {"note", c.note},
                      {"a_seconds", number(c.a)},
                      {"b_seconds", number(c.b)},
                      {"ratio", number(c.ratio)},
                      {"ratio_interval", json_numbers(std::vector<double>{c.lo, c.hi})}}));
  }
  return t;
}

inline std::string run_id_of(const RunForCompare& run) {
  return run.summary()["run_id"].str_or("?");
}

// Which runs, on what, and how they differ.
inline std::string compare_header(const RunForCompare& a, const RunForCompare& b,
                                  const EnvironmentDifferences& d) {
  const JsonView env = b.summary()["machine"]["environment"];
  std::string text = fmt::format(
      "compare baseline {} (git {})\n   with new run {} (git {})\non {} (family {} model {} "
      "stepping {}); change = new / baseline of the median time per step\n",
      run_id_of(a), a.summary()["machine"]["git_sha"].str_or("?"), run_id_of(b),
      b.summary()["machine"]["git_sha"].str_or("?"),
      b.summary()["machine"]["cpu_model"].str_or("?"), env["cpu_family"].str_or("?"),
      env["cpu_model_number"].str_or("?"), env["cpu_stepping"].str_or("?"));
  for (const std::string& line : d.decisive)
    text += "warning (--force): the runs differ: " + line + "\n";
  for (const std::string& line : d.informative)
    text += "note: the runs differ, which changes no step's cost: " + line + "\n";
  return text;
}

inline CompareReport compare_report(const RunForCompare& a, const RunForCompare& b,
                                    const std::vector<Change>& all, double threshold,
                                    const EnvironmentDifferences& differences) {
  // What only one run holds is counted, not listed: a default run against a run of every backend
  // would otherwise be a page of "not in the new run".
  std::vector<Change> changes;
  int only_a = 0, only_b = 0;
  for (const Change& c : all) {
    if (c.note == "not in the new run")
      only_a++;
    else if (c.note == "not in the baseline")
      only_b++;
    else
      changes.push_back(c);
  }
  CompareTable table = compare_table(changes);
  CompareReport r;
  r.gate_fails = table.count["slower"] + table.count["broken"] > 0;
  r.nothing_compared = changes.empty();
  r.text = compare_header(a, b, differences) + "\n" + table.text;
  if (only_a || only_b)
    r.text +=
        fmt::format("not compared: {} benchmark(s) only in the baseline, {} only in the new run\n",
                    only_a, only_b);
  Json skipped = Json::array();
  for (const RunForCompare* run : {&a, &b})
    for (const std::string& u : run->unreadable) {
      r.text += fmt::format("unreadable, skipped: {}\n", u);
      skipped.push_back(u);
    }
  std::vector<std::string> parts;
  Json counts = Json::object({});
  for (const char* v : {"slower", "faster", "same", "broken", "fixed", "not compared"})
    if (table.count[v])
      parts.push_back(fmt::format("{} {}", table.count[v], v)), counts[v] = table.count[v];
  double level = 1;
  for (const Change& c : changes)
    if (std::isfinite(c.level)) level = std::min(level, c.level);
  r.text += fmt::format(
      "\n{}: {} benchmarks in both runs: {}{} (slower or faster: the change's interval, at {:.1f}% "
      "or more, lies wholly beyond the threshold of {:.0f}%)\n",
      r.gate_fails         ? "SLOWER"
      : r.nothing_compared ? "NOTHING COMPARED"
                           : "OK",
      changes.size(), fmt::join(parts, ", "),
      skipped.empty() ? "" : fmt::format("; {} result file(s) unreadable, skipped", skipped.size()),
      level * 100, threshold * 100);
  Json decisive = Json::array(), informative = Json::array();
  for (const std::string& d : differences.decisive) decisive.push_back(d);
  for (const std::string& d : differences.informative) informative.push_back(d);
  r.json = Json::object({{"format_version", kResultFormat},
                         {"a", run_id_of(a)},
                         {"b", run_id_of(b)},
                         {"a_dir", a.dir.string()},
                         {"b_dir", b.dir.string()},
                         {"threshold", threshold},
                         {"machine", b.summary()["machine"].json()},
                         {"differences_forced", std::move(decisive)},
                         {"differences_informative", std::move(informative)},
                         {"only_in_a", only_a},
                         {"only_in_b", only_b},
                         {"counts", std::move(counts)},
                         {"unreadable", std::move(skipped)},
                         {"gate_fails", r.gate_fails},
                         {"rows", std::move(table.rows)}});
  return r;
}

inline const char* kCompareUsage =
    R"(usage: bench_run compare BASELINE NEW [options]   (make compare BASELINE=... NEW=...)
  BASELINE             the run compared against (before a change): a finished run's folder,
                       such as results/<run-id>
  NEW                  the run judged (after the change), such as results/latest
  --threshold PCT      slower (faster) only when the change's whole interval lies beyond this
                       (default 10)
  --force              compare runs made on different processors, instruction sets, CPUs,
                       library versions or runner options (each difference is printed as a
                       warning); differences that change no step's cost need no --force
  --out DIR            the folder <baseline>-vs-<new>.txt, .json and .png go to (default
                       results/compare);
                       an earlier comparison's files are never overwritten (-2, -3 ... added)
  --no-plots           do not draw the plot (plots/compare.py)
Per benchmark: new / baseline of the median time with its interval, and a verdict for the new
run (faster, slower, same; broken: ran in the baseline, failed in the new run). Exit status: 0
nothing slower or broken; 1 something is; 2 bad input, or no benchmark in both runs.
)";

// One line on stderr, exit 2, as bench_run's own bad input.
[[noreturn]] inline void compare_error(const std::string& what) {
  std::fflush(stdout);
  fmt::print(stderr, "error: compare: {}\n(bench_run compare --help lists the options)\n", what);
  std::exit(2);
}

struct CompareOptions {
  std::vector<fs::path> runs;
  double threshold = 0.10;
  bool force = false, plots = true;
  fs::path out = "results/compare";
};

inline CompareOptions parse_compare_options(const std::vector<std::string>& args) {
  CompareOptions o;
  for (size_t i = 0; i < args.size(); i++) {
    const std::string& arg = args[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= args.size()) compare_error(arg + " needs a value");
      return args[++i];
    };
    if (arg == "--help" || arg == "-h") {
      fmt::print("{}", kCompareUsage);
      std::exit(0);
    } else if (arg == "--threshold") {
      const std::string text = next();
      char* end = nullptr;
      o.threshold = std::strtod(text.c_str(), &end) / 100;
      if (text.empty() || *end != '\0' || !(o.threshold >= 0 && o.threshold <= 10))
        compare_error("--threshold " + text + ": expected a percentage from 0 to 1000");
    } else if (arg == "--force") {
      o.force = true;
    } else if (arg == "--no-plots") {
      o.plots = false;
    } else if (arg == "--out") {
      o.out = next();
      if (o.out.empty()) compare_error("--out '': name a folder");
    } else if (arg.rfind("--", 0) == 0) {
      compare_error(fmt::format("unknown option '{}'", arg));
    } else {
      o.runs.push_back(arg);
    }
  }
  if (o.runs.size() != 2)
    compare_error(
        fmt::format("needs two runs, a baseline and a new one (given {}): bench_run compare "
                    "results/<baseline> results/<new-run>",
                    o.runs.size()));
  std::error_code ec;
  if (fs::equivalent(o.runs[0], o.runs[1], ec))
    compare_error(
        fmt::format("the baseline and the new run are the same run ({}); compare two runs",
                    fs::canonical(o.runs[0], ec).string()));
  if (fs::exists(o.out, ec) && !fs::is_directory(o.out, ec))
    compare_error(fmt::format("--out {}: is a file; name a folder for the comparison's files",
                              o.out.string()));
  return o;
}

// <out>/<baseline>-vs-<new>.txt and .json (never over an earlier comparison's: -2, -3 ...), and the
// plot; returns the stem, or exits 4 when a file cannot be written.
inline std::string write_comparison(const CompareOptions& o, const std::string& id_a,
                                    const std::string& id_b, const CompareReport& report,
                                    const std::string& plotter) {
  std::error_code ec;
  if (!fs::create_directories(o.out, ec) && ec)
    compare_error(fmt::format("--out {}: cannot create it ({})", o.out.string(), ec.message()));
  std::string stem = id_a + "-vs-" + id_b;
  for (int n = 2;
       fs::exists(o.out / (stem + ".json"), ec) || fs::exists(o.out / (stem + ".txt"), ec); n++)
    stem = id_a + "-vs-" + id_b + "-" + std::to_string(n);
  try {
    write_atomically(o.out / (stem + ".json"), dump_json(report.json, 2, 3) + "\n");
    write_atomically(o.out / (stem + ".txt"), report.text);
  } catch (const WriteError& e) {
    fmt::print(stderr, "error: compare: {}\n", e.what());
    std::exit(4);
  }
  fmt::print("{}", report.text);
  if (o.plots) {
    std::fflush(stdout);
    const fs::path log = o.out / (stem + ".plot.log");
    const ProcessResult p =
        run_process({"/usr/bin/python3", plotter, (o.out / (stem + ".json")).string(),
                     (o.out / (stem + ".png")).string()},
                    log.string(), 600, {});
    if (p.ok()) {
      fs::remove(log, ec);
      fmt::print("plot: {}\n", (o.out / (stem + ".png")).string());
    } else {
      fmt::print(stderr, "the plot failed ({}; see {}); the comparison above stands\n", p.failure(),
                 log.string());
    }
  }
  return stem;
}

// bench_run compare's command line; `plotter` is plots/compare.py.
inline int compare_main(const std::vector<std::string>& args, const std::string& plotter) {
  const CompareOptions o = parse_compare_options(args);
  std::vector<RunForCompare> loaded;
  for (const fs::path& dir : o.runs) {
    std::string error;
    std::optional<RunForCompare> run = load_run_for_compare(dir, &error);
    if (!run) compare_error(error);
    loaded.push_back(std::move(*run));
  }
  const std::string id_a = loaded[0].summary()["run_id"].str_or("baseline"),
                    id_b = loaded[1].summary()["run_id"].str_or("new");
  if (id_a == id_b)
    compare_error(
        fmt::format("the baseline and the new run are the same run ({}: {} is a copy of "
                    "{}); compare two runs",
                    id_a, o.runs[1].string(), o.runs[0].string()));
  const EnvironmentDifferences differences = run_differences(loaded[0], loaded[1]);
  if (!differences.decisive.empty() && !o.force)
    compare_error(fmt::format(
        "the runs differ in what their numbers depend on ({}); their times are not comparable: "
        "add --force (make compare ... FORCE=1) to compare anyway",
        fmt::join(differences.decisive, "; ")));
  const std::vector<Change> changes = compare_runs(loaded[0], loaded[1], o.threshold);
  const CompareReport report =
      compare_report(loaded[0], loaded[1], changes, o.threshold, differences);
  const std::string stem = write_comparison(o, id_a, id_b, report, plotter);
  fmt::print("written: {}\n", (o.out / (stem + ".txt")).string());
  if (report.nothing_compared) {
    fmt::print(stderr,
               "error: compare: {} and {} hold no benchmark in common (other workloads, sizes or "
               "backends): nothing was compared, so there is no verdict\n",
               o.runs[0].string(), o.runs[1].string());
    return 2;
  }
  return report.gate_fails ? 1 : 0;
}

}  // namespace bp
