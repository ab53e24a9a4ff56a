// harness/runner/run_state.cc: starting a backend process (its command line and environment),
// the runner's own records of what it does not run, and processes.json.
#include "harness/runner/run_state.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cmath>
#include <cstring>

#include "harness/common/isa_cap.h"
#include "harness/common/proc.h"

namespace bp {

std::string file_stem(const std::string& bench_name) {
  std::string s;
  for (char c : bench_name) s += c == '/' ? std::string("__") : c == ':' ? "-" : std::string(1, c);
  return s;
}

std::string RunState::program(const std::string& backend) const {
  const std::string p = spec_of(backend).program;
  if (p.find('/') != std::string::npos) return std::string(BP_SOURCE_DIR "/") + p;
  return (opt.bin_dir / p).string();
}

std::vector<std::string> RunState::command(const std::string& backend, bool reads_corpus,
                                           const std::string& scratch) const {
  std::vector<std::string> argv = {program(backend)};
  const BackendSpec& spec = spec_of(backend);
  if (spec.mode_flags)
    for (const std::string& flag : fields(spec.mode_flags, ' ')) argv.push_back(flag);
  // A variant (one program, other flags) says its own name in its results.
  if (spec.variant_of || spec.mode_flags || spec.fixed_threads || spec.launcher || spec.isa)
    argv.push_back(fmt::format("--backend_name={}", backend));
  const std::string folder = scratch.empty() ? this->folder.dir().string() : scratch;
  if (spec.plan_cache)
    // A warm start's plans stay in its folder: the run's, or a memory probe's scratch (probes
    // run before the run folder exists).
    argv.push_back(spec.warm_plans         ? "--cache-dir=" + (fs::path(folder) / "plans").string()
                   : opt.cache_dir.empty() ? std::string("--no-cache")
                                           : "--cache-dir=" + fs::absolute(opt.cache_dir).string());
  if (spec.checkpoints)
    argv.push_back("--checkpoint_dir=" +
                   (opt.checkpoint_dir.empty() ? folder : opt.checkpoint_dir));
  // Kernel verdicts are shared through the run folder: measured once, by the first process that
  // meets a shape (the check's), read by every later one (the driver keeps one file per thread
  // count: harness/driver/backend_main.h), and one more per level of a row at its own.
  const int threads = threads_of(backend, opt.threads);
  const std::string isa = isa_of(backend, opt.isa);
  if (spec.shares_verdicts)
    argv.push_back("--verdicts=" + folder + "/dialect_verdicts" +
                   (isa == opt.isa ? "" : "_" + isa) + ".txt");
  if (spec.threaded) argv.push_back(fmt::format("--threads={}", threads));
  if (opt.bf16 && !backend_in_bf16(backend)) argv.push_back("--precision=bf16");
  if (reads_corpus) argv.push_back("--data=" + opt.data);
  if (spec.launcher) {  // a data-parallel row: --ranks processes under its launcher
    std::vector<std::string> launch = launcher_argv(spec.launcher, opt.ranks, opt.hostfile);
    // Ranks on other hosts see none of mpirun's environment but what -x exports: the level's caps
    // and the commit their results name (each reads its own machine: harness/common/proc.h).
    if (!opt.hostfile.empty()) {
      launch.insert(launch.end(), {"-x", "BACKPROP_BENCH_GIT_SHA=" + git_sha});
      for (const std::string& v : cap_environment(backend)) launch.insert(launch.end(), {"-x", v});
    }
    argv.insert(argv.begin(), launch.begin(), launch.end());
    argv.push_back(fmt::format("--ranks={}", opt.ranks));
  }
  return argv;
}

// How a data-parallel row's ranks are started. mpirun: more ranks than cores allowed, the ranks
// not bound to cores (torchrun binds none either, and a rank's threads would share one), shared
// memory without the single-copy path (slower on mlp_width here, and it needs ptrace rights
// some containers do not give: dev/notes.md), root allowed (Open MPI refuses it unless told).
// torchrun: one host; its own default --redirects 0 and --tee 0 fail in Debian's torch 1.13 on
// Python 3.11 (its flag of 0 is not found), so stdout is teed.
std::vector<std::string> launcher_argv(std::string_view launcher, int ranks,
                                       const std::string& hostfile) {
  if (launcher == "torchrun")
    return {path_of("torchrun"),
            "--standalone",
            "--redirects",
            "1",
            "--tee",
            "1",
            fmt::format("--nproc_per_node={}", ranks)};
  std::vector<std::string> argv = {path_of("mpirun"),
                                   "-n",
                                   std::to_string(ranks),
                                   "--oversubscribe",
                                   "--bind-to",
                                   "none",
                                   "--mca",
                                   "btl_vader_single_copy_mechanism",
                                   "none"};
  if (geteuid() == 0) argv.push_back("--allow-run-as-root");
  if (!hostfile.empty()) argv.insert(argv.end(), {"--hostfile", hostfile});
  return argv;
}

// A model's training steps in the check: the study's, where it asks for its own, else the
// workload's at this size.
int RunState::check_steps(const Selected& s) const {
  if (s.workload->model && opt.study->check_steps > 0) return opt.study->check_steps;
  return s.workload->check_steps_at(s.size);
}

std::string RunState::instance_arg(const Selected& s, const std::string& backend) const {
  return instance_flag({.workload = std::string(s.workload->name),
                        .size = s.workload->sizes.sized() ? std::optional(s.size) : std::nullopt,
                        .name = s.names.at(backend),
                        .check_steps = check_steps(s)});
}

// The environment (harness/common/proc.h) goes to the Python backend, which has no reader of its
// own; thread counts are each backend's own business (--threads); the instruction-set level is
// every library's variable (harness/common/isa_cap.h), replacing what the caller's environment
// says, except at native.
std::vector<std::string> RunState::child_env(const std::string& backend) const {
  std::vector<std::string> env = {"BACKPROP_BENCH_GIT_SHA=" + git_sha,
                                  "BACKPROP_BENCH_ENVIRONMENT=" + dump_json(environment)};
  for (std::string& v : cap_environment(backend)) env.push_back(std::move(v));
  env.push_back("BP_BACKGROUND=" + (loaded(backend) ? opt.background.text() : "none"));
  if (const char* launcher = spec_of(backend).launcher; launcher && !ranks_scratch.empty()) {
    env.push_back("TMPDIR=" + ranks_scratch);
    if (std::string_view(launcher) == "mpirun")
      env.push_back("OMPI_MCA_btl_vader_backing_directory=" + ranks_scratch);
  }
  return env;
}
std::vector<std::string> RunState::cap_environment(const std::string& backend) const {
  const std::string cpu_flags = environment.contains("cpu_flags")
                                    ? environment["cpu_flags"].get<std::string>()
                                    : proc_cpu_flags();
  return isa_cap_environment(isa_of(backend, opt.isa), cpu_flags);
}

// Another benchmark on the machine makes this run's timings incomparable: say so, once, and in
// the results.
// One warning per other run, not per process of it (a run of 20 backends' processes was 20 lines).
void RunState::note_other_benchmarks() {
  for (const std::string& other : proc_other_benchmarks(getpid())) {
    if (std::find(others.begin(), others.end(), other) != others.end()) continue;
    others.push_back(other);
    const long root = proc_benchmark_root(std::strtol(other.c_str(), nullptr, 10));
    if (root == 0 || std::find(other_runs.begin(), other_runs.end(), root) != other_runs.end())
      continue;  // gone already, or of a run said before
    other_runs.push_back(root);
    fmt::print(stderr, "warning: another benchmark is running on this machine ({}{})\n", other,
               std::to_string(root) + " " == other.substr(0, other.find(' ') + 1)
                   ? ""
                   : fmt::format(", of the run of process {}", root));
    std::fflush(stderr);
  }
}

// Its record, in place of the check's, says why (status skipped, or out_of_memory for an
// estimate above the limit); the judge, the bench phase and the summary take it as they take a
// backend's own.
void RunState::decide_not_to_run(const Selected& s, const std::string& b, const std::string& status,
                                 const std::string& why) {
  not_run[s.id][b] = Json::object({{"name", s.names.at(b)}, {"status", status}, {"message", why}});
}

const Json* RunState::not_run_record(const Selected& s, const std::string& b) const {
  auto i = not_run.find(s.id);
  if (i == not_run.end()) return nullptr;
  auto r = i->second.find(b);
  return r == i->second.end() ? nullptr : &r->second;
}

void RunState::add_not_run(const std::string& b, std::map<std::string, Json>& records) const {
  for (const Selected& s : selected)
    if (s.names.count(b))
      if (const Json* r = not_run_record(s, b)) records[s.names.at(b)] = *r;
}

void RunState::not_run_for_memory(const Selected& s, const std::string& b,
                                  const std::string& estimate) {
  decide_not_to_run(
      s, b, "out_of_memory",
      fmt::format("not run: estimated above the limit of {} ({}); --force runs it, capped",
                  human_bytes(double(opt.memory_limit)), estimate));
}

void RunState::add_process(Json record) {
  processes.push_back(std::move(record));
  write_processes();
}

void RunState::write_processes() const {
  char started[32];
  std::strftime(started, sizeof started, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&start));
  const Json doc = Json::object({{"run_id", folder.id()},
                                 {"git_sha", git_sha},
                                 {"started_utc", started},
                                 {"options", run_options_json()},
                                 {"memory_estimates", estimates},
                                 {"processes", processes}});
  write_atomically(folder.dir() / "processes.json", dump_json(doc, 2, 2) + "\n");
}

// The options a number depends on, as the run used them.
Json RunState::run_options_json() const {
  Json options = Json::object({{"study", std::string(opt.study->name)},
                               {"filter", opt.filter},
                               {"workloads", opt.workloads},
                               {"data", opt.data},
                               {"threads", opt.threads},
                               {"ranks", opt.ranks},
                               {"hostfile", opt.hostfile},
                               {"precision", opt.bf16 ? "bf16" : "fp32"},
                               {"isa", opt.isa},
                               {"repetitions", opt.repetitions},
                               {"rounds", opt.rounds},
                               {"min_time", opt.min_time},
                               {"warmup_steps", opt.warmup_steps},
                               {"time_budget", opt.time_budget},
                               {"memory_limit_bytes", opt.memory_limit},
                               {"timeout", opt.timeout},
                               {"background", opt.background.text()},
                               {"background_beside", !opt.background.any()      ? "none"
                                                     : opt.background_rows_only ? "rows under load"
                                                                                : "every row"}});
  Json backends = Json::array(), sizes = Json::array();
  for (const std::string& b : opt.backends) backends.push_back(b);
  for (const std::string& s : opt.sizes) sizes.push_back(s);
  options["backends"] = std::move(backends), options["sizes"] = std::move(sizes);
  return options;
}

Json RunState::process_json(const std::string& backend, const std::string& phase,
                            const std::string& benchmark, const std::string& file,
                            const std::string& log, const std::string& status,
                            const std::string& message, const ProcessResult& p) {
  return Json::object({{"backend", backend},
                       {"phase", phase},
                       {"benchmark", benchmark},
                       {"file", file},
                       {"log", log},
                       {"status", status},
                       {"message", message},
                       {"exit_code", p.exit_code},
                       {"signal", p.signal},
                       {"timed_out", p.timed_out},
                       {"wall_seconds", std::round(p.wall_seconds * 1000) / 1000},
                       {"max_rss_bytes", p.max_rss_bytes}});
}

std::string RunState::memory_failure_line(const std::string& log) const {
  for (const std::string& line : split(read_file(folder.dir() / log), '\n'))
    for (const char* sign : {"failed to map segment", "Cannot allocate memory",
                             "cannot allocate memory", "MemoryError", "std::bad_alloc"})
      if (line.find(sign) != std::string::npos) return line;
  return "";
}

// A backend refused its flags: bad input, one line, exit 2. A new run's folder goes with it
// (nothing in it was measured); a resumed run's stays as it was, every result in it and still
// INCOMPLETE, to be resumed once the cause is fixed: a resume never deletes what a run measured.
void RunState::refuse(const std::string& what) {
  if (opt.resume.empty()) {
    folder.remove();
    usage_error(what);
  }
  usage_error(fmt::format("{}; {} is kept as it was (resume it once that is fixed)", what,
                          folder.dir().string()));
}

void RunState::make_folders(const std::vector<fs::path>& folders) const {
  for (const fs::path& f : folders)
    if (std::error_code ec; !fs::create_directories(f, ec) && ec) throw WriteError(f, ec.value());
}

}  // namespace bp
