// harness/runner/run_state.h: what the phases of one run share (the options, the selection, the
// run folder, the environment it started in, and what each phase found so far), and how a
// backend process is started: its command line, its environment, its line in processes.json.
//
// The phases, in the order bench_run runs them (harness/runner/run.cc): the memory estimate
// (memory_phase.cc), the check (check_phase.cc), the benchmarks (bench_phase.cc), a study's own
// measurement (its phase: studies/<name>/phase.cc), the summary (summary_phase.cc). Resuming an
// interrupted run and stopping one are resume.cc.
#pragma once

#include <ctime>
#include <map>
#include <string>
#include <vector>

#include "harness/common/files.h"
#include "harness/common/json.h"
#include "harness/common/protocol.h"
#include "harness/runner/background.h"
#include "harness/runner/judge.h"
#include "harness/runner/options.h"
#include "harness/runner/process.h"
#include "harness/runner/selection.h"
#include "harness/runner/summary.h"

namespace bp {

// instance -> backend -> T
template <class T>
using ByCell = std::map<std::string, std::map<std::string, T>>;

// The launcher's command line that starts `ranks` ranks of a data-parallel row (run_state.cc).
std::vector<std::string> launcher_argv(std::string_view launcher, int ranks,
                                       const std::string& hostfile = "");

struct RunState {
  Options opt;
  std::vector<Selected> selected;
  RunFolder folder;
  std::string git_sha;
  Json environment = Json::object({});  // harness/common/proc.h's, read once at the start
  std::time_t start = 0;
  double load_start = -1;
  std::vector<std::string> others;  // other benchmark processes seen during the run
  std::vector<long> other_runs;     // the runs they belong to (proc_benchmark_root), each warned of
  Json processes = Json::array();
  Json estimates = Json::array();        // sizes beyond the defaults: what each will need
  ByCell<Json> not_run;                  // the runner's own records, in place of the check's
  ByCell<Verdict> verdicts;              // the judge's
  ByCell<Cell> cells;                    // the benchmarks' results, rounds merged
  ByCell<std::vector<double>> losses;    // models: the training losses of each check
  ByCell<double> step_seconds;           // a step, as the check timed it
  std::map<std::string, Json> finished;  // --resume: "benchmark#round" -> its last bench process
  std::map<std::string, Json> contexts;  // backend -> the context its result files carry
  int failures = 0;
  // The data-parallel rows' TMPDIR and Open MPI's shared-memory folder, removed at the run's end:
  // mpirun left 8 MB of /dev/shm and a session folder behind each timed-out row, torchrun a
  // /tmp/torchelastic_* folder behind every launch.
  std::string ranks_scratch;
  // --background's busy processes: running for the whole run, or stopped but in the turns of
  // the rows under load (run.cc starts them, bench_phase.cc resumes and pauses them).
  BackgroundProcesses background;
  // Whether `backend`'s timed steps run beside them.
  bool loaded(const std::string& backend) const {
    return opt.background.any() && (!opt.background_rows_only || spec_of(backend).under_load);
  }

  // ---- starting backend processes (run_state.cc) ----
  std::string program(const std::string& backend) const;
  // A backend's command line without its instances and phase flags. Checkpoints and the kernel
  // verdict file go to `folder` (default: the run's; the memory probes give their scratch one).
  std::vector<std::string> command(const std::string& backend, bool reads_corpus,
                                   const std::string& folder = {}) const;
  std::string instance_arg(const Selected& s, const std::string& backend) const;
  int check_steps(const Selected& s) const;  // a model's training steps in the check
  std::vector<std::string> child_env(const std::string& backend) const;
  // The address space of each of `backend`'s processes: --memory-limit, shared by the ranks of
  // a data-parallel row on one machine (each rank inherits the launcher's cap).
  int64_t memory_limit_of(const std::string& backend) const {
    return spec_of(backend).launcher && opt.hostfile.empty() && opt.ranks > 1
               ? opt.memory_limit / opt.ranks
               : opt.memory_limit;
  }
  // The instruction-set caps of `backend`'s level ("VAR=value" each; harness/common/isa_cap.h).
  std::vector<std::string> cap_environment(const std::string& backend) const;
  void note_other_benchmarks();

  // ---- benchmarks the runner decides not to run (skipped, out of memory by the estimate) ----
  void decide_not_to_run(const Selected& s, const std::string& b, const std::string& status,
                         const std::string& why);
  const Json* not_run_record(const Selected& s, const std::string& b) const;
  void add_not_run(const std::string& b, std::map<std::string, Json>& records) const;
  void not_run_for_memory(const Selected& s, const std::string& b, const std::string& estimate);

  // ---- processes.json, rewritten after each process ----
  void add_process(Json record);
  void write_processes() const;  // also at the start: the memory estimates, before any process
  Json run_options_json() const;
  static Json process_json(const std::string& backend, const std::string& phase,
                           const std::string& benchmark, const std::string& file,
                           const std::string& log, const std::string& status,
                           const std::string& message, const ProcessResult& p);

  // A process that ended badly because it could not get memory: the line of its log that says
  // so (the loader could not map a library under the address-space limit, Python's MemoryError),
  // or "" for any other end.
  std::string memory_failure_line(const std::string& log) const;

  // Bad input found after the run folder was made (a backend refusing its flags): a new run's
  // folder is removed (nothing was measured), a resumed run's kept as it was (run_state.cc).
  [[noreturn]] void refuse(const std::string& what);
  void make_folders(const std::vector<fs::path>& folders) const;
};

// The phases (each in its own .cc file).
void estimate_memory(RunState& run);
// The probe folders of runners that were killed before they could remove them.
// The scratch folders of runners that died: the memory probes', the data-parallel rows'.
void remove_orphaned_scratch_folders();
inline constexpr const char* kRanksScratchPrefix = "bench_run.ranks.";
std::filesystem::path ranks_scratch_parent();
bool check_phase(RunState& run);  // true if every backend agreed everywhere
void bench_phase(RunState& run);
void summary_phase(RunState& run);
void plot_phase(const RunState& run);
void reopen_run(RunState& run);
int stopped_run(RunState& run);
// bench_run's whole command line (harness/runner/run.cc); apps/bench_run.cc is its main().
int bench_run_main(int argc, char** argv);

// A benchmark's result file's stem: its name with '/' and ':' made safe.
std::string file_stem(const std::string& bench_name);

}  // namespace bp
