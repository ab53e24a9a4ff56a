// harness/runner/gradbench_import.cc: bench_run import-gradbench
// (harness/runner/gradbench_import.h): reads GradBench logs, adds their tools to a run's summary,
// and writes a new run folder with its summary, figures and report.
#include "harness/runner/gradbench_import.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <ctime>
#include <ranges>

#include "harness/runner/process.h"
#include "harness/runner/summary_text.h"

namespace bp {

namespace {

[[noreturn]] void import_error(const std::string& why) {
  fmt::print(stderr,
             "bench_run import-gradbench: {}\nusage: bench_run import-gradbench LOG.jsonl... "
             "[--into results/<run-id>] [--out results]\n",
             why);
  std::exit(2);
}

}  // namespace

int import_gradbench_main(const std::vector<std::string>& args) {
  std::vector<fs::path> logs;
  fs::path into, out = "results";
  for (size_t i = 0; i < args.size(); i++) {
    const std::string& a = args[i];
    if (a == "--into" || a == "--out") {
      if (i + 1 >= args.size() || args[i + 1].empty() || args[i + 1].rfind("--", 0) == 0)
        import_error(a + " takes a folder" +
                     (i + 1 < args.size() ? ", not " + args[i + 1] : std::string()));
      (a == "--into" ? into : out) = args[++i];
    } else if (a.rfind("--", 0) == 0) {
      import_error(a + ": unknown flag; valid: --into RUN, --out DIR");
    } else {
      logs.emplace_back(a);
    }
  }
  if (logs.empty()) import_error("name at least one GradBench log (a .jsonl of `gradbench run`)");
  for (size_t i = 0; i < logs.size(); i++)  // one log twice would count its cells twice
    for (size_t j = 0; j < i; j++) {
      std::error_code ec;
      if (fs::equivalent(logs[i], logs[j], ec))
        import_error(logs[i].string() + ": given twice (as " + logs[j].string() + ")");
    }
  GradbenchImport imported;
  try {
    for (const fs::path& log : logs) import_gradbench_log(log, &imported);
  } catch (const std::exception& e) {
    import_error(e.what());
  }
  if (imported.cells.empty())
    import_error(fmt::format("no gradient of our workloads in {} log(s); left out: {}", logs.size(),
                             fmt::join(imported.left_out, "; ")));
  Summary s;
  std::string id;
  if (!into.empty()) {
    if (!fs::exists(into / "summary.json"))
      import_error(into.string() + ": no summary.json (not a run folder of bench_run)");
    try {
      s = summary_from_json(parse_json(read_file(into / "summary.json")));
    } catch (const std::exception& e) {
      import_error((into / "summary.json").string() + ": unreadable (" + e.what() + ")");
    }
    // The new folder is named after the run's own folder, never after the file's run_id (which
    // could be "../../x" and write outside --out).
    id = fs::weakly_canonical(into).filename().string() + "+gradbench";
  } else {
    const std::time_t now = std::time(nullptr);
    char stamp[32];
    std::strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", std::gmtime(&now));
    id = std::string(stamp) + "-gradbench";
    s.study = "gradbench";
  }
  merge_import(imported, &s);
  fs::path dir = out / id;
  for (int n = 2; fs::exists(dir); n++) dir = out / fmt::format("{}-{}", id, n);
  s.run_id = dir.filename().string();
  std::error_code ec;
  fs::create_directories(dir / "logs", ec);
  if (ec) import_error(dir.string() + ": cannot create it (" + ec.message() + ")");
  // The folder is marked INCOMPLETE until its summary is written (a full disk leaves it so,
  // never a folder that looks whole); an interrupted run's import stays marked, as its run is.
  const bool incomplete = !into.empty() && fs::exists(into / "INCOMPLETE");
  try {
    write_atomically(dir / "INCOMPLETE",
                     "an import of GradBench's logs that stopped before its summary was written; "
                     "run the import again\n");
    for (const char* kept : {"check.json", "processes.json", "run.json", "INCOMPLETE"})
      if (!into.empty() && fs::exists(into / kept)) {
        fs::copy_file(into / kept, dir / kept, fs::copy_options::overwrite_existing, ec);
        if (ec) throw WriteError(dir / kept, ec.value());
      }
    write_atomically(dir / "summary.json", dump_json(summary_json(s), 2, 4) + "\n");
    write_atomically(dir / "summary.csv", summary_csv(s));
    std::vector<std::string> log_names;
    for (const fs::path& log : logs) log_names.push_back(log.string());
    std::string text = summary_text(s);
    text += wrapped(fmt::format("imported: {} cell(s) of {} from {}", imported.cells.size(),
                                fmt::join(imported.versions | std::views::keys, ", "),
                                fmt::join(log_names, ", ")),
                    2);
    if (!imported.left_out.empty()) {
      text += fmt::format("left out ({}: not among our workloads' gradients):\n",
                          imported.left_out.size());
      for (const std::string& l : imported.left_out) text += "  " + wrapped(l, 4);
    }
    if (incomplete)
      text += wrapped(fmt::format("incomplete: {} was interrupted, and so is this import of it; "
                                  "make bench RESUME={} finishes the run",
                                  into.string(), into.string()),
                      2);
    text += fmt::format("results: {}\n", dir.string());
    write_atomically(dir / "summary.txt", text);
    if (!incomplete && unlink((dir / "INCOMPLETE").c_str()) != 0)
      throw WriteError(dir / "INCOMPLETE", errno);
    fmt::print("{}", text);
    std::fflush(stdout);
  } catch (const WriteError& e) {  // a full disk: one line, the folder left marked
    fmt::print(stderr, "error: import-gradbench: {}; {} is left marked INCOMPLETE\n", e.what(),
               dir.string());
    return 4;
  }
  const ProcessResult p =
      run_process({"/usr/bin/python3", BP_SOURCE_DIR "/plots/plot.py", dir.string()},
                  (dir / "logs" / "plots.log").string(), 600, {});
  if (!p.ok())
    fmt::print(stderr, "plots failed ({}); the results are intact, retry with: make plots RUN={}\n",
               p.failure(), dir.string());
  return 0;
}

}  // namespace bp
