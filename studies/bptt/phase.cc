// studies/bptt/phase.cc: the study bptt's own measurement, after the benchmarks: the interval
// sweep (arXiv 1806.01117, its figure of slowdown against interval): multistage at checkpoint
// intervals k = 1, 2, 4, ... and at the k it chooses, against store-all on the same sequence, per
// recurrent workload at its longest selected length up to 10^4. A workload's processes run as one
// row taking turns, 5 repetitions each after 2 warm-up steps on one setup; a slowdown is the
// median of the ratios of repetition i to store-all's repetition i, so the machine's drift hits
// both sides of every ratio. intervals.json, a line per workload in the summary (table.h),
// intervals.png. A resumed run keeps a finished intervals.json.
#include "studies/bptt/phase.h"

#include <fmt/format.h>

#include <chrono>
#include <memory>

#include "harness/runner/process.h"
#include "harness/runner/run_state.h"

namespace bp {
namespace {

using Clock = std::chrono::steady_clock;

// The longest sequence the interval sweep runs: a dozen processes of 5 steps.
constexpr int64_t kIntervalSweepLength = 10000;

std::string interval_file(const std::string& w, const std::string& k) {
  return fmt::format("intervals/{}-{}.json", w, k);
}
std::string interval_log(const std::string& w, const std::string& k) {
  return fmt::format("logs/intervals/{}-{}.log", w, k);
}

// The instance the sweep runs per recurrent workload: its longest selected length up to 10^4 on
// which multistage passed the check.
std::map<std::string, const Selected*> sweep_instances(RunState& run) {
  std::map<std::string, const Selected*> chosen;
  for (const Selected& s : run.selected) {
    const std::string w(s.workload->name);
    if (s.workload->sizes.key == "length" && s.names.count("engine_multistage") &&
        run.verdicts[s.id]["engine_multistage"].status == "ok" && s.size <= kIntervalSweepLength &&
        s.size >= 8 && (!chosen.count(w) || chosen[w]->size < s.size))
      chosen[w] = &s;
  }
  return chosen;
}

// One workload's sweep: its processes, one per k and store-all's, taking turns.
struct Sweep {
  std::vector<std::string> ks = {"store_all", "auto"};
  std::vector<std::unique_ptr<Child>> children;
  Turns turns;
  Clock::time_point start = Clock::now();
};

void start_sweep(RunState& run, const std::string& w, const Selected& s, Sweep& sweep) {
  for (int64_t k = 1; k <= s.size / 2; k *= 2) sweep.ks.push_back(std::to_string(k));
  for (const std::string& k : sweep.ks) {
    std::vector<std::string> argv = run.command("engine_multistage", true);
    if (k == "store_all")  // the same binary in its plain mode
      std::erase_if(argv, [](const std::string& a) {
        return a.rfind("--strategy=", 0) == 0 || a.rfind("--snapshots=", 0) == 0 ||
               a.rfind("--checkpoint_dir=", 0) == 0 || a.rfind("--backend_name=", 0) == 0;
      });
    else
      argv.push_back("--interval=" + k);
    argv.insert(argv.end(),
                {run.instance_arg(s, "engine_multistage"),
                 "--benchmark_out=" + (run.folder.dir() / interval_file(w, k)).string(),
                 "--benchmark_out_format=json", "--benchmark_repetitions=5",
                 fmt::format("--benchmark_min_time={}", run.opt.min_time), "--warmup_steps=2",
                 "--warm_once", "--benchmark_display_aggregates_only=true", "--take_turns"});
    sweep.children.push_back(std::make_unique<Child>(
        argv, (run.folder.dir() / interval_log(w, k)).string(), run.opt.timeout,
        run.child_env("engine_multistage"), run.opt.memory_limit, /*takes_turns=*/true));
    sweep.turns.add(*sweep.children.back(), /*alone=*/true);  // each measures its writes
  }
}

// Each k's result against store-all's: a row of intervals.json; false if interrupted.
bool finish_sweep(RunState& run, const std::string& w, const Selected& s, Sweep& sweep,
                  Json& rows) {
  const size_t n = sweep.ks.size();
  std::vector<BenchmarkResult> results(n);
  std::vector<ProcessResult> processes(n);
  for (size_t i = 0; i < n; i++) {
    processes[i] = sweep.children[i]->finish();
    if (processes[i].interrupted) return false;
    results[i].status = "failed";
    if (!processes[i].ok()) {
      results[i].message = processes[i].failure() + " (see " + interval_log(w, sweep.ks[i]) + ")";
      continue;
    }
    try {
      results[i] = read_benchmark_result(
          parse_benchmark_json(read_file(run.folder.dir() / interval_file(w, sweep.ks[i]))));
    } catch (const std::exception& e) {
      results[i].status = "failed", results[i].message = e.what();
    }
  }
  const BenchmarkResult& store_all = results[0];
  for (size_t i = 0; i < n; i++) {
    const BenchmarkResult& r = results[i];
    std::string status = r.status, message = r.message;
    if (status == "ok" && i > 0 && store_all.status != "ok")
      status = "failed", message = "store-all failed: " + store_all.message;
    std::vector<double> turns;  // seconds from the sweep's start
    for (const auto& t : sweep.children[i]->turns())
      turns.push_back(std::round(std::chrono::duration<double>(t - sweep.start).count() * 1e4) /
                      1e4);
    Json record = RunState::process_json(
        "engine_multistage", "intervals", sweep.ks[i], interval_file(w, sweep.ks[i]),
        interval_log(w, sweep.ks[i]), status, message, processes[i]);
    record["turns"] = json_numbers(turns);
    run.add_process(std::move(record));
    if (status != "ok") {
      fmt::print(" k={}: failed", sweep.ks[i]);
      run.failures++;
      continue;
    }
    if (i == 0) continue;
    std::vector<double> ratios;  // repetition j against store-all's repetition j
    for (size_t j = 0; j < r.repetition_seconds.size() && j < store_all.repetition_seconds.size();
         j++)
      ratios.push_back(r.repetition_seconds[j] / store_all.repetition_seconds[j]);
    const double slowdown = median_of(ratios);
    const double interval = r.counters.count("interval") ? r.counters.at("interval") : NAN;
    fmt::print(" {}{:.2f}x", sweep.ks[i] == "auto" ? fmt::format("auto (k={:.0f}) ", interval) : "",
               slowdown);
    Json row = Json::object({{"workload", w},
                             {"length", s.size},
                             {"k", sweep.ks[i]},
                             {"interval", interval},
                             {"seconds", r.median_seconds},
                             {"store_all_seconds", store_all.median_seconds},
                             {"slowdown", slowdown},
                             {"slowdowns", json_numbers(ratios)}});
    for (const char* c : {"write_seconds_measured", "step_seconds_measured", "write_wait_seconds",
                          "read_wait_seconds", "records", "bytes_written"})
      row[c] = r.counters.count(c) ? r.counters.at(c) : NAN;
    rows.push_back(std::move(row));
  }
  return true;
}

}  // namespace

void interval_sweep_phase(RunState& run) {
  const fs::path out = run.folder.dir() / "intervals.json";
  if (!run.opt.resume.empty() && fs::exists(out)) return;
  const std::map<std::string, const Selected*> chosen = sweep_instances(run);
  if (chosen.empty()) return;
  fmt::print(
      "\nintervals: multistage at k = 1, 2, 4, ... and its own choice, against store-all, "
      "taking turns\n");
  run.make_folders({run.folder.dir() / "intervals", run.folder.dir() / "logs/intervals"});
  Json rows = Json::array();
  for (const auto& [w, s] : chosen) {
    run.note_other_benchmarks();  // its warning before the line below, never inside it
    fmt::print("  {:<30}", s->id);
    std::fflush(stdout);
    Sweep sweep;
    start_sweep(run, w, *s, sweep);
    sweep.turns.take();
    if (!finish_sweep(run, w, *s, sweep, rows)) return;
    fmt::print("\n");
    std::fflush(stdout);
  }
  write_atomically(out, dump_json(Json::object({{"rows", rows}}), 2, 2) + "\n");
}

}  // namespace bp
