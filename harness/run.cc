// harness/run.cc: bench_run, the one runner over every backend.
//
// It (1) expands the selection (--workloads, --sizes, --filter) over the workload registry,
// validates it and names every benchmark (harness/selection.h), without asking any backend what
// exists; (2) runs the correctness check, one process per backend told exactly which instances to
// check (harness/protocol.h), and has harness/judge.h decide who agrees; (3) runs each benchmark
// that passed in a fresh process, so that the parent's wait4 peak RSS is that benchmark's alone,
// with a timeout; (4) writes the summary (harness/results.h) and draws the plots (plots/plot.py).
// What it writes under <out>/<run-id>/ is in README.md ("What a run writes"); every file is
// written as soon as its numbers exist, so an interrupted run keeps what it measured.
//
//   build/bench_run --filter small_graph --repetitions 3      # `build/bench_run --help` for all
#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "harness/compare.h"
#include "harness/environment.h"
#include "harness/files.h"
#include "harness/json.h"
#include "harness/judge.h"
#include "harness/memory.h"
#include "harness/names.h"
#include "harness/proc.h"
#include "harness/process.h"
#include "harness/protocol.h"
#include "harness/results.h"
#include "harness/selection.h"
#include "harness/text.h"
#include "workloads/data.h"
#include "workloads/registry.h"

namespace fs = std::filesystem;

namespace bp {
namespace {

// The backends the runner knows, in the fixed order that decides the reference (the first one
// selected) and the columns of every table: name, program (a binary in the build folder, or a
// script in the source tree when it has a '/'), the flags that select its mode (space-separated),
// whether --threads applies to it, the workloads a variant is measured on (comma-separated; null:
// every workload), and whether it writes checkpoint files (it is told the run's folder for them).
// compiled_budget is the compiled mode planned under half its own peak (engine/program.h,
// rematerialisation), on the workload whose memory it is for; compiled_first_step times a cold
// start per iteration (setup, capture, kernel choice by auto, planning, the first step). The
// recurrent workloads' strategies of going back through time (engine/checkpoint.h) are variants
// too: our engine's Revolve and multistage checkpointing with 8 snapshots, libtorch's segment
// recomputation and PyTorch's torch.utils.checkpoint over about sqrt(n) segments.
struct BackendSpec {
  const char* name;
  const char* program;
  const char* mode_flags;
  bool threaded;
  const char* only_workloads = nullptr;
  bool checkpoints = false;
  // "key=N": of the workloads sized by key, this backend runs the default sizes up to N and
  // reports the larger ones skipped (sizes given with --sizes all run). The torch backends take
  // 1 to 2 s a sequence of 10^4 steps (ten times our engine): at 10^5 their checks and
  // repetitions alone would be several minutes of the default run. The compiled mode plans the
  // whole unrolled sequence as one program: at 10^5 steps, 7 s of compiling and 2.7 GB at its
  // peak (Zen 4), for every process of its checks and repetitions.
  const char* default_sizes_up_to = nullptr;
};
constexpr const char* kRecurrent = "char_rnn,char_rnn_wide";
constexpr const char* kLengthsUpTo10k = "length=10000";
const BackendSpec kBackends[] = {
    {"engine", "bench_engine", nullptr, false},
    {"engine_revolve", "bench_engine", "--strategy=revolve --snapshots=8", false, kRecurrent},
    {"engine_multistage", "bench_engine", "--strategy=multistage --snapshots=8", false, kRecurrent,
     true},
    {"compiled", "bench_compiled", nullptr, false, nullptr, false, kLengthsUpTo10k},
    {"compiled_budget", "bench_compiled", "--memory_budget=0.5", false, "mini_gpt_wide"},
    {"compiled_first_step", "bench_compiled", "--time_first_step", false, nullptr, false,
     kLengthsUpTo10k},
    {"libtorch", "bench_libtorch", nullptr, true, nullptr, false, kLengthsUpTo10k},
    {"libtorch_segments", "bench_libtorch", "--strategy=segments", true, kRecurrent, false,
     kLengthsUpTo10k},
    {"pytorch", "baselines/pytorch_bench.py", "--mode=pytorch", true, nullptr, false,
     kLengthsUpTo10k},
    {"pytorch_checkpoint", "baselines/pytorch_bench.py", "--mode=checkpoint", true, kRecurrent,
     false, kLengthsUpTo10k},
    {"torchscript", "baselines/pytorch_bench.py", "--mode=torchscript", true, nullptr, false,
     kLengthsUpTo10k},
};

const BackendSpec& spec_of(const std::string& name) {
  for (const BackendSpec& b : kBackends)
    if (name == b.name) return b;
  std::abort();  // names come from kBackends
}

// Why `backend` leaves out the default size `size` of `w` ("" if it runs it): default_sizes_up_to.
std::string default_size_skipped(const std::string& backend, const WorkloadInfo& w, int64_t size) {
  const char* up_to = spec_of(backend).default_sizes_up_to;
  if (!up_to || !w.sizes.sized()) return "";
  const std::vector<std::string> kv = fields(up_to, '=');
  if (kv[0] != w.sizes.key || size <= std::stoll(kv[1])) return "";
  return fmt::format(
      "not in the default sweep, which runs {} up to {}={}; --sizes {}=...,{} runs it", backend,
      kv[0], kv[1], kv[0], size);
}

const char* kUsage = R"(usage: bench_run [options]
  --out DIR            results folder (default: results); the run goes to DIR/<run-id>/ and
                       DIR/latest points at it
  --backends A,B       backends to run, in any order (default: all: engine,engine_revolve,
                       engine_multistage,compiled,compiled_budget,compiled_first_step,libtorch,
                       libtorch_segments,pytorch,pytorch_checkpoint,torchscript); tables and the
                       reference follow that fixed order; compiled_budget (the compiled mode
                       under a memory budget of half its peak) runs mini_gpt_wide only;
                       compiled_first_step is the time to a cold first step, not a step; the
                       strategies of going back through time (engine_revolve,
                       engine_multistage, libtorch_segments, pytorch_checkpoint) run the
                       recurrent workloads (char_rnn, char_rnn_wide) only
  --workloads A,B      run only these workloads (default: all)
  --sizes KEY=N,...    replace the default sizes of the workloads sized by KEY (e.g. nodes=10,5000);
                       repeat it for other keys (--sizes nodes=10 --sizes batch=1,8); of the
                       default lengths (length=100,...,100000), the torch backends run those
                       up to 10000 and report the longer ones skipped; given ones all run
  --filter REGEX       run only benchmarks whose names match (POSIX extended regex, as Google
                       Benchmark's --benchmark_filter; a leading '-' negates)
  --threads N          intra-op threads for threaded backends (default 1)
  --checkpoint-dir DIR where engine_multistage writes its checkpoint files, each unlinked as soon
                       as it is open (default: the run's folder); a missing or unwritable one
                       fails that backend's benchmarks with one line, and the rest run
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
                       one whose step, as its check timed it, is too long for that gets fewer
                       repetitions (at least 3), two warm-up steps and one round, and says so
  --timeout S          seconds before a backend process is killed (default 600)
  --memory-limit SIZE  address space of each backend process, e.g. 8G or 512M (default: 90% of
                       the memory available when the run starts); beyond it an allocation is
                       refused and the benchmark reported as out of memory at that size. A size
                       beyond a workload's defaults is first estimated on each backend from
                       three smaller ones: above the limit, it is not run and is reported out
                       of memory with its estimate
  --force              no memory estimate: every size runs, capped by --memory-limit
  --check-only         run the correctness check only; exit 1 if any backend disagrees
  --jobs N             with --check-only: check N backends at once, each process under 1/N of
                       the memory limit (default 1)
  --no-plots           do not draw the plots (plots/plot.py) at the end
  --bin-dir DIR        where the backend binaries are (default: next to bench_run)
  --resume RUN         finish an interrupted run (its folder, e.g. results/<run-id>) with its own
                       options: only the rows with a benchmark missing or failed run again, and
                       the summary is that of an uninterrupted run; with it only --no-plots,
                       --bin-dir and --force (a different commit or processor) may be given
bench_run compare A B compares two runs (bench_run compare --help).
Ctrl-C or SIGTERM stops the benchmarks at once, writes the summary of what finished, leaves the
run marked INCOMPLETE and says how to resume it.
Exit status: 0 all ran and agreed; 1 check-only found disagreement; 2 bad input; 3 some
benchmark failed, timed out or was not run because its backend failed the check; 4 a result
file could not be written (a full disk): the run stopped, every file keeps its last good copy;
130 (143) interrupted by SIGINT (SIGTERM).
)";

[[noreturn]] void usage_error(const std::string& what) {
  std::fflush(stdout);  // what was said before comes before the error
  fmt::print(stderr, "error: {}\n(bench_run --help lists the options)\n", what);
  std::exit(2);
}

// 90% of MemAvailable: what the machine can give a process without swapping, less a margin for
// the runner and the system.
int64_t default_memory_limit() {
  const int64_t available = proc_meminfo_bytes("MemAvailable");
  return available > 0 ? available / 10 * 9 : 0;
}

// "8G", "512M", "1500000000": bytes.
std::optional<int64_t> parse_bytes(std::string text) {
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
  std::vector<std::string> backends;  // in kBackends order
  std::string filter, workloads, data = kDefaultCorpus;
  std::string checkpoint_dir;  // engine_multistage's checkpoint files; empty: the run's folder
  std::vector<std::string> sizes;
  // 10 repetitions: the median's interval is then the 2nd to the 9th of them at 97.9%, and a
  // ratio's the 2nd to 9th of its 10 pairs; 0.1 s each keeps the timed second of 5 x 0.2 s.
  // 2 rounds: each benchmark's repetitions come from two processes, minutes apart (bench());
  // 0 until given: then 2, or 1 for a single repetition.
  int threads = 1, repetitions = 10, warmup_steps = 3, rounds = 0;
  int jobs = 1;  // --check-only: check processes at once, the memory limit shared among them
  double min_time = 0.1, timeout = 600;
  double time_budget = 10;  // seconds a benchmark aims at over all its rounds (Run::plan_of)
  int64_t memory_limit = default_memory_limit();
  bool check_only = false, plots = true, force = false;
  fs::path resume;                // --resume: the interrupted run to finish
  std::vector<std::string> args;  // as given (an interrupted run's own, when resuming)
};

double parse_number(const std::string& flag, const std::string& text, double lo, double hi) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !(v >= lo && v <= hi))
    usage_error(fmt::format("{} {}: expected a number from {} to {}", flag, text, lo, hi));
  return v;
}

// A count: a whole number, so that 1.9 is refused rather than taken as 1.
int parse_count(const std::string& flag, const std::string& text, int lo, int hi) {
  const std::optional<int64_t> v = parse_whole(text);
  if (!v || *v < lo || *v > hi)
    usage_error(fmt::format("{} {}: expected a whole number from {} to {}", flag, text, lo, hi));
  return int(*v);
}

Options parse_options(const std::vector<std::string>& args) {
  Options o;
  o.args = args;
  o.bin_dir = fs::read_symlink("/proc/self/exe").parent_path();
  std::vector<std::string> backends;
  for (const BackendSpec& b : kBackends) backends.push_back(b.name);
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
      fmt::print("{}", kUsage);
      std::exit(0);
    } else if (arg == "--out")
      o.out = next();
    else if (arg == "--bin-dir")
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
    else if (arg == "--threads")
      o.threads = parse_count(arg, next(), 1, 256);
    else if (arg == "--repetitions")
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
    } else if (arg == "--resume") {
      o.resume = next();
    } else if (arg == "--force")
      o.force = true;
    else if (arg == "--check-only")
      o.check_only = true;
    else if (arg == "--no-plots")
      o.plots = false;
    else if (arg == "--backends") {
      backends = fields(next(), ',');
      std::vector<std::string> valid;
      for (const BackendSpec& b : kBackends) valid.push_back(b.name);
      for (const std::string& b : backends)
        if (std::find(valid.begin(), valid.end(), b) == valid.end())
          usage_error(fmt::format("unknown backend '{}'; valid: {}", b, fmt::join(valid, ", ")));
      if (backends.empty()) usage_error("--backends: name at least one backend");
    } else {
      usage_error(fmt::format("unknown option '{}'", args[i]));
    }
  }
  if (o.jobs > 1 && !o.check_only)
    usage_error(
        fmt::format("--jobs {}: only with --check-only (benchmarks run one at a time)", o.jobs));
  o.memory_limit /= o.jobs;  // so that the processes alive at once stay under it together
  if (o.rounds == 0) o.rounds = std::min(2, o.repetitions);
  if (o.rounds > o.repetitions)
    usage_error(fmt::format("--rounds {}: at most --repetitions ({}): each round runs at least one",
                            o.rounds, o.repetitions));
  for (const BackendSpec& b : kBackends)  // the fixed order, whatever order they were given in
    if (std::find(backends.begin(), backends.end(), b.name) != backends.end())
      o.backends.push_back(b.name);
  return o;
}

int threads_of(const Options& o, const std::string& backend) {
  return spec_of(backend).threaded ? o.threads : 1;
}

// ---- the run ----

std::string file_stem(const std::string& bench_name) {
  std::string s;
  for (char c : bench_name) s += c == '/' ? std::string("__") : c == ':' ? "-" : std::string(1, c);
  return s;
}

// A check file's records by benchmark name. A check process that died mid-way leaves a file cut
// short; its records are one per line, so every complete one is still read.
std::map<std::string, Json> read_check_records(const fs::path& path) {
  std::map<std::string, Json> out;
  const std::string text = read_file(path);
  try {
    const Json doc = parse_json(text);
    for (const Json& r : doc["records"].array) out[r["name"].str_or("")] = r;
    return out;
  } catch (const std::exception&) {
  }
  for (std::string line : split(text, '\n')) {  // "  {record}," per line
    while (!line.empty() && line[0] == ' ') line.erase(0, 1);
    while (!line.empty() && line.back() == ',') line.pop_back();
    if (line.rfind("{\"name\"", 0) != 0) continue;
    try {
      Json r = parse_json(line);
      out[r["name"].str_or("")] = r;
    } catch (const std::exception&) {
    }
  }
  return out;
}

// The longest sequence the interval sweep (Run::intervals) runs: a dozen processes of 5 steps.
constexpr int64_t kIntervalSweepLength = 10000;

class Run {
 public:
  Run(Options o, std::vector<Selected> selected)
      : opt_(std::move(o)), selected_(std::move(selected)) {
    for (const Selected& s : selected_)
      for (const auto& [b, why] : s.skipped) decide_not_to_run(s, b, "skipped", why);
  }

  int main() {
    for (const std::string& b : opt_.backends)
      if (!fs::exists(program(b)))
        usage_error(fmt::format("{} not found; build first (make)", program(b)));
    start_ = std::time(nullptr);
    load_start_ = load_average_1min();
    for (const auto& [key, value] : proc_environment()) environment_.set(key, value);
    git_sha_ = capture_output({"git", "-C", BP_SOURCE_DIR, "rev-parse", "--short", "HEAD"});
    if (git_sha_.empty())
      git_sha_ = "nogit";
    else if (!capture_output(
                  {"git", "-C", BP_SOURCE_DIR, "status", "--porcelain", "--untracked-files=no"})
                  .empty())
      git_sha_ += "-dirty";
    if (opt_.resume.empty()) {
      estimate_memory();
      if (g_interrupted) {  // while estimating: no run folder yet, nothing measured
        fmt::print(stderr, "interrupted ({}) before anything ran\n", strsignal(g_interrupted));
        return 128 + g_interrupted;
      }
      char host[256] = "host";
      gethostname(host, sizeof host - 1);
      char stamp[32];
      std::strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", std::gmtime(&start_));
      std::string error;
      std::optional<RunFolder> folder =
          RunFolder::create(opt_.out, fmt::format("{}-{}-{}", stamp, host, git_sha_), &error);
      if (!folder) usage_error(error);
      folder_ = std::move(*folder);
      Json args = Json::array_of();
      for (const std::string& a : opt_.args) args.push(a);
      write_atomically(folder_.dir() / "run.json",
                       Json::object_of({{"format_version", kResultFormat},
                                        {"args", std::move(args)},
                                        {"git_sha", git_sha_},
                                        {"environment", environment_}})
                               .dump(2, 2) +
                           "\n");
      fmt::print("run {}\n  writing to {}\n", folder_.id(), folder_.dir().string());
    } else {
      reopen();
    }
    note_other_benchmarks();

    const bool all_agree = check();
    if (g_interrupted) return stopped();
    if (opt_.check_only) {
      folder_.finished();
      return all_agree ? 0 : 1;
    }
    bench();
    if (!g_interrupted) kernels();
    if (!g_interrupted) intervals();
    summarize();
    if (g_interrupted) return stopped();
    folder_.finished();
    folder_.point_latest_here();
    if (opt_.plots) plot();
    return failures_ ? 3 : 0;
  }

 private:
  std::string program(const std::string& backend) const {
    const std::string p = spec_of(backend).program;
    if (p.find('/') != std::string::npos) return std::string(BP_SOURCE_DIR "/") + p;
    return (opt_.bin_dir / p).string();
  }
  // The command line of a backend process, without its instances and mode-specific flags.
  // Checkpoints go to --checkpoint-dir, or else to `folder` (default: the run's folder; the
  // memory probes, which run before that folder exists, give their scratch folder).
  std::vector<std::string> command(const std::string& backend, bool reads_corpus,
                                   const std::string& folder = {}) const {
    std::vector<std::string> argv = {program(backend)};
    const BackendSpec& spec = spec_of(backend);
    if (spec.mode_flags)
      for (const std::string& flag : fields(spec.mode_flags, ' ')) argv.push_back(flag);
    // A variant of a C++ backend (one binary, other flags) says its own name in its results.
    if (spec.mode_flags && !std::strchr(spec.program, '/'))
      argv.push_back(fmt::format("--backend_name={}", backend));
    if (spec.checkpoints) {
      const std::string fallback = folder.empty() ? folder_.dir().string() : folder;
      argv.push_back("--checkpoint_dir=" +
                     (opt_.checkpoint_dir.empty() ? fallback : opt_.checkpoint_dir));
    }
    if (spec_of(backend).threaded) argv.push_back(fmt::format("--threads={}", opt_.threads));
    if (reads_corpus) argv.push_back("--data=" + opt_.data);
    return argv;
  }
  std::string instance_arg(const Selected& s, const std::string& backend) const {
    return instance_flag({.workload = std::string(s.workload->name),
                          .size = s.workload->sizes.sized() ? std::optional(s.size) : std::nullopt,
                          .name = s.names.at(backend),
                          .check_steps = s.workload->check_steps_at(s.size)});
  }
  // Thread counts are each backend's own business (--threads): bench_libtorch sets OpenBLAS's,
  // pytorch_bench.py its environment before importing torch.
  // The environment (harness/proc.h) goes to the Python backend, which has no reader of its own.
  // The compiled mode's kernel verdicts (engine/dialects.h) are shared through the run folder:
  // measured once, by the first process that meets a shape (the check's).
  std::vector<std::string> child_env() const {
    return {"BACKPROP_BENCH_GIT_SHA=" + git_sha_,
            "BACKPROP_BENCH_ENVIRONMENT=" + environment_.dump(),
            "BACKPROP_BENCH_DIALECT_VERDICTS=" + (folder_.dir() / "dialect_verdicts.txt").string()};
  }

  // A benchmark the runner does not run: its record, in place of the check's, says why (status
  // skipped, or out_of_memory for an estimate above the limit), and the judge, the bench phase
  // and the summary take it as they take a backend's own.
  void decide_not_to_run(const Selected& s, const std::string& b, const std::string& status,
                         const std::string& why) {
    not_run_[s.id][b] =
        Json::object_of({{"name", s.names.at(b)}, {"status", status}, {"message", why}});
  }
  const Json* not_run(const Selected& s, const std::string& b) const {
    auto i = not_run_.find(s.id);
    if (i == not_run_.end()) return nullptr;
    auto r = i->second.find(b);
    return r == i->second.end() ? nullptr : &r->second;
  }
  void add_not_run(const std::string& b, std::map<std::string, Json>& records) const {
    for (const Selected& s : selected_)
      if (s.names.count(b))
        if (const Json* r = not_run(s, b)) records[s.names.at(b)] = *r;
  }

  // Sizes beyond the defaults (harness/memory.h): each backend measured at three smaller sizes
  // in a scratch folder, the need extrapolated; a benchmark that would not fit under the memory
  // limit is not run and is reported out of memory at its size, with the estimate, and the rest
  // of the run goes on. --force skips the estimate: everything runs, each process capped by the
  // limit, and what does not fit is out of memory as measured.
  void estimate_memory() {
    if (opt_.force) return;
    std::map<std::pair<std::string_view, std::string>, std::vector<MemorySample>> measured;
    std::string scratch;
    for (const Selected& s : selected_) {
      const std::vector<int64_t> sizes = probe_sizes(*s.workload, s.size);
      if (sizes.empty()) continue;
      for (const auto& [b, name] : s.names) {
        std::vector<MemorySample>& got = measured[{s.workload->name, b}];
        if (got.empty()) {
          if (scratch.empty()) {
            char folder[] = "/tmp/bench_run.memory.XXXXXX";
            if (!mkdtemp(folder)) throw WriteError("/tmp", errno);
            scratch = folder;
          }
          for (int64_t size : sizes) {
            std::vector<std::string> argv = command(b, s.workload->corpus.context > 0, scratch);
            argv.push_back("--check_out=" + scratch + "/probe.json");
            argv.push_back(instance_flag({.workload = std::string(s.workload->name),
                                          .size = size,
                                          .name = "probe",
                                          .check_steps = s.workload->model ? 1 : 0}));
            const ProcessResult p = run_process(argv, scratch + "/probe.log", opt_.timeout,
                                                child_env(), opt_.memory_limit);
            if (!p.ok()) {  // what could not be measured is not refused: the cap still holds
              fmt::print("memory estimate: {} on {}: none, its run at {}={} {}\n", s.id, b,
                         s.workload->sizes.key, size, p.failure());
              break;
            }
            got.push_back({size, double(p.max_rss_bytes)});
          }
        }
        if (got.size() < sizes.size()) continue;
        const double need = extrapolate_bytes(got, s.size);
        std::vector<std::string> from;
        for (const MemorySample& m : got) from.push_back(human_bytes(m.bytes));
        const std::string line =
            fmt::format("{} on {}: about {} (peak RSS {} at {}={})", s.id, b, human_bytes(need),
                        fmt::join(from, ", "), s.workload->sizes.key, fmt::join(sizes, ", "));
        const bool too_big = opt_.memory_limit > 0 && need > double(opt_.memory_limit);
        fmt::print("memory estimate: {}{}\n", line, too_big ? ": above the limit, not run" : "");
        estimates_.push(Json::object_of({{"instance", s.id},
                                         {"backend", b},
                                         {"bytes", need},
                                         {"how", line},
                                         {"not_run", too_big}}));
        if (too_big) not_run_for_memory(s, b, line);
      }
    }
    if (!scratch.empty()) fs::remove_all(scratch);
  }
  void not_run_for_memory(const Selected& s, const std::string& b, const std::string& estimate) {
    decide_not_to_run(
        s, b, "out_of_memory",
        fmt::format("not run: estimated above the limit of {} ({}); --force runs it, capped",
                    human_bytes(double(opt_.memory_limit)), estimate));
  }

  // --resume: the interrupted run's folder, on the commit and processor it was made with
  // (unless --force), with what it already finished: its processes, so that a row whose
  // benchmarks all ended well is not run again (bench_row).
  void reopen() {
    std::string error;
    std::optional<RunFolder> folder = RunFolder::reopen(opt_.resume, &error);
    if (!folder) usage_error(error);
    folder_ = std::move(*folder);
    const Json run = parse_json(read_file(folder_.dir() / "run.json"));
    std::vector<std::string> differences;
    if (run["git_sha"].str_or("?") != git_sha_)
      differences.push_back(
          fmt::format("git_sha: {} then, {} now", run["git_sha"].str_or("?"), git_sha_));
    for (const std::string& d : performance_differences(run["environment"], environment_))
      differences.push_back(d);
    if (!differences.empty() && !opt_.force)
      usage_error(fmt::format(
          "--resume {}: this run was made on another commit or machine ({}); its numbers and "
          "new ones would not be comparable: add --force to resume anyway",
          opt_.resume.string(), fmt::join(differences, "; ")));
    try {
      const Json old = parse_json(read_file(folder_.dir() / "processes.json"));
      for (const Json& e : old["memory_estimates"].array) {  // as decided then
        estimates_.push(e);
        if (e["not_run"].boolean)
          for (const Selected& s : selected_)
            if (s.id == e["instance"].str_or("") && s.names.count(e["backend"].str_or("")))
              not_run_for_memory(s, e["backend"].str_or(""), e["how"].str_or(""));
      }
      for (const Json& p : old["processes"].array) {
        processes_.push(p);
        if (p["phase"].str_or("") == "bench")
          finished_[round_key(p["benchmark"].str_or(""), int(p["round"].num_or(1)) - 1)] = p;
      }
    } catch (const std::exception&) {  // interrupted before its first process: nothing finished
    }
    fmt::print("run {} resumed\n  writing to {}\n", folder_.id(), folder_.dir().string());
  }

  // Interrupted (Ctrl-C, SIGTERM): what finished is written (summary included, with the rest
  // marked interrupted), the run stays marked INCOMPLETE, latest stays where it was.
  int stopped() {
    int finished = 0, total = 0;
    for (const Selected& s : selected_)
      for (const auto& [b, name] : s.names) {
        total++;
        auto c = cells_[s.id].find(b);
        finished += c != cells_[s.id].end() && c->second.status != "interrupted";
      }
    const std::string how =
        fmt::format("make bench RESUME={} (or {} --resume {})", folder_.dir().string(),
                    program_path("bench_run"), folder_.dir().string());
    write_atomically(folder_.dir() / "INCOMPLETE",
                     fmt::format("interrupted by {} with {} of {} benchmarks finished; resume "
                                 "with: {}\n",
                                 strsignal(g_interrupted), finished, total, how));
    std::fflush(stdout);
    fmt::print(stderr,
               "\ninterrupted ({}): {} of {} benchmarks finished, written to {}; the run is "
               "marked INCOMPLETE; resume it with: {}\n",
               strsignal(g_interrupted), finished, total, folder_.dir().string(), how);
    return 128 + g_interrupted;
  }
  static std::string round_key(const std::string& benchmark, int round) {
    return benchmark + "#" + std::to_string(round);
  }
  std::string program_path(const std::string& name) const { return (opt_.bin_dir / name).string(); }

  // Bad input found after the run folder was made (a backend refusing its flags): nothing was
  // measured, so nothing is left behind.
  [[noreturn]] void refuse(const std::string& what) {
    folder_.remove();
    usage_error(what);
  }

  // Another benchmark on the machine makes this run's timings incomparable: say so, once, and
  // in the results.
  void note_other_benchmarks() {
    for (const std::string& other : proc_other_benchmarks(getpid()))
      if (std::find(others_.begin(), others_.end(), other) == others_.end()) {
        others_.push_back(other);
        fmt::print(stderr, "warning: another benchmark is running on this machine ({})\n", other);
      }
  }

  // processes.json: every process so far, rewritten after each one.
  void add_process(Json record) {
    processes_.push(std::move(record));
    char started[32];
    std::strftime(started, sizeof started, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&start_));
    const Json doc = Json::object_of({{"run_id", folder_.id()},
                                      {"git_sha", git_sha_},
                                      {"started_utc", started},
                                      {"options", run_options_json()},
                                      {"memory_estimates", estimates_},
                                      {"processes", processes_}});
    write_atomically(folder_.dir() / "processes.json", doc.dump(2, 2) + "\n");
  }
  // The options a number depends on, as the run used them.
  Json run_options_json() const {
    Json options = Json::object_of({{"filter", opt_.filter},
                                    {"workloads", opt_.workloads},
                                    {"data", opt_.data},
                                    {"threads", opt_.threads},
                                    {"repetitions", opt_.repetitions},
                                    {"rounds", opt_.rounds},
                                    {"min_time", opt_.min_time},
                                    {"warmup_steps", opt_.warmup_steps},
                                    {"time_budget", opt_.time_budget},
                                    {"memory_limit_bytes", opt_.memory_limit},
                                    {"timeout", opt_.timeout}});
    Json backends = Json::array_of(), sizes = Json::array_of();
    for (const std::string& b : opt_.backends) backends.push(b);
    for (const std::string& s : opt_.sizes) sizes.push(s);
    options.set("backends", std::move(backends)).set("sizes", std::move(sizes));
    return options;
  }
  Json process_json(const std::string& backend, const std::string& phase,
                    const std::string& benchmark, const std::string& file, const std::string& log,
                    const std::string& status, const std::string& message,
                    const ProcessResult& p) const {
    return Json::object_of({{"backend", backend},
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

  // One check process per backend, told exactly its selected instances (--jobs of them at once
  // with --check-only, one after another otherwise: a step the check times decides how the
  // benchmark runs); then the judge, per instance over every selected backend. Returns true if
  // every backend agreed everywhere.
  bool check() {
    std::map<std::string, std::map<std::string, Json>> records;  // backend -> name -> record
    std::map<std::string, std::string> died;                     // backend -> how its check ended
    struct Job {
      std::string backend, file, log;
      std::vector<std::string> argv;
      size_t count = 0, decided = 0;  // instances it checks; the runner's own records
    };
    std::vector<Job> jobs;
    for (const std::string& b : opt_.backends) {
      Job job{b, "check/" + b + ".json", "logs/" + b + ".check.log", {}};
      bool reads_corpus = false;
      for (const Selected& s : selected_)
        reads_corpus |= s.names.count(b) && s.workload->corpus.context;
      job.argv = command(b, reads_corpus);
      job.argv.push_back("--check_out=" + (folder_.dir() / job.file).string());
      for (const Selected& s : selected_) {
        if (!s.names.count(b)) continue;
        if (not_run(s, b))  // the runner's own record stands for it (add_not_run)
          job.decided++;
        else
          job.argv.push_back(instance_arg(s, b)), job.count++;
      }
      if (job.count == 0) {  // the filter kept none of its benchmarks, or none is run: no process
        add_not_run(b, records[b]);
        fmt::print(
            "check {:<11} {}\n", b,
            job.decided ? fmt::format("{} instances not run", job.decided) : "nothing selected");
        continue;
      }
      if (!opt_.resume.empty()) {  // a check that reported every instance is not run again
        records[b] = read_check_records(folder_.dir() / job.file);
        size_t reported = 0;
        for (const Selected& s : selected_)
          reported += s.names.count(b) && records[b].count(s.names.at(b));
        if (reported == job.count) {
          fmt::print("check {:<11} {} of {} instances reported by the interrupted run\n", b,
                     reported, job.count);
          add_not_run(b, records[b]);
          continue;
        }
      }
      jobs.push_back(std::move(job));
    }

    // One at a time, a line says which backend is being checked while it runs.
    const bool one_at_a_time = opt_.jobs == 1;
    // What a check process that ended says; false: the run was interrupted.
    auto ended = [&](const Job& job, const ProcessResult& p) {
      if (p.interrupted) return false;
      const std::string& b = job.backend;
      records[b] = read_check_records(folder_.dir() / job.file);
      add_not_run(b, records[b]);
      std::string status = "ok", message;
      if (!p.ok()) {
        status = "failed", message = p.failure() + " (see " + job.log + ")";
        died[b] = "its check process " + message;
        if (p.exit_code == 2) {  // a flag it refused: one line, as for the runner's own
          if (one_at_a_time) fmt::print("\n");
          const std::vector<std::string> lines = fields(read_file(folder_.dir() / job.log), '\n');
          refuse(fmt::format("{} refused its flags: {}", b, lines.size() > 1 ? lines[1] : "?"));
        }
      }
      if (!one_at_a_time) fmt::print("check {:<11} ", b);
      fmt::print("{} of {} instances reported in {:.1f} s{}{}\n", records[b].size() - job.decided,
                 job.count, p.wall_seconds, p.ok() ? "" : "; " + message,
                 job.decided ? fmt::format(" ({} not run)", job.decided) : "");
      std::fflush(stdout);
      add_process(process_json(b, "check", "", job.file, job.log, status, message, p));
      return true;
    };
    // At most opt_.jobs alive, started in --backends order; each reported as it ends.
    std::vector<std::pair<const Job*, std::unique_ptr<Child>>> alive;
    size_t next = 0;
    while (next < jobs.size() || !alive.empty()) {
      while (next < jobs.size() && alive.size() < size_t(opt_.jobs) && !g_interrupted) {
        const Job& job = jobs[next++];
        if (one_at_a_time) fmt::print("check {:<11} ", job.backend), std::fflush(stdout);
        note_other_benchmarks();
        alive.emplace_back(&job,
                           std::make_unique<Child>(job.argv, (folder_.dir() / job.log).string(),
                                                   opt_.timeout, child_env(), opt_.memory_limit));
      }
      if (g_interrupted && alive.empty()) return false;
      bool any = false;
      for (size_t i = 0; i < alive.size(); i++) {
        if (!alive[i].second->ended()) continue;
        const auto [job, child] = std::move(alive[i]);
        alive.erase(alive.begin() + i--);
        any = true;
        if (!ended(*job, child->finish())) return false;
      }
      if (!any) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }

    Json results = Json::array_of();
    std::map<std::string, std::vector<std::string>> problems;        // backend -> lines
    std::map<std::string, std::pair<Verdict, std::string>> closest;  // backend -> nearest its
                                                                     // tolerance, and where
    std::map<std::string, int> ok_count, unverified_count;
    for (const Selected& s : selected_) {
      std::vector<BackendRecord> in;
      for (const std::string& b : opt_.backends) {
        if (!s.names.count(b)) continue;
        auto r = records[b].find(s.names.at(b));
        in.push_back({b, r == records[b].end() ? nullptr : &r->second,
                      died.count(b) ? died[b] + " before reporting it" : "not reported"});
      }
      PlainAnswer plain;  // scalar graphs: the answer without autodiff
      const bool has_plain = plain_answer(*s.workload, s.size, &plain);
      WorkloadInfo checked = *s.workload;  // with the check steps of this size
      checked.check_steps = checked.check_steps_at(s.size);
      for (const Verdict& v : judge_instance(checked, in, has_plain ? &plain : nullptr)) {
        verdicts_[s.id][v.backend] = v;
        if (v.status == "unverified") {
          unverified_count[v.backend]++;
        } else if (v.status == "ok") {
          ok_count[v.backend]++;
          auto& [c, at] = closest[v.backend];
          if (!v.is_reference &&
              (c.worst_at.empty() || v.max_rel_diff / v.tolerance > c.max_rel_diff / c.tolerance))
            c = v, at = s.id;
        } else if (v.status != "skipped") {
          problems[v.backend].push_back(fmt::format("{}: {}: {}", s.id, v.status, v.message));
        }
        results.push(Json::object_of({{"instance", s.id},
                                      {"backend", v.backend},
                                      {"status", v.status},
                                      {"message", v.message},
                                      {"is_reference", v.is_reference},
                                      {"reference", v.reference},
                                      {"confirmed_by", v.confirmed_by},
                                      {"max_rel_diff", v.max_rel_diff},
                                      {"at", v.worst_at},
                                      {"tolerance", v.tolerance}}));
        if (v.status == "ok" || v.status == "unverified") {
          const Json& record = records[v.backend][s.names.at(v.backend)];
          step_seconds_[s.id][v.backend] = record["step_seconds"].num_or(NAN);
          if (s.workload->model)
            for (const Json& l : record["losses"].array)
              losses_[s.id][v.backend].push_back(l.num_or(NAN));
        }
      }
    }
    write_atomically(folder_.dir() / "check.json",
                     Json::object_of({{"results", results}}).dump(2, 2) + "\n");
    bool all_agree = true;
    for (const std::string& b : opt_.backends) {
      const auto& [c, at] = closest[b];
      std::string line = fmt::format("check {:<11} {} instances agree", b, ok_count[b]);
      if (unverified_count[b])
        line += fmt::format("; {} unverified (nothing to compare with)", unverified_count[b]);
      if (!c.worst_at.empty())
        line += fmt::format("; closest to its tolerance: {:.2e} (tolerance {:.0e}) vs {} at {} {}",
                            c.max_rel_diff, c.tolerance, c.reference, at, c.worst_at);
      fmt::print("{}{}\n", line,
                 problems[b].empty() ? "" : fmt::format("; {} NOT OK:", problems[b].size()));
      for (const std::string& p : problems[b]) fmt::print("      {}\n", p);
      all_agree &= problems[b].empty();
    }
    return all_agree;
  }

  // How a benchmark is run. By default as the run says (--repetitions, --rounds,
  // --warmup-steps), each repetition on a setup of its own. One whose steps, as its check timed
  // them, last at least --min-time (a step a repetition) sets up and warms up once per process
  // and times its repetitions one after another on that run (--warm_once, harness/protocol.h):
  // a setup and warm-up each would be most of its time (char_rnn at 10^5 pages 3.4 GB in a
  // setup). One that would still take past --time-budget gets as many repetitions as fit (at
  // least 3, at most the run's), two warm-up steps and one round: the long sequences of the
  // recurrent workloads take seconds a step, and ten repetitions of each in two rounds would be
  // most of the default run. Two warm-up steps, not one: our engine's first step grows its
  // arenas block by block, and its second still runs slower than the third (char_rnn at 10^4:
  // 174 against 114 ms, Zen 5).
  struct Plan {
    int repetitions, rounds, warmup_steps;
    double step_seconds = NAN;  // NAN: not timed (a check from before step_seconds, or none)
    bool warm_once = false, shortened = false;
    int repetitions_in(int round) const {
      return round >= rounds ? 0 : repetitions / rounds + (round < repetitions % rounds ? 1 : 0);
    }
  };
  Plan plan_of(const Selected& s, const std::string& b) const {
    Plan p{opt_.repetitions, opt_.rounds, opt_.warmup_steps};
    auto i = step_seconds_.find(s.id);
    if (i == step_seconds_.end() || !i->second.count(b)) return p;
    const double step = p.step_seconds = i->second.at(b);
    p.warm_once = step >= opt_.min_time;
    const double seconds = p.repetitions * std::max(step, opt_.min_time) +
                           (p.warm_once ? p.rounds : p.repetitions) * p.warmup_steps * step;
    if (!(seconds > opt_.time_budget)) return p;
    p.shortened = true, p.rounds = 1, p.warmup_steps = std::min(p.warmup_steps, 2);
    p.repetitions =
        std::clamp(int(opt_.time_budget / std::max(step, opt_.min_time)) - p.warmup_steps,
                   std::min(3, opt_.repetitions), opt_.repetitions);
    return p;
  }

  // Round by round, row by row: the benchmarks of a row run in processes alive together that
  // take turns, one timed loop at a time (harness/protocol.h, --take_turns), each with its own
  // wait4 peak RSS; then the next row. With K rounds the whole selection is run K times, each
  // time with its share of the repetitions, and each benchmark's rounds are merged (merge_rounds
  // in harness/results.h): its repetitions then come from K processes minutes apart, and so do
  // its interval and its pairs.
  void bench() {
    int total = 0, done = 0, benchmarks = 0, shortened = 0;
    for (const Selected& s : selected_)
      for (const auto& [b, name] : s.names) {
        const Plan p = plan_of(s, b);
        benchmarks++, total += p.rounds, shortened += p.shortened;
      }
    fmt::print(
        "\nbenchmarks: {} in {} rounds, {} repetitions of >= {} s each in all{}; the backends of "
        "a row take turns, repetition by repetition; medians\n",
        benchmarks, opt_.rounds, opt_.repetitions, opt_.min_time,
        shortened ? fmt::format(" ({} with steps too long for it: fewer, in one round, to take "
                                "about {} s each)",
                                shortened, opt_.time_budget)
                  : "");
    // instance -> backend -> its cell in each round so far
    std::map<std::string, std::map<std::string, std::vector<Cell>>> rounds;
    for (int round = 0; round < opt_.rounds && !g_interrupted; round++)
      for (const Selected& s : selected_) {
        if (g_interrupted) break;
        int in_row = 0;
        for (const auto& [b, name] : s.names) in_row += round < plan_of(s, b).rounds;
        if (in_row == 0) continue;
        const int first = done + 1;
        done += in_row;
        const std::string which =
            opt_.rounds > 1 ? fmt::format(" (round {} of {})", round + 1, opt_.rounds) : "";
        if (first == done)
          fmt::print("[{:>3}/{}] {}{}\n", done, total, s.id, which);
        else
          fmt::print("[{:>3}-{}/{}] {}{}\n", first, done, total, s.id, which);
        std::fflush(stdout);
        bool reused = false;
        std::map<std::string, Cell> row = bench_row(s, round, &reused);
        for (const std::string& b : opt_.backends) {
          if (!row.count(b)) continue;
          const Cell& c = row[b];
          fmt::print("    {:<11} {}", b, reused ? "(before the interrupt) " : "");
          const Plan p = plan_of(s, b);
          if (c.status == "ok")
            fmt::print("{:>10}  peak RSS {:>9}{}\n", human_time(c.median_seconds),
                       human_mb(c.max_rss_bytes),
                       p.shortened ? fmt::format("  ({} repetitions: {} a step in its check)",
                                                 p.repetitions, human_time(p.step_seconds))
                                   : "");
          else
            fmt::print("{}: {}\n", c.status, c.message);
          rounds[s.id][b].push_back(c);
        }
      }
    for (const Selected& s : selected_)
      for (auto& [b, cells] : rounds[s.id]) {
        Cell c = merged(s, b, cells);
        if (c.status != "ok" && c.status != "skipped" && c.status != "interrupted") failures_++;
        cells_[s.id][b] = std::move(c);
      }
  }

  // One benchmark's rounds as one cell: every round ok, their files merged into <stem>.json;
  // otherwise the first round that was not ok says why (a round never reached: interrupted).
  Cell merged(const Selected& s, const std::string& b, const std::vector<Cell>& cells) {
    for (const Cell& c : cells)
      if (c.status != "ok") return c;
    const int planned = plan_of(s, b).rounds;
    if (int(cells.size()) < planned) {
      Cell c = cells.back();
      c.status = "interrupted", c.message = "interrupted before its last round";
      return c;
    }
    if (planned == 1) return cells[0];
    Cell c = cells[0];
    c.file = b + "/" + file_stem(s.names.at(b)) + ".json";
    try {
      std::vector<Json> files;
      for (const Cell& round : cells)
        files.push_back(parse_benchmark_json(read_file(folder_.dir() / round.file)));
      const Json merged_file = merge_rounds(files);
      write_atomically(folder_.dir() / c.file, merged_file.dump(2, 3) + "\n");
      c.take(read_benchmark_result(merged_file));
      for (const Cell& round : cells)
        c.max_rss_bytes = std::max(c.max_rss_bytes, round.max_rss_bytes);
    } catch (const WriteError&) {
      throw;
    } catch (const std::exception& e) {
      c.status = "failed", c.message = fmt::format("merging its rounds: {}", e.what());
    }
    return c;
  }

  // Processes started with --take_turns (harness/protocol.h), one turn each in the order they
  // were added, round after round, until every one has ended. add() waits until the process is
  // ready, so that the next one starts only then: setups and warm-ups run one at a time, as
  // alone as the timed loops (engine_multistage measures the write and step times that choose
  // its k there; with fifteen processes warming up at once on two cores it chose k = 3842
  // instead of about 150 at char_rnn 10^4).
  class Turns {
   public:
    void add(Child& c) { waiting_.push_back({&c, c.wait_ready() == Child::Turn::ready}); }
    void take() {
      for (bool any = true; any && !g_interrupted;) {
        any = false;
        for (auto& [child, ready] : waiting_) {
          if (!ready || g_interrupted) continue;
          child->go();
          ready = child->wait_ready() == Child::Turn::ready;
          any = true;
        }
      }
    }

   private:
    std::vector<std::pair<Child*, bool>> waiting_;
  };

  // One row's benchmarks: the runnable ones started one after another, each once the one before
  // is ready (set up and warmed up), and kept waiting; then turns in the backends' order until
  // every process ended (Turns).
  // Resuming, a row whose benchmarks all finished well before the interrupt is read, not run.
  std::map<std::string, Cell> bench_row(const Selected& s, int round, bool* reused) {
    struct Running {
      std::string backend, name, log;
      std::vector<std::string> argv;
      std::unique_ptr<Child> child;
    };
    std::map<std::string, Cell> cells;
    std::vector<Running> running;
    for (const std::string& b : opt_.backends) {
      const Plan plan = s.names.count(b) ? plan_of(s, b) : Plan{};
      if (!s.names.count(b) || round >= plan.rounds) continue;
      const std::string name = s.names.at(b), stem = file_stem(name);
      // this round's share of the repetitions; its files and logs carry its number
      const std::string suffix = plan.rounds > 1 ? fmt::format(".round{}", round + 1) : "";
      Cell& c = cells[b];
      const Verdict& v = verdicts_[s.id][b];
      c.verified = v.status == "ok";
      // Skipped and out of memory stay what they are; anything else not ok is not run, with why.
      if (v.status != "ok" && v.status != "unverified") {
        c.status = v.status == "skipped" || v.status == "out_of_memory" ? v.status : "not_run";
        if (v.status == "skipped")
          c.message = v.message;
        else if (not_run(s, b))
          c.message = v.message;
        else if (v.status == "out_of_memory")
          c.message = fmt::format("out of memory in the check at {} under the limit of {}: {}",
                                  s.id, human_bytes(double(opt_.memory_limit)), v.message);
        else
          c.message = "check " + v.status + ": " + v.message;
        if (round == 0)
          add_process(process_json(b, "bench", name, "", "", c.status, c.message, ProcessResult{}));
        continue;
      }
      c.file = b + "/" + stem + suffix + ".json";
      const std::string log = "logs/" + b + "/" + stem + suffix + ".log";
      std::vector<std::string> argv = command(b, s.workload->corpus.context > 0);
      argv.insert(
          argv.end(),
          {instance_arg(s, b), "--benchmark_out=" + (folder_.dir() / c.file).string() + ".partial",
           "--benchmark_out_format=json",
           fmt::format("--benchmark_repetitions={}", plan.repetitions_in(round)),
           fmt::format("--benchmark_min_time={}", opt_.min_time),
           fmt::format("--warmup_steps={}", plan.warmup_steps),
           "--benchmark_display_aggregates_only=true", "--take_turns"});
      if (plan.warm_once) argv.push_back("--warm_once");
      running.push_back({b, name, log, std::move(argv), nullptr});
    }
    if (!running.empty() && !opt_.resume.empty()) {
      std::map<std::string, Cell> kept = cells;
      size_t reused_cells = 0;
      for (const Running& r : running) {
        auto p = finished_.find(round_key(r.name, round));
        if (p == finished_.end() || p->second["status"].str_or("") != "ok") break;
        Cell& c = kept[r.backend];
        try {
          const Json file = parse_benchmark_json(read_file(folder_.dir() / c.file));
          c.max_rss_bytes = p->second["max_rss_bytes"].num_or(NAN);
          c.take(read_benchmark_result(file));
          if (c.status != "ok") break;
          if (!contexts_.count(r.backend)) contexts_[r.backend] = file["context"];
          reused_cells++;
        } catch (const std::exception&) {
          break;
        }
      }
      if ((*reused = reused_cells == running.size())) return kept;
    }
    const auto row_start = std::chrono::steady_clock::now();
    Turns turns;
    for (Running& r : running) {
      for (const fs::path& folder : {folder_.dir() / r.backend, folder_.dir() / "logs" / r.backend})
        if (std::error_code ec; !fs::create_directories(folder, ec) && ec)
          throw WriteError(folder, ec.value());
      note_other_benchmarks();
      r.child = std::make_unique<Child>(r.argv, (folder_.dir() / r.log).string(), opt_.timeout,
                                        child_env(), opt_.memory_limit, /*takes_turns=*/true);
      turns.add(*r.child);
    }
    turns.take();
    for (Running& r : running) {
      const ProcessResult p = r.child->finish();
      Cell& c = cells[r.backend];
      // Its result file becomes one only when the process ended well: Google Benchmark writes
      // the context first and the results at the end, so a process killed on the way leaves a
      // file cut short, which is removed (its log keeps what it printed).
      const fs::path partial = folder_.dir() / (c.file + ".partial");
      if (p.ok()) {
        if (rename(partial.c_str(), (folder_.dir() / c.file).c_str()) != 0 && errno != ENOENT)
          throw WriteError(folder_.dir() / c.file, errno);
      } else {  // nor does an older copy stay (a resumed run's row that failed this time)
        std::error_code ec;
        fs::remove(partial, ec);
        fs::remove(folder_.dir() / c.file, ec);
        c.file.clear();
      }
      c.max_rss_bytes = double(p.max_rss_bytes);
      if (p.interrupted) {
        c.status = "interrupted", c.message = "interrupted; --resume runs it again";
      } else if (p.exit_code == kExitOutOfMemory) {
        c.status = "out_of_memory";
        c.message = fmt::format("out of memory at {} under the limit of {} (see {})", s.id,
                                human_bytes(double(opt_.memory_limit)), r.log);
      } else if (!p.ok()) {
        c.status = p.timed_out ? "timeout" : "failed";
        c.message = p.failure() + " (see " + r.log + ")";
        if (p.signal == SIGKILL && !p.timed_out)  // not sent by the runner
          c.message += fmt::format(
              "; a SIGKILL the runner did not send: most likely the kernel's out-of-memory "
              "killer (peak RSS {})",
              human_mb(c.max_rss_bytes));
      } else {
        try {
          const Json file = parse_benchmark_json(read_file(folder_.dir() / c.file));
          c.take(read_benchmark_result(file));
          if (!contexts_.count(r.backend)) contexts_[r.backend] = file["context"];
        } catch (const std::exception& e) {
          c.status = "failed", c.message = fmt::format("{}: {}", c.file, e.what());
        }
      }
      Json record = process_json(r.backend, "bench", r.name, c.file, r.log, c.status, c.message, p);
      std::vector<double> turns;  // seconds from the row's start: the order the turns went in
      for (const auto& t : r.child->turns())
        turns.push_back(std::round(std::chrono::duration<double>(t - row_start).count() * 1e4) /
                        1e4);
      const Plan plan = plan_of(s, r.backend);
      add_process(record.set("round", round + 1)
                      .set("repetitions", plan.repetitions_in(round))
                      .set("warmup_steps", plan.warmup_steps)
                      .set("warm_once", plan.warm_once)
                      .set("turns", Json::numbers(turns)));
    }
    return cells;
  }

  // The matmul dialects kernel by kernel (harness/kernel_rows.h) on the shapes of the largest
  // selected char_mlp and mlp_width, with the FMA peak, when compiled is selected: kernels.json,
  // and a table in the summary. A resumed run keeps a finished kernels.json. The rows'
  // repetitions run in random order (Google Benchmark's random interleaving), so that the
  // dialects of a shape, which auto's choice is judged against, are timed over the same minutes:
  // one after another, a drift of the VM between two dialects' turns is a difference between them.
  void kernels() {
    std::map<std::string, const Selected*> largest;  // workload -> its largest selected instance
    for (const Selected& s : selected_) {
      const std::string w(s.workload->name);
      if ((w == "char_mlp" || w == "mlp_width") && s.names.count("compiled") &&
          (!largest.count(w) || largest[w]->size < s.size))
        largest[w] = &s;
    }
    const fs::path out = folder_.dir() / "kernels.json";
    if (largest.empty() || (!opt_.resume.empty() && fs::exists(out))) return;
    std::vector<std::string> argv = command("compiled", true);
    std::string which;
    for (const auto& [w, s] : largest) {
      argv.push_back(instance_arg(*s, "compiled"));
      which += (which.empty() ? "" : ", ") + s->id;
    }
    for (std::string a :
         {std::string("--kernel_rows"), std::string("--benchmark_enable_random_interleaving=true"),
          "--benchmark_out=" + (folder_.dir() / "kernels.json.partial").string(),
          std::string("--benchmark_out_format=json"),
          fmt::format("--benchmark_repetitions={}", opt_.repetitions),
          fmt::format("--benchmark_min_time={}", opt_.min_time)})
      argv.push_back(a);
    fmt::print("\nkernels: every matmul dialect on the op shapes of {}, and the FMA peak ... ",
               which);
    std::fflush(stdout);
    const std::string log = "logs/kernels.log";
    const ProcessResult p = run_process(argv, (folder_.dir() / log).string(), opt_.timeout,
                                        child_env(), opt_.memory_limit);
    if (p.interrupted) return;
    std::string status = "ok", message;
    if (p.ok()) {
      fs::rename(folder_.dir() / "kernels.json.partial", out);
      fmt::print("{:.1f} s\n", p.wall_seconds);
    } else {
      status = "failed", message = p.failure() + " (see " + log + ")";
      fmt::print("failed: {}\n", message);
      failures_++;
    }
    add_process(process_json("compiled", "kernels", "", "kernels.json", log, status, message, p));
  }

  // The paper's experiment (arXiv 1806.01117, its figure of slowdown against interval): our
  // multistage strategy at checkpoint intervals k = 1, 2, 4, ... and at the k it chooses from
  // its measured write and step times, against store-all on the same sequence, for each
  // recurrent workload (a state size) selected with engine_multistage, at its longest selected
  // length up to 10^4. A workload's processes, one per k and store-all's, run as one row taking
  // turns (--take_turns), 5 repetitions each after 2 warm-up steps on one setup; a slowdown is
  // the median of the ratios of repetition i to store-all's repetition i, so the machine's drift
  // over the sweep hits both sides of every ratio (measured one after another, the same k gave
  // ratios 30% apart on this VM). intervals.json, the `intervals` plot and a line per workload in
  // the summary.
  void intervals() {
    const fs::path out = folder_.dir() / "intervals.json";
    if (!opt_.resume.empty() && fs::exists(out)) return;
    std::map<std::string, const Selected*> chosen;  // workload -> the instance swept
    for (const Selected& s : selected_)
      if (s.workload->sizes.key == "length" && s.names.count("engine_multistage") &&
          verdicts_[s.id]["engine_multistage"].status == "ok" && s.size <= kIntervalSweepLength &&
          s.size >= 8 &&
          (!chosen.count(std::string(s.workload->name)) ||
           chosen[std::string(s.workload->name)]->size < s.size))
        chosen[std::string(s.workload->name)] = &s;
    if (chosen.empty()) return;
    fmt::print(
        "\nintervals: multistage at k = 1, 2, 4, ... and its own choice, against store-all, "
        "taking turns\n");
    for (const fs::path& folder : {folder_.dir() / "intervals", folder_.dir() / "logs/intervals"})
      if (std::error_code ec; !fs::create_directories(folder, ec) && ec)
        throw WriteError(folder, ec.value());
    Json rows = Json::array_of();
    for (const auto& [w, s] : chosen) {
      std::vector<std::string> ks = {"store_all", "auto"};
      for (int64_t k = 1; k <= s->size / 2; k *= 2) ks.push_back(std::to_string(k));
      fmt::print("  {:<30}", s->id);
      std::fflush(stdout);
      std::vector<std::unique_ptr<Child>> children;
      Turns turns;
      note_other_benchmarks();
      const auto start = std::chrono::steady_clock::now();
      for (const std::string& k : ks) {
        std::vector<std::string> argv = command("engine_multistage", true);
        if (k == "store_all")  // the same binary in its plain mode
          std::erase_if(argv, [](const std::string& a) {
            return a.rfind("--strategy=", 0) == 0 || a.rfind("--snapshots=", 0) == 0 ||
                   a.rfind("--checkpoint_dir=", 0) == 0 || a.rfind("--backend_name=", 0) == 0;
          });
        else
          argv.push_back("--interval=" + k);
        argv.insert(argv.end(),
                    {instance_arg(*s, "engine_multistage"),
                     "--benchmark_out=" + (folder_.dir() / interval_file(w, k)).string(),
                     "--benchmark_out_format=json", "--benchmark_repetitions=5",
                     fmt::format("--benchmark_min_time={}", opt_.min_time), "--warmup_steps=2",
                     "--warm_once", "--benchmark_display_aggregates_only=true", "--take_turns"});
        children.push_back(std::make_unique<Child>(
            argv, (folder_.dir() / interval_log(w, k)).string(), opt_.timeout, child_env(),
            opt_.memory_limit, /*takes_turns=*/true));
        turns.add(*children.back());
      }
      turns.take();
      std::vector<BenchmarkResult> results(ks.size());
      std::vector<ProcessResult> processes(ks.size());
      for (size_t i = 0; i < ks.size(); i++) {
        processes[i] = children[i]->finish();
        if (processes[i].interrupted) return;
        results[i].status = "failed";
        if (!processes[i].ok()) {
          results[i].message = processes[i].failure() + " (see " + interval_log(w, ks[i]) + ")";
          continue;
        }
        try {
          results[i] = read_benchmark_result(
              parse_benchmark_json(read_file(folder_.dir() / interval_file(w, ks[i]))));
        } catch (const std::exception& e) {
          results[i].status = "failed", results[i].message = e.what();
        }
      }
      const BenchmarkResult& store_all = results[0];
      for (size_t i = 0; i < ks.size(); i++) {
        const BenchmarkResult& r = results[i];
        std::string status = r.status, message = r.message;
        if (status == "ok" && i > 0 && store_all.status != "ok")
          status = "failed", message = "store-all failed: " + store_all.message;
        std::vector<double> turns;  // seconds from the sweep's start
        for (const auto& t : children[i]->turns())
          turns.push_back(std::round(std::chrono::duration<double>(t - start).count() * 1e4) / 1e4);
        add_process(process_json("engine_multistage", "intervals", ks[i], interval_file(w, ks[i]),
                                 interval_log(w, ks[i]), status, message, processes[i])
                        .set("turns", Json::numbers(turns)));
        if (status != "ok") {
          fmt::print(" k={}: failed", ks[i]);
          failures_++;
          continue;
        }
        if (i == 0) continue;
        std::vector<double> ratios;  // repetition j against store-all's repetition j
        for (size_t j = 0;
             j < r.repetition_seconds.size() && j < store_all.repetition_seconds.size(); j++)
          ratios.push_back(r.repetition_seconds[j] / store_all.repetition_seconds[j]);
        const double slowdown = median_of(ratios);
        const double interval = r.counters.count("interval") ? r.counters.at("interval") : NAN;
        fmt::print(" {}{:.2f}x", ks[i] == "auto" ? fmt::format("auto (k={:.0f}) ", interval) : "",
                   slowdown);
        Json row = Json::object_of({{"workload", w},
                                    {"length", s->size},
                                    {"k", ks[i]},
                                    {"interval", interval},
                                    {"seconds", r.median_seconds},
                                    {"store_all_seconds", store_all.median_seconds},
                                    {"slowdown", slowdown},
                                    {"slowdowns", Json::numbers(ratios)}});
        for (const char* c :
             {"write_seconds_measured", "step_seconds_measured", "write_wait_seconds",
              "read_wait_seconds", "records", "bytes_written"})
          row.set(c, r.counters.count(c) ? r.counters.at(c) : NAN);
        rows.push(std::move(row));
      }
      fmt::print("\n");
      std::fflush(stdout);
    }
    write_atomically(out, Json::object_of({{"rows", rows}}).dump(2, 2) + "\n");
  }
  static std::string interval_file(const std::string& w, const std::string& k) {
    return fmt::format("intervals/{}-{}.json", w, k);
  }
  static std::string interval_log(const std::string& w, const std::string& k) {
    return fmt::format("logs/intervals/{}-{}.log", w, k);
  }

  void summarize() {
    Summary s;
    s.run_id = folder_.id();
    s.backends = opt_.backends;
    s.reference = opt_.backends.front();
    for (const std::string& b : opt_.backends) s.threads[b] = threads_of(opt_, b);
    Json others = Json::array_of();
    for (const std::string& o : others_) others.push(o);
    s.machine = Json::object_of({{"cpu_model", proc_cpu_model()},
                                 {"cpus", int(sysconf(_SC_NPROCESSORS_ONLN))},
                                 {"environment", environment_},
                                 {"git_sha", git_sha_},
                                 {"load_average_start", load_start_},
                                 {"load_average_end", load_average_1min()},
                                 {"other_benchmarks", std::move(others)}});
    s.options = run_options_json();
    if (fs::exists(folder_.dir() / "intervals.json"))
      s.intervals = parse_json(read_file(folder_.dir() / "intervals.json"))["rows"];
    if (fs::exists(folder_.dir() / "kernels.json"))
      s.kernels = kernel_summary(parse_benchmark_json(read_file(folder_.dir() / "kernels.json")));
    for (const auto& [b, context] : contexts_) s.contexts.set(b, context);
    for (const Selected& sel : selected_) {
      for (const auto& [b, name] : sel.names)
        if (!cells_[sel.id].count(b)) {
          cells_[sel.id][b].status = "interrupted";
          cells_[sel.id][b].message = "not reached: the run was interrupted";
        }
      SummaryRow row{sel.id, sel.workload, sel.size, cells_[sel.id]};
      for (auto& [b, l] : losses_[sel.id]) row.cells[b].check_losses = l;
      s.rows.push_back(std::move(row));
    }
    write_atomically(folder_.dir() / "summary.json", summary_json(s).dump(2, 4) + "\n");
    std::string text = summary_text(s);
    if (!others_.empty())
      text += fmt::format(
          "\nwarning: other benchmarks ran on this machine during this run ({}); load average "
          "{:.2f} at the start, {:.2f} at the end: timings may be inflated\n",
          fmt::join(others_, ", "), s.machine["load_average_start"].num_or(-1),
          s.machine["load_average_end"].num_or(-1));
    if (failures_)
      text += fmt::format(
          "\n{} benchmark(s) failed or were not run; see "
          "processes.json\n",
          failures_);
    text += fmt::format("results: {}\n", folder_.dir().string());
    write_atomically(folder_.dir() / "summary.txt", text);
    fmt::print("{}", text);
  }

  // plots/plot.py is a pure function of summary.json; a failure there loses no result.
  void plot() const {
    std::fflush(stdout);
    const std::string log = (folder_.dir() / "logs" / "plots.log").string();
    const ProcessResult p = run_process(
        {"/usr/bin/python3", BP_SOURCE_DIR "/plots/plot.py", folder_.dir().string()}, log, 600, {});
    std::vector<std::string> lines = fields(read_file(log), '\n');
    for (size_t i = 1; i < lines.size(); i++) fmt::print("{}\n", lines[i]);
    if (!p.ok())
      fmt::print(stderr,
                 "plots failed ({}); the results are intact, retry with: make plots "
                 "RUN={}\n",
                 p.failure(), folder_.dir().string());
  }

  Options opt_;
  std::vector<Selected> selected_;
  std::time_t start_ = 0;
  double load_start_ = -1;
  std::vector<std::string> others_;  // other benchmark processes seen during the run
  std::string git_sha_;
  Json environment_ = Json::object_of({});  // harness/proc.h's, read once at the start
  RunFolder folder_;
  Json processes_ = Json::array_of();
  Json estimates_ = Json::array_of();  // sizes beyond the defaults: what each will need
  std::map<std::string, std::map<std::string, Json>> not_run_;      // instance -> backend -> record
  std::map<std::string, std::map<std::string, Verdict>> verdicts_;  // instance -> backend -> it
  std::map<std::string, std::map<std::string, Cell>> cells_;        // instance -> backend -> it
  std::map<std::string, Json> finished_;  // --resume: benchmark name -> its last bench process
  std::map<std::string, Json> contexts_;  // backend -> the context its result files carry
  std::map<std::string, std::map<std::string, std::vector<double>>> losses_;  // models' checks
  std::map<std::string, std::map<std::string, double>> step_seconds_;  // as the check timed them
  int failures_ = 0;
};

// --resume RUN: the interrupted run's own arguments (its run.json), then what may be added.
std::vector<std::string> resumed_args(const std::vector<std::string>& given) {
  auto at = std::find(given.begin(), given.end(), "--resume");
  if (at == given.end()) return given;
  if (at + 1 == given.end()) usage_error("--resume needs a value (a run folder)");
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
    const Json saved = parse_json(read_file(run / "run.json"));
    if (saved["format_version"].num_or(0) != kResultFormat)
      usage_error(
          fmt::format("--resume {}: written by another version of bench_run (result "
                      "format {}, this one reads {})",
                      run.string(), saved["format_version"].num_or(0), kResultFormat));
    for (const Json& a : saved["args"].array) args.push_back(a.str_or(""));
  } catch (const std::exception& e) {
    usage_error(fmt::format("--resume {}: run.json unreadable: {}", run.string(), e.what()));
  }
  args.insert(args.end(), extra.begin(), extra.end());
  args.push_back("--resume");
  args.push_back(run.string());
  return args;
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
}  // namespace bp

int main(int argc, char** argv) {
  signal(SIGINT, bp::interrupt_children);
  signal(SIGTERM, bp::interrupt_children);
  signal(SIGPIPE, SIG_IGN);  // a backend that ended mid-turn: the write fails, the runner goes on
  if (argc > 1 && std::string(argv[1]) == "compare")
    return bp::compare_main({argv + 2, argv + argc}, BP_SOURCE_DIR "/plots/compare.py");
  bp::Options options = bp::parse_options(bp::resumed_args({argv + 1, argv + argc}));
  std::string error;
  std::optional<std::vector<bp::Selected>> selected = bp::select_instances(
      {.backends = options.backends,
       .workloads = options.workloads,
       .sizes = options.sizes,
       .filter = options.filter,
       .threads_of = [&](const std::string& b) { return bp::threads_of(options, b); },
       .runs =
           [](const std::string& b, const bp::WorkloadInfo& w) {
             const char* only = bp::spec_of(b).only_workloads;
             if (!only) return true;
             const std::vector<std::string> names = bp::fields(only, ',');
             return std::find(names.begin(), names.end(), w.name) != names.end();
           },
       .default_skip = bp::default_size_skipped},
      &error);
  if (!selected) bp::usage_error(error);
  // A variant none of whose workloads is selected has no column in any table.
  std::erase_if(options.backends, [&](const std::string& b) {
    return std::none_of(selected->begin(), selected->end(),
                        [&](const bp::Selected& s) { return s.names.count(b) > 0; });
  });
  bp::check_corpus(options, *selected);
  try {
    return bp::Run(std::move(options), std::move(*selected)).main();
  } catch (const bp::WriteError& e) {  // a full disk: stop, keeping every file as last written
    fmt::print(stderr, "error: {}; the run stopped, and its files keep their last good copy\n",
               e.what());
    return 4;
  }
}
