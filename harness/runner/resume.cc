// harness/runner/resume.cc: finishing an interrupted run (--resume), and stopping one.
//
// Resuming reopens the run's folder, on the commit and processor it was made with (unless
// --force), with what it already finished: its processes, so that a row whose benchmarks all
// ended well is not run again (bench_phase.cc), and its memory estimates as decided then. The
// folder is locked while a run has it (RunFolder): a second resume of the same run is refused.
// Stopping (Ctrl-C, SIGTERM): what finished is written (the summary included, the rest marked
// interrupted), the run stays marked INCOMPLETE, latest stays where it was.
#include <fmt/format.h>
#include <unistd.h>

#include <cstring>

#include "harness/common/environment.h"
#include "harness/runner/run_state.h"

namespace bp {

void reopen_run(RunState& run) {
  std::string error;
  std::optional<RunFolder> folder = RunFolder::reopen(run.opt.resume, &error);
  if (!folder || !folder->lock(&error)) usage_error(error);
  run.folder = std::move(*folder);
  const Json saved_json = parse_json(read_file(run.folder.dir() / "run.json"));
  const JsonView saved = saved_json;
  std::vector<std::string> differences;
  if (saved["git_sha"].str_or("?") != run.git_sha)
    differences.push_back(
        fmt::format("git_sha: {} then, {} now", saved["git_sha"].str_or("?"), run.git_sha));
  for (const std::string& d : performance_differences(saved["environment"], run.environment))
    differences.push_back(d);
  // The variables that change results, as the run had them (runs before they were recorded: not
  // compared). Another value would make half a run of one setting and half of another.
  if (saved["variables"].is_array()) {
    std::vector<std::string> then;
    for (JsonView v : saved["variables"].elements()) then.push_back(v.str_or(""));
    const std::vector<std::string> changed = variable_differences(then, result_variables(environ));
    if (!changed.empty())
      usage_error(fmt::format(
          "--resume {}: the environment differs from the run's ({}); resume with it as it was, "
          "and nothing in the run is lost",
          run.opt.resume.string(), fmt::join(changed, "; ")));
  }
  if (!differences.empty() && !run.opt.force)
    usage_error(fmt::format(
        "--resume {}: this run was made on another commit or machine ({}); its numbers and new "
        "ones would not be comparable: add --force (make bench RESUME=... FORCE=1) to resume "
        "anyway",
        run.opt.resume.string(), fmt::join(differences, "; ")));
  try {
    const Json old_json = parse_json(read_file(run.folder.dir() / "processes.json"));
    const JsonView old = old_json;
    for (JsonView e : old["memory_estimates"].elements()) {  // as decided then
      run.estimates.push_back(e.json());
      if (e["not_run"].bool_or(false))
        for (const Selected& s : run.selected)
          if (s.id == e["instance"].str_or("") && s.names.count(e["backend"].str_or("")))
            run.not_run_for_memory(s, e["backend"].str_or(""), e["how"].str_or(""));
    }
    for (JsonView p : old["processes"].elements()) {
      run.processes.push_back(p.json());
      if (p["phase"].str_or("") == "bench")
        run.finished[p["benchmark"].str_or("") + "#" +
                     std::to_string(int(p["round"].num_or(1)) - 1)] = p.json();
    }
  } catch (const std::exception&) {  // interrupted before its first process: nothing finished
  }
  fmt::print("run {} resumed\n  writing to {}\n", run.folder.id(), run.folder.dir().string());
}

int stopped_run(RunState& run) {
  int finished = 0, total = 0;
  for (const Selected& s : run.selected)
    for (const auto& [b, name] : s.names) {
      total++;
      auto c = run.cells[s.id].find(b);
      finished += c != run.cells[s.id].end() && c->second.status != "interrupted";
    }
  const std::string how =
      fmt::format("make bench RESUME={} (or {} --resume {})", run.folder.dir().string(),
                  (run.opt.bin_dir / "bench_run").string(), run.folder.dir().string());
  write_atomically(run.folder.dir() / "INCOMPLETE",
                   fmt::format("interrupted by {} with {} of {} benchmarks finished; resume "
                               "with: {}\n",
                               strsignal(g_interrupted), finished, total, how));
  std::fflush(stdout);
  fmt::print(stderr,
             "\ninterrupted ({}): {} of {} benchmarks finished, written to {}; the run is marked "
             "INCOMPLETE; resume it with: {}\n",
             strsignal(g_interrupted), finished, total, run.folder.dir().string(), how);
  return 128 + g_interrupted;
}

}  // namespace bp
