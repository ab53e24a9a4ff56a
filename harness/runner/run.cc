// harness/runner/run.cc: bench_run, the one runner over every backend (its main() is
// apps/bench_run.cc).
//
// It (1) expands the selection (--study, --workloads, --sizes, --filter) over the workload
// registry, validates it and names every benchmark (harness/runner/selection.h), without asking
// any backend what exists; (2) estimates the memory of sizes beyond the defaults; (3) runs the
// correctness check, one process per backend, and has the judge decide who agrees; (4) runs each
// benchmark that passed in a fresh process, the backends of a row taking turns, so that the
// parent's wait4 peak RSS is that benchmark's alone; (5) a study's extra measurements; (6) writes
// the summary and draws the figures. What it writes under <out>/<run-id>/ is docs/results.md;
// every file is written as soon as its numbers exist, so an interrupted run keeps what it
// measured. `bench_run compare BASELINE NEW` is harness/runner/compare.h.
//   build/bench_run --filter small_graph --repetitions 3      # `build/bench_run --help` for all
#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <ctime>
#include <string>
#include <vector>

#include "harness/runner/compare.h"
#include "harness/runner/gradbench_import.h"
#include "harness/runner/run_state.h"
#include "harness/runner/summary_text.h"
#include "workloads/data.h"
#include "workloads/registry.h"

namespace bp {
namespace {

// The short sha of the source tree, "-dirty" if it has changes; "nogit" without git.
std::string source_git_sha() {
  // A tree owned by another user is "dubious ownership" to git: safe.directory lets it read it.
  const std::vector<std::string> git = {"git", "-c", "safe.directory=" BP_SOURCE_DIR, "-C",
                                        BP_SOURCE_DIR};
  auto with = [&](std::vector<std::string> args) {
    std::vector<std::string> argv = git;
    argv.insert(argv.end(), args.begin(), args.end());
    return capture_output(argv);
  };
  std::string sha = with({"rev-parse", "--short", "HEAD"});
  if (sha.empty()) return "nogit";
  if (!with({"status", "--porcelain", "--untracked-files=no"}).empty()) sha += "-dirty";
  return sha;
}

// A new run's folder, with run.json: what --resume reads.
void create_run_folder(RunState& run) {
  char host[256] = "host";
  gethostname(host, sizeof host - 1);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", std::gmtime(&run.start));
  std::string error;
  std::optional<RunFolder> folder =
      RunFolder::create(run.opt.out, fmt::format("{}-{}-{}", stamp, host, run.git_sha), &error);
  if (!folder) usage_error(error);
  run.folder = std::move(*folder);
  Json args = Json::array(), variables = Json::array();
  for (const std::string& a : run.opt.args) args.push_back(a);
  for (const std::string& v : result_variables(environ)) variables.push_back(v);
  write_atomically(run.folder.dir() / "run.json",
                   dump_json(Json::object({{"format_version", kResultFormat},
                                           {"args", std::move(args)},
                                           {"git_sha", run.git_sha},
                                           {"environment", run.environment},
                                           {"variables", std::move(variables)}}),
                             2, 2) +
                       "\n");
  fmt::print("{}  writing to {}\n",
             wrapped(fmt::format("run {} ({}: {})", run.folder.id(), run.opt.study->name,
                                 run.opt.study->question),
                     4),
             run.folder.dir().string());
}

// --background: its busy processes, from the check to the summary, running or (beside the rows
// under load only) stopped until those rows' turns.
void start_background(RunState& run) {
  if (!run.opt.background.any()) return;
  run.background = BackgroundProcesses(run.opt.background, !run.opt.background_rows_only);
  fmt::print("background: {} beside {}\n", run.opt.background.text(),
             run.opt.background_rows_only ? "the timed steps of the rows under load" : "every row");
  if (run.background.started() < run.opt.background.processes)
    fmt::print(stderr, "warning: --background: only {} of {} busy processes could start\n",
               run.background.started(), run.opt.background.processes);
}

int run_main(RunState& run) {
  for (const std::string& b : run.opt.backends)
    if (!fs::exists(run.program(b)))
      usage_error(fmt::format("{} not found; build first (make)", run.program(b)));
  run.start = std::time(nullptr);
  run.load_start = load_average_1min();
  for (const auto& [key, value] : proc_environment()) run.environment[key] = value;
  run.git_sha = source_git_sha();
  remove_orphaned_scratch_folders();
  struct RanksScratch {  // made for the data-parallel rows, removed however run_main returns
    std::string folder;
    ~RanksScratch() {
      std::error_code ec;
      if (!folder.empty()) fs::remove_all(folder, ec);
    }
  } ranks_scratch;
  if (std::any_of(run.opt.backends.begin(), run.opt.backends.end(),
                  [](const std::string& b) { return spec_of(b).launcher; })) {
    std::string folder =
        ranks_scratch_parent() / (kRanksScratchPrefix + std::to_string(getpid()) + ".XXXXXX");
    if (!mkdtemp(folder.data())) throw WriteError(ranks_scratch_parent(), errno);
    run.ranks_scratch = ranks_scratch.folder = folder;
  }
  if (run.opt.resume.empty()) {
    estimate_memory(run);
    if (g_interrupted) {  // while estimating: no run folder yet, nothing measured
      fmt::print(stderr, "interrupted ({}) before anything ran\n", strsignal(g_interrupted));
      return 128 + g_interrupted;
    }
    create_run_folder(run);
    run.write_processes();
  } else {
    reopen_run(run);
  }
  run.note_other_benchmarks();
  start_background(run);
  const bool all_agree = check_phase(run);
  if (run.opt.check_only && !g_interrupted) {
    run.folder.finished();
    return all_agree ? 0 : 1;
  }
  if (!g_interrupted) bench_phase(run);
  for (const Study& study : studies())  // the study's own measurement; `all`: every study's
    if (!g_interrupted && study.phase && (&study == run.opt.study || run.opt.study->everything))
      study.phase(run);
  summary_phase(run);  // interrupted too: what finished, the rest marked interrupted
  run.background.end();
  if (g_interrupted) return stopped_run(run);
  run.folder.finished();
  run.folder.point_latest_here();
  if (run.opt.plots) plot_phase(run);
  if (g_interrupted) {  // while drawing: the run finished, its figures did not
    fmt::print(stderr,
               "interrupted ({}) while drawing the plots: the results are whole; draw them with: "
               "make plots RUN={}\n",
               strsignal(g_interrupted), run.folder.dir().string());
    return 128 + g_interrupted;
  }
  return run.failures ? 3 : 0;
}

// Every selected model that reads the corpus needs a window and one more token; a bad corpus
// is bad input, found before anything runs.
void check_corpus(const Options& o, const std::vector<Selected>& selected) {
  int32_t context = 0;
  for (const Selected& s : selected) context = std::max(context, s.workload->corpus.context);
  if (context == 0) return;
  try {
    load_corpus(o.data, size_t(context) + 1);
  } catch (const std::exception& e) {
    usage_error(e.what());
  }
}

}  // namespace

int bench_run_main(int argc, char** argv) {
  signal(SIGINT, interrupt_children);
  signal(SIGTERM, interrupt_children);
  signal(SIGPIPE, SIG_IGN);  // a backend that ended mid-turn: the write fails, the runner goes on
  if (argc > 1 && std::string(argv[1]) == "compare")
    return compare_main({argv + 2, argv + argc}, BP_SOURCE_DIR "/plots/compare.py");
  if (argc > 1 && std::string(argv[1]) == "import-gradbench")
    return import_gradbench_main({argv + 2, argv + argc});
  RunState run;
  run.opt = parse_options(resumed_args({argv + 1, argv + argc}, kResultFormat));
  std::string error;
  std::vector<std::string> unused_sizes;
  std::optional<std::vector<Selected>> selected = select_instances(
      {.backends = run.opt.backends,
       .workloads = run.opt.workloads,
       .sizes = run.opt.sizes,
       .filter = run.opt.filter,
       .threads_of = [&](const std::string& b) { return threads_of(b, run.opt.threads); },
       .runs = [](const std::string& b, const WorkloadInfo& w) { return backend_runs(b, w.name); },
       .default_skip = default_size_skipped,
       .unused_sizes = &unused_sizes,
       .given_sizes = run.opt.given_sizes},
      &error);
  if (!selected) usage_error(error);
  for (const std::string& line : unused_sizes) fmt::print(stderr, "warning: {}\n", line);
  if (run.opt.threads > process_cpus())
    fmt::print(stderr,
               "warning: --threads {} on {} CPU{}: every backend is oversubscribed, and its "
               "times measure that\n",
               run.opt.threads, process_cpus(), process_cpus() == 1 ? "" : "s");
  const bool data_parallel = std::any_of(run.opt.backends.begin(), run.opt.backends.end(),
                                         [](const std::string& b) { return spec_of(b).launcher; });
  if (data_parallel && run.opt.hostfile.empty() && run.opt.ranks * run.opt.threads > process_cpus())
    fmt::print(stderr,
               "warning: --ranks {} x --threads {} on {} CPU{}: the data-parallel rows are "
               "oversubscribed, and their times measure that\n",
               run.opt.ranks, run.opt.threads, process_cpus(), process_cpus() == 1 ? "" : "s");
  // A variant none of whose workloads is selected has no column in any table.
  std::erase_if(run.opt.backends, [&](const std::string& b) {
    return std::none_of(selected->begin(), selected->end(),
                        [&](const Selected& s) { return s.names.count(b) > 0; });
  });
  check_corpus(run.opt, *selected);
  run.selected = std::move(*selected);
  for (const Selected& s : run.selected)  // sizes beyond a backend's default sweep
    for (const auto& [b, why] : s.skipped) run.decide_not_to_run(s, b, "skipped", why);
  const std::string cpu_flags = proc_cpu_flags();
  for (const Selected& s : run.selected)  // a variant at a level this processor lacks
    for (const auto& [b, name] : s.names)
      if (const std::string lacks = isa_level_missing(isa_of(b, run.opt.isa), cpu_flags);
          !lacks.empty())
        run.decide_not_to_run(s, b, "skipped",
                              fmt::format("it runs at {}, and this processor lacks {}",
                                          isa_of(b, run.opt.isa), lacks));
  for (const Selected& s : run.selected)  // a variant in float32 only, under bf16
    for (const auto& [b, name] : s.names)
      if (const char* why = spec_of(b).fp32_only; why && run.opt.bf16)
        run.decide_not_to_run(s, b, "skipped", fmt::format("float32 only: {}", why));
  try {
    return run_main(run);
  } catch (const WriteError& e) {  // a full disk: stop, keeping every file as last written
    fmt::print(stderr, "error: {}; the run stopped, and its files keep their last good copy\n",
               e.what());
    return 4;
  }
}

}  // namespace bp
