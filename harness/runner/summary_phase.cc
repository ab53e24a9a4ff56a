// harness/runner/summary_phase.cc: the end of a run: summary.json (what plots/plot.py draws),
// summary.csv (one line per benchmark, for a spreadsheet), summary.txt (the same tables for
// people, printed too), then the figures and report.html.
#include <fmt/format.h>
#include <unistd.h>

#include "harness/runner/run_state.h"
#include "harness/runner/summary_text.h"

namespace bp {

void summary_phase(RunState& run) {
  Summary s;
  s.run_id = run.folder.id();
  s.study = std::string(run.opt.study->name);
  s.backends = run.opt.backends;
  s.reference = run.opt.backends.front();
  for (const std::string& b : run.opt.backends) s.threads[b] = threads_of(b, run.opt.threads);
  Json others = Json::array();
  for (const std::string& o : run.others) others.push_back(o);
  s.machine = Json::object({{"cpu_model", proc_cpu_model()},
                            {"cpus", int(sysconf(_SC_NPROCESSORS_ONLN))},
                            {"environment", run.environment},
                            {"git_sha", run.git_sha},
                            {"load_average_start", run.load_start},
                            {"load_average_end", load_average_1min()},
                            {"other_benchmarks", std::move(others)}});
  s.options = run.run_options_json();
  if (fs::exists(run.folder.dir() / "intervals.json"))
    s.intervals =
        JsonView(parse_json(read_file(run.folder.dir() / "intervals.json")))["rows"].json();
  if (fs::exists(run.folder.dir() / "kernels.json"))
    s.kernels = kernel_summary(parse_benchmark_json(read_file(run.folder.dir() / "kernels.json")));
  for (const auto& [b, context] : run.contexts) s.contexts[b] = context;
  for (const Selected& sel : run.selected) {
    for (const auto& [b, name] : sel.names)
      if (!run.cells[sel.id].count(b)) {
        run.cells[sel.id][b].status = "interrupted";
        run.cells[sel.id][b].message = "not reached: the run was interrupted";
      }
    SummaryRow row{sel.id, sel.workload, sel.size, run.cells[sel.id]};
    for (auto& [b, l] : run.losses[sel.id]) row.cells[b].check_losses = l;
    s.rows.push_back(std::move(row));
  }
  write_atomically(run.folder.dir() / "summary.json", dump_json(summary_json(s), 2, 4) + "\n");
  write_atomically(run.folder.dir() / "summary.csv", summary_csv(s));
  std::string text = summary_text(s);
  if (!run.others.empty())
    text += "\n" + wrapped(fmt::format("warning: other benchmarks ran on this machine during this "
                                       "run ({}); load average {:.2f} at the start, {:.2f} at the "
                                       "end: timings may be inflated",
                                       others_counted(run.others),
                                       JsonView(s.machine)["load_average_start"].num_or(-1),
                                       JsonView(s.machine)["load_average_end"].num_or(-1)),
                           2);
  if (run.failures)
    text +=
        fmt::format("\n{} benchmark(s) failed or were not run; see processes.json\n", run.failures);
  text += fmt::format("results: {}\n", run.folder.dir().string());
  write_atomically(run.folder.dir() / "summary.txt", text);
  fmt::print("{}", text);
}

// plots/plot.py is a pure function of summary.json; a failure there loses no result.
void plot_phase(const RunState& run) {
  std::fflush(stdout);
  const std::string log = (run.folder.dir() / "logs" / "plots.log").string();
  const ProcessResult p =
      run_process({"/usr/bin/python3", BP_SOURCE_DIR "/plots/plot.py", run.folder.dir().string()},
                  log, 600, {});
  std::vector<std::string> lines = fields(read_file(log), '\n');
  for (size_t i = 1; i < lines.size(); i++) fmt::print("{}\n", lines[i]);
  if (!p.ok() && !g_interrupted)  // interrupted: run_main says it
    fmt::print(stderr, "plots failed ({}); the results are intact, retry with: make plots RUN={}\n",
               p.failure(), run.folder.dir().string());
}

}  // namespace bp
