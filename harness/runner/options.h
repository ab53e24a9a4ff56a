// harness/runner/options.h: bench_run's command line: what it accepts, its defaults, and the
// one-line refusal of anything else (exit 2). `bench_run --help` prints kUsage.
//   Tests: harness/tests/test_run.py (every documented option accepted, bad ones refused).
#pragma once

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "harness/common/files.h"
#include "harness/common/isa_cap.h"
#include "harness/common/json.h"
#include "harness/common/proc.h"
#include "harness/common/protocol.h"
#include "harness/common/text.h"
#include "harness/runner/backends.h"
#include "harness/runner/background.h"
#include "harness/runner/studies.h"
#include "workloads/data.h"
#include "workloads/registry.h"

namespace bp {

inline const char* kUsage =
    R"(usage: bench_run [options]            (bench_run compare --help: comparing two runs)
  --study NAME         what to measure (default main: every workload on engine, compiled,
                       libtorch, pytorch and torchscript at the sizes that show who wins);
                       each study its own table and figure (docs/studies.md), one of:
{studies}
  --out DIR            results folder (default: results); the run goes to DIR/<run-id>/ and
                       DIR/latest points at it
  --backends A,B       backends to run, in any order (default: the study's); tables and the
                       reference follow the fixed order of bench_run --list
  --workloads A,B      run only these workloads (default: the study's)
  --sizes KEY=N,...    replace the sizes of the workloads sized by KEY (e.g. nodes=10,5000);
                       repeat it for other keys (--sizes nodes=10 --sizes batch=1,8)
  --filter REGEX       run only benchmarks whose names match (POSIX extended regex, as Google
                       Benchmark's --benchmark_filter; a leading '-' negates)
  --threads N          threads of every backend (default 1; more than the CPUs is oversubscribed)
  --ranks N            the data-parallel rows (the study ranks's) run as N ranks, N processes
                       under mpirun or torchrun (default 2); without --study or --backends it
                       runs the study ranks
  --background N[,NICE] N busy processes (1 to 64) at nice NICE (0 to 19, default 0) beside
                       the timed steps, as a user's machine has other work: beside every row,
                       or in a study with rows under load (contention) beside those rows'
                       turns only (there 1,0 unless given); each result records it
  --hostfile FILE      the mpirun rows' ranks on the hosts of FILE (Open MPI's host file), not
                       on this machine alone (the torchrun row, pytorch_ranks, is one host's)
  --precision P        fp32 (default) or bf16: mixed precision on every backend that has it
                       (bfloat16 products, float32 master weights and optimizer; torch's through
                       torch.autocast); the others' rows are reported skipped, saying why
  --isa L              avx2, avx512 or native: the instruction sets of every backend, each
                       library capped through its own variable (ours BP_ISA, ATen's
                       ATEN_CPU_CAPABILITY, oneDNN's DNNL_MAX_CPU_ISA, OPENBLAS_CORETYPE,
                       LIBXSMM_TARGET); default: the processor's best of avx2 and avx512, the
                       same for every backend; native leaves each library its own choice
  --checkpoint-dir DIR where engine_multistage writes its checkpoint files, each unlinked as soon
                       as it is open (default: the run's folder)
  --cache-dir DIR      keep the compiled mode's plans in DIR, so that its benchmarks skip
                       compiling what a process compiled before (default: off, every process
                       compiles from scratch; compiled_warm_start keeps its own in the run folder)
  --data FILE          character corpus of the model workloads (default /usr/share/dict/words)
  --repetitions N      repetitions per benchmark; the median is reported with its interval,
                       from 6 on at 95% or more (default 10: 2nd to 9th smallest, 97.9%)
  --min-time S         minimum seconds per repetition (default 0.1); a benchmark whose step,
                       as its check timed it, lasts that long sets up and warms up once in each
                       process instead of for each repetition
  --rounds K           run every row K times, round after round over the whole selection, each
                       time in fresh processes with its share of the repetitions, so that the
                       intervals hold what changes between processes and minutes (default 2;
                       at most --repetitions)
  --warmup-steps N     untimed steps after each setup, on every backend (default 3)
  --time-budget S      seconds a benchmark aims to take in all, warm-up included (default 10):
                       one whose step is too long for that gets fewer repetitions (at least 3),
                       two warm-up steps and one round, and says so
  --timeout S          seconds before a backend process is killed (default 600)
  --memory-limit SIZE  address space of each backend process, e.g. 8G or 512M (default: 90% of
                       the memory available when the run starts; a data-parallel row's ranks
                       on this machine share it evenly); a size beyond a workload's
                       defaults is first estimated from three smaller ones, and not run above it
  --force              no memory estimate: every size runs, capped by --memory-limit
  --check-only         run the correctness check only; exit 1 if any backend disagrees
  --jobs N             with --check-only: check N backends at once (default 1)
  --no-plots           do not draw the figures (plots/plot.py) at the end
  --bin-dir DIR        where the backend binaries are (default: next to bench_run)
  --resume RUN         finish an interrupted run (its folder) with its own options; with it only
                       --no-plots, --bin-dir and --force (another commit or processor) may be given
  --list               the backends, workloads and studies, one per line, and exit
Ctrl-C or SIGTERM stops at once, writes the summary of what finished and says how to resume.
Exit status: 0 all ran and agreed; 1 check-only found disagreement; 2 bad input; 3 some
benchmark failed, timed out or was not run; 4 a result file could not be written (a full
disk); 130 (143) interrupted by SIGINT (SIGTERM).
)";

[[noreturn]] inline void usage_error(const std::string& what) {
  std::fflush(stdout);  // what was said before comes before the error
  fmt::print(stderr, "error: {}\n(bench_run --help lists the options)\n", what);
  std::exit(2);
}

// 90% of MemAvailable: what the machine can give a process without swapping, less a margin for
// the runner and the system.
inline int64_t default_memory_limit() {
  const int64_t available = proc_meminfo_bytes("MemAvailable");
  return available > 0 ? available / 10 * 9 : 0;
}

// "8G", "512M", "1500000000": bytes.
inline std::optional<int64_t> parse_bytes(std::string text) {
  int64_t unit = 1;
  if (!text.empty()) {
    const char last = char(std::toupper(static_cast<unsigned char>(text.back())));
    const size_t shift = last == 'K' ? 10 : last == 'M' ? 20 : last == 'G' ? 30 : 0;
    if (shift) unit = int64_t(1) << shift, text.pop_back();
  }
  const std::optional<int64_t> n = parse_whole(text);
  if (!n || *n <= 0 || *n > (int64_t(1) << 50) / unit) return std::nullopt;
  return *n * unit;
}

struct Options {
  fs::path out = "results", bin_dir;
  const Study* study = nullptr;       // the registry's first unless --study names another
  std::vector<std::string> backends;  // in the registry's order
  std::string filter, workloads, data = kDefaultCorpus;
  std::string checkpoint_dir;      // engine_multistage's checkpoint files; empty: the run's folder
  std::string cache_dir;           // the compiled mode's plan cache; empty: off
  std::vector<std::string> sizes;  // the run's --sizes, then the study's for other keys
  std::vector<std::string> given_sizes;  // the run's own --sizes
  // 10 repetitions: the median's interval is then the 2nd to the 9th of them at 97.9%, and a
  // ratio's the 2nd to 9th of its 10 pairs. 2 rounds: each benchmark's repetitions come from two
  // processes, minutes apart (bench_phase.h); 0 until given: then 2, or 1 for one repetition.
  int threads = 1, repetitions = 10, warmup_steps = 3, rounds = 0;
  int ranks = 0;         // --ranks: the data-parallel rows' ranks; 0 until given (then 2)
  std::string hostfile;  // --hostfile: where mpirun puts them (empty: this machine)
  // --background: busy processes beside the timed steps; of the rows under load only where the
  // selection has such rows (BackendSpec::under_load), else of every row.
  BackgroundLoad background;
  bool background_rows_only = false;
  int jobs = 1;       // --check-only: check processes at once, the memory limit shared among them
  bool bf16 = false;  // --precision bf16: every backend's rows under mixed precision
  // --isa: every backend's instruction sets (harness/common/isa_cap.h); "" until given, then the
  // processor's best level (default_isa_level).
  std::string isa;
  double min_time = 0.1, timeout = 600;  // 0.1 s a repetition: 10 of them are a timed second
  double time_budget = 10;  // seconds a benchmark aims at over all its rounds (bench_phase.h)
  int64_t memory_limit = default_memory_limit();
  bool check_only = false, plots = true, force = false;
  fs::path resume;                // --resume: the interrupted run to finish
  std::vector<std::string> args;  // as given (an interrupted run's own, when resuming)
};

inline double parse_number(const std::string& flag, const std::string& text, double lo, double hi) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !(v >= lo && v <= hi))
    usage_error(fmt::format("{} {}: expected a number from {} to {}", flag, text, lo, hi));
  return v;
}

// A count: a whole number, so that 1.9 is refused rather than taken as 1.
inline int parse_count(const std::string& flag, const std::string& text, int lo, int hi) {
  const std::optional<int64_t> v = parse_whole(text);
  if (!v || *v < lo || *v > hi)
    usage_error(fmt::format("{} {}: expected a whole number from {} to {}", flag, text, lo, hi));
  return int(*v);
}

// Where `program` is among PATH's folders, as execve needs it ("" where it is not).
inline std::string path_of(const std::string& program) {
  const char* path = std::getenv("PATH");
  for (const std::string& dir : fields(path ? path : "/usr/bin:/bin", ':'))
    if (!dir.empty() && access((fs::path(dir) / program).c_str(), X_OK) == 0)
      return (fs::path(dir) / program).string();
  return "";
}

// --backends A,B: each known; returned in the fixed order, whatever order they came in.
inline std::vector<std::string> parse_backends(const std::string& list) {
  const std::vector<std::string> given = fields(list, ',');
  if (given.empty()) usage_error("--backends: name at least one backend");
  for (const std::string& b : given)
    if (!find_backend(b))
      usage_error(
          fmt::format("unknown backend '{}'; valid: {}", b, fmt::join(backend_names(), ", ")));
  std::vector<std::string> ordered;
  for (const BackendSpec& b : backend_rows())
    if (std::find(given.begin(), given.end(), b.name) != given.end()) ordered.push_back(b.name);
  return ordered;
}

// What --list prints: every name a run can be given.
inline void print_list() {
  for (const BackendSpec& b : backend_rows())
    fmt::print("backend  {:<20} {}{}\n", b.name, b.program,
               b.mode_flags ? std::string(" ") + b.mode_flags : "");
  for (const WorkloadInfo& w : kWorkloads) fmt::print("workload {:<20} {}\n", w.name, w.times);
  for (const Study& s : studies()) fmt::print("study    {:<20} {}\n", s.name, s.question);
}

// A level the processor lacks: what it lacks, and the levels it has.
inline std::string isa_refusal(const std::string& what, const std::string& lacks) {
  std::string valid;
  for (const char* level : {"avx2", "avx512", "native"})
    if (isa_level_missing(level, proc_cpu_flags()).empty())
      valid += (valid.empty() ? "" : ", ") + std::string(level);
  return fmt::format("{}: this processor ({}, family {} model {}) lacks {}; valid here: {}", what,
                     proc_cpu_model(), proc_cpu_field("cpu family"), proc_cpu_field("model"), lacks,
                     valid);
}

// Applies one option (`arg` with its value from `next`); false if it is not one.
template <class Next>
bool apply_option(Options& o, const std::string& arg, Next&& next, std::string* backends) {
  if (arg == "--study") {
    const std::string name = next();
    o.study = find_study(name);
    if (!o.study) {
      std::vector<std::string_view> valid;
      for (const Study& s : studies()) valid.push_back(s.name);
      usage_error(
          fmt::format("--study {}: no such study; valid: {}", name, fmt::join(valid, ", ")));
    }
  } else if (arg == "--out") {
    o.out = next();
    if (o.out.empty()) usage_error("--out '': name a folder");
  } else if (arg == "--bin-dir")
    o.bin_dir = next();
  else if (arg == "--filter")
    o.filter = next();
  else if (arg == "--workloads")
    o.workloads = next();
  else if (arg == "--sizes")
    o.sizes.push_back(next());
  else if (arg == "--data")
    o.data = next();
  else if (arg == "--checkpoint-dir")
    o.checkpoint_dir = next();
  else if (arg == "--cache-dir")
    o.cache_dir = next();
  else if (arg == "--threads")
    o.threads = parse_count(arg, next(), 1, 256);
  else if (arg == "--ranks")
    o.ranks = parse_count(arg, next(), 1, 4096);
  else if (arg == "--background") {
    const std::string text = next();
    const std::optional<BackgroundLoad> load = parse_background(text);
    if (!load)
      usage_error(fmt::format(
          "--background {}: expected N or N,NICE: N busy processes from 1 to {}, NICE from 0 to "
          "19 (e.g. 1 or 2,19)",
          text, kMostBackground));
    o.background = *load;
  } else if (arg == "--hostfile") {
    o.hostfile = next();
    if (access(o.hostfile.c_str(), R_OK) != 0)
      usage_error(
          fmt::format("--hostfile {}: cannot read it (Open MPI's host file: a host a "
                      "line, e.g. '10.0.0.2 slots=1')",
                      o.hostfile));
    o.hostfile = fs::absolute(o.hostfile).string();
  } else if (arg == "--precision") {
    const std::string p = next();
    if (!valid_precision(p)) usage_error(precision_refusal("--precision " + p, p));
    o.bf16 = p == "bf16";
  } else if (arg == "--isa") {
    o.isa = next();
    if (!is_isa_level(o.isa))
      usage_error(fmt::format("--isa {}: no such level; valid: {}", o.isa, kIsaLevels));
    if (const std::string lacks = isa_level_missing(o.isa, proc_cpu_flags()); !lacks.empty())
      usage_error(isa_refusal("--isa " + o.isa, lacks));
  } else if (arg == "--repetitions")
    o.repetitions = parse_count(arg, next(), 1, 1000);
  else if (arg == "--jobs")
    o.jobs = parse_count(arg, next(), 1, 16);
  else if (arg == "--rounds")
    o.rounds = parse_count(arg, next(), 1, 100);
  else if (arg == "--warmup-steps")
    o.warmup_steps = parse_count(arg, next(), 0, 1000);
  else if (arg == "--min-time")
    o.min_time = parse_number(arg, next(), 0.001, 600);
  else if (arg == "--timeout")
    o.timeout = parse_number(arg, next(), 1, 86400);
  else if (arg == "--time-budget")
    o.time_budget = parse_number(arg, next(), 0.001, 86400);
  else if (arg == "--memory-limit") {
    const std::string text = next();
    const std::optional<int64_t> bytes = parse_bytes(text);
    if (!bytes || *bytes < (int64_t(64) << 20))
      usage_error(
          fmt::format("--memory-limit {}: expected a size from 64M, e.g. 8G or 512M", text));
    o.memory_limit = *bytes;
  } else if (arg == "--resume")
    o.resume = next();
  else if (arg == "--force")
    o.force = true;
  else if (arg == "--check-only")
    o.check_only = true;
  else if (arg == "--no-plots")
    o.plots = false;
  else if (arg == "--backends")
    *backends = next();
  else
    return false;
  return true;
}

inline Options parse_options(const std::vector<std::string>& args) {
  Options o;
  o.args = args;
  if (studies().empty()) usage_error("no studies registered (the program's main() sets them)");
  o.study = &studies().front();
  o.bin_dir = fs::read_symlink("/proc/self/exe").parent_path();
  std::string backends;
  const int argc = int(args.size());
  for (int i = 0; i < argc; i++) {
    std::string arg = args[i], value;
    const size_t eq = arg.find('=');
    const bool has_inline = arg.rfind("--", 0) == 0 && eq != std::string::npos;
    if (has_inline) value = arg.substr(eq + 1), arg = arg.substr(0, eq);
    auto next = [&]() -> std::string {
      if (has_inline) return value;
      if (i + 1 >= argc) usage_error(fmt::format("{} needs a value", arg));
      return args[++i];
    };
    if (arg == "--help" || arg == "-h") {
      std::string names, line;  // the registry's names, wrapped under the option's text
      for (const Study& study : studies()) {
        if (line.size() + study.name.size() > 70) names += line + "\n", line.clear();
        line += (line.empty() ? std::string(23, ' ') : " ") + std::string(study.name) +
                (&study == &studies().back() ? "" : ",");
      }
      fmt::print(fmt::runtime(kUsage), fmt::arg("studies", names + line));
      std::exit(0);
    }
    if (arg == "--list") {
      print_list();
      std::exit(0);
    }
    if (!apply_option(o, arg, next, &backends))
      usage_error(fmt::format("unknown option '{}'", args[i]));
  }
  if (!o.cache_dir.empty() && fs::exists(o.cache_dir) && !fs::is_directory(o.cache_dir))
    usage_error(
        fmt::format("--cache-dir {}: not a directory (the plan cache needs one)", o.cache_dir));
  if (o.cache_dir.empty() && std::find(args.begin(), args.end(), "--cache-dir") != args.end())
    usage_error("--cache-dir '': name a directory");
  // One that cannot be written is said here, on the console: each backend's own line goes to its
  // log. Plans already in it are still read (a shared cache may be read-only on purpose).
  if (!o.cache_dir.empty()) {
    std::error_code ec;
    fs::path dir = fs::absolute(o.cache_dir, ec);
    while (!dir.empty() && !fs::exists(dir, ec) && dir.has_parent_path() &&
           dir != dir.parent_path())
      dir = dir.parent_path();  // the directory the cache would be made in
    if (!dir.empty() && fs::is_directory(dir, ec) && access(dir.c_str(), W_OK | X_OK) != 0)
      fmt::print(stderr,
                 "warning: --cache-dir {}: {} cannot be written ({}): plans found there are used, "
                 "no new one is kept\n",
                 o.cache_dir, dir.string(), std::strerror(errno));
  }
  if (o.jobs > 1 && !o.check_only)
    usage_error(
        fmt::format("--jobs {}: only with --check-only (benchmarks run one at a time)", o.jobs));
  o.memory_limit /= o.jobs;  // so that the processes alive at once stay under it together
  if (o.isa.empty()) o.isa = default_isa_level(proc_cpu_flags());
  if (o.rounds == 0) o.rounds = std::min(2, o.repetitions);
  if (o.rounds > o.repetitions)
    usage_error(fmt::format("--rounds {}: at most --repetitions ({}): each round runs at least one",
                            o.rounds, o.repetitions));
  // --ranks alone is the study ranks.
  const bool study_given = std::find(args.begin(), args.end(), "--study") != args.end() ||
                           std::any_of(args.begin(), args.end(), [](const std::string& a) {
                             return a.starts_with("--study=");
                           });
  if (o.ranks && !study_given && backends.empty())
    if (const Study* ranks = find_study("ranks")) o.study = ranks;
  if (!o.ranks) o.ranks = 2;
  // The study's selection, where the run gives none of its own: every row but the variants at
  // threads, ranks or instruction sets of their own.
  if (backends.empty()) {
    backends = std::string(o.study->backends);
    if (backends.empty())
      for (const BackendSpec& b : backend_rows())
        if (!b.fixed_threads && !b.launcher && !b.isa)
          backends += (backends.empty() ? "" : ",") + std::string(b.name);
  }
  o.backends = parse_backends(backends);
  // Rows under load (the study contention's): the load beside their turns alone, one busy
  // process at nice 0 unless --background says otherwise.
  o.background_rows_only = std::any_of(o.backends.begin(), o.backends.end(),
                                       [](const std::string& b) { return spec_of(b).under_load; });
  if (o.background_rows_only && !o.background.any()) o.background = {1, 0};
  for (const std::string& b : o.backends)  // torchrun's rows start their ranks on one host
    if (const char* launcher = spec_of(b).launcher;
        launcher && std::string_view(launcher) == "torchrun" && !o.hostfile.empty())
      usage_error(
          fmt::format("--hostfile: {} runs under torchrun, on this host alone; leave it "
                      "out (--backends) or run without --hostfile",
                      b));
  for (const std::string& b : o.backends)  // a launcher that is not there: one line, before any row
    if (const char* launcher = spec_of(b).launcher; launcher && path_of(launcher).empty())
      usage_error(
          fmt::format("{}: {} is not installed (Debian package {}; make installs it "
                      "through harness/install-deps.sh)",
                      b, launcher, launcher_package(launcher)));
  if (o.workloads.empty()) o.workloads = std::string(o.study->workloads);
  o.given_sizes = o.sizes;
  for (const std::string& s : fields(std::string(o.study->sizes), ' ')) {
    const std::string key = s.substr(0, s.find('='));
    if (std::none_of(o.sizes.begin(), o.sizes.end(),
                     [&](const std::string& g) { return g.substr(0, g.find('=')) == key; }))
      o.sizes.push_back(s);
  }
  return o;
}

// --resume RUN: the interrupted run's own arguments (its run.json), then what may be added.
inline std::vector<std::string> resumed_args(const std::vector<std::string>& given,
                                             int result_format) {
  auto at = std::find(given.begin(), given.end(), "--resume");
  if (at == given.end()) return given;
  if (at + 1 == given.end() || (at + 1)->empty())
    usage_error("--resume needs a value: the folder of an interrupted run (results/<run-id>)");
  const fs::path run = *(at + 1);
  std::vector<std::string> extra;
  for (auto i = given.begin(); i != given.end(); i++) {
    if (i == at) {
      i++;
      continue;
    }
    if (*i != "--no-plots" && *i != "--force" && *i != "--bin-dir")
      usage_error(
          fmt::format("--resume takes the options of the run it resumes; '{}' cannot be "
                      "added (only --no-plots, --bin-dir DIR and --force)",
                      *i));
    extra.push_back(*i);
    if (*i == "--bin-dir" && i + 1 != given.end()) extra.push_back(*++i);
  }
  std::string error;
  if (!RunFolder::reopen(run, &error)) usage_error(error);
  std::vector<std::string> args;
  try {
    const Json saved_json = parse_json(read_file(run / "run.json"));
    const JsonView saved = saved_json;
    if (saved["format_version"].num_or(0) != result_format)
      usage_error(
          fmt::format("--resume {}: written by another version of bench_run (result "
                      "format {}, this one reads {})",
                      run.string(), saved["format_version"].num_or(0), result_format));
    for (JsonView a : saved["args"].elements()) args.push_back(a.str_or(""));
  } catch (const std::exception& e) {
    usage_error(fmt::format("--resume {}: run.json unreadable: {}", run.string(), e.what()));
  }
  args.insert(args.end(), extra.begin(), extra.end());
  args.push_back("--resume");
  args.push_back(run.string());
  return args;
}

}  // namespace bp
