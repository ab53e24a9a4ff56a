// harness/run.cc: bench_run, the one runner over every backend binary.
//
// It (1) asks each backend binary which benchmarks match the selection, (2) runs the correctness
// check on every backend and compares values and gradients against our engine and the known
// answers, (3) runs each benchmark of each backend that passed in a fresh process (so the parent's
// wait4 peak RSS is that benchmark's alone), with a timeout, and (4) prints a summary table.
// What it writes under <out>/<run-id>/ is documented in README.md ("What a run writes"); every
// file is written as soon as its numbers exist, so an interrupted run keeps what it measured.
//
//   build/bench_run --filter small_graph --repetitions 3      # `build/bench_run --help` for all
#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "harness/json.h"
#include "harness/names.h"
#include "harness/text.h"

namespace fs = std::filesystem;
using bp::Json;

namespace {

// The backends the runner knows: name, program (a binary in the build folder, or a script in the
// source tree when it has a '/'), the flag that selects its mode, whether --threads applies. The
// first is the reference every other backend is checked against and divided by in the ratios.
struct BackendSpec {
  const char* name;
  const char* program;
  const char* mode_flag;
  bool threaded;
};
const BackendSpec kBackends[] = {
    {"engine", "bench_engine", nullptr, false},
    {"libtorch", "bench_libtorch", nullptr, true},
    {"pytorch", "baselines/pytorch_bench.py", "--mode=pytorch", true},
    {"torchscript", "baselines/pytorch_bench.py", "--mode=torchscript", true},
};

// Values are compared as |x - reference| / max(floor, |reference|) <= rel, with rel and floor
// from the reference's record (each workload states them: scalar graphs in double rel 1e-9,
// floor 1; models in float32 rel 2e-3, floor 1e-12, i.e. purely relative).
struct Tolerance {
  double rel, floor;
};

const char* kUsage = R"(usage: bench_run [options]
  --out DIR            results folder (default: results); the run goes to DIR/<run-id>/ and
                       DIR/latest points at it
  --backends A,B       backends to run (default: all: engine,libtorch,pytorch,torchscript)
  --filter REGEX       run only benchmarks whose names match (Google Benchmark's --benchmark_filter)
  --workloads A,B      run only these workloads
  --sizes KEY=N,...    replace the default sizes of workloads sized by KEY (e.g. nodes=10,5000);
                       repeat it for other keys (--sizes nodes=10 --sizes batch=1,8)
  --threads N          intra-op threads for threaded backends (default 1)
  --data FILE          character corpus of the model workloads (default /usr/share/dict/words)
  --repetitions N      repetitions per benchmark; the median is reported (default 5)
  --min-time S         minimum seconds per repetition (default 0.2)
  --timeout S          seconds before a backend process is killed (default 600)
  --check-only         run the correctness check only; exit 1 if any backend disagrees
  --no-plots           do not draw the plots (plots/plot.py) at the end
  --bin-dir DIR        where the backend binaries are (default: next to bench_run)
Exit status: 0 all ran and agreed; 1 check-only found disagreement; 2 bad input; 3 some
benchmark failed, timed out or was not run because its backend failed the check.
)";

[[noreturn]] void usage_error(const std::string& what) {
  fmt::print(stderr, "error: {}\n(bench_run --help lists the options)\n", what);
  std::exit(2);
}

struct Options {
  fs::path out = "results", bin_dir;
  std::vector<std::string> backends;
  std::string filter, workloads, data;
  std::vector<std::string> sizes;
  int threads = 1, repetitions = 5;
  double min_time = 0.2, timeout = 600;
  bool check_only = false, plots = true;
};

// The non-empty fields of a list (a trailing comma or a blank line is nothing).
std::vector<std::string> fields(const std::string& s, char sep) {
  std::vector<std::string> out = bp::split(s, sep);
  std::erase(out, std::string());
  return out;
}

double parse_number(const std::string& flag, const std::string& text, double lo, double hi) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !(v >= lo && v <= hi))
    usage_error(fmt::format("{} {}: expected a number from {} to {}", flag, text, lo, hi));
  return v;
}

Options parse_options(int argc, char** argv) {
  Options o;
  o.bin_dir = fs::read_symlink("/proc/self/exe").parent_path();
  for (const BackendSpec& b : kBackends) o.backends.push_back(b.name);
  for (int i = 1; i < argc; i++) {
    std::string arg = argv[i], value;
    const size_t eq = arg.find('=');
    const bool has_inline = arg.rfind("--", 0) == 0 && eq != std::string::npos;
    if (has_inline) value = arg.substr(eq + 1), arg = arg.substr(0, eq);
    auto next = [&]() -> std::string {
      if (has_inline) return value;
      if (i + 1 >= argc) usage_error(fmt::format("{} needs a value", arg));
      return argv[++i];
    };
    if (arg == "--help" || arg == "-h") {
      fmt::print("{}", kUsage);
      std::exit(0);
    } else if (arg == "--out") o.out = next();
    else if (arg == "--bin-dir") o.bin_dir = next();
    else if (arg == "--filter") o.filter = next();
    else if (arg == "--workloads") o.workloads = next();
    else if (arg == "--sizes") o.sizes.push_back(next());
    else if (arg == "--data") o.data = next();
    else if (arg == "--threads") o.threads = int(parse_number(arg, next(), 1, 256));
    else if (arg == "--repetitions") o.repetitions = int(parse_number(arg, next(), 1, 1000));
    else if (arg == "--min-time") o.min_time = parse_number(arg, next(), 0.001, 600);
    else if (arg == "--timeout") o.timeout = parse_number(arg, next(), 1, 86400);
    else if (arg == "--check-only") o.check_only = true;
    else if (arg == "--no-plots") o.plots = false;
    else if (arg == "--backends") {
      o.backends = fields(next(), ',');
      std::vector<std::string> valid;
      for (const BackendSpec& b : kBackends) valid.push_back(b.name);
      for (const std::string& b : o.backends)
        if (std::find(valid.begin(), valid.end(), b) == valid.end())
          usage_error(fmt::format("unknown backend '{}'; valid: {}", b, fmt::join(valid, ", ")));
      if (o.backends.empty()) usage_error("--backends: name at least one backend");
    } else {
      usage_error(fmt::format("unknown option '{}'", argv[i]));
    }
  }
  return o;
}

const BackendSpec& spec_of(const std::string& name) {
  for (const BackendSpec& b : kBackends)
    if (name == b.name) return b;
  usage_error("unknown backend " + name);
}

// ---- child processes ----

struct ProcessResult {
  int exit_code = -1, signal = 0;
  bool timed_out = false;
  double wall_seconds = 0;
  int64_t max_rss_bytes = 0;
  bool ok() const { return !timed_out && signal == 0 && exit_code == 0; }
  std::string failure() const {
    if (timed_out) return "timed out";
    if (signal) return fmt::format("killed by signal {} ({})", signal, strsignal(signal));
    return fmt::format("exit code {}", exit_code);
  }
};

volatile sig_atomic_t g_child_group = 0;

// Ctrl-C stops the backend process too (it runs in its own process group so that a timeout can
// kill it with everything it started); files already written stay.
void on_interrupt(int sig) {
  if (g_child_group > 0) kill(-g_child_group, SIGKILL);
  signal(sig, SIG_DFL);
  raise(sig);
}

// Runs argv with stdout and stderr into `log`; kills the process group after `timeout` seconds.
// The peak RSS comes from wait4's rusage: the child's own high-water mark, as the kernel saw it.
ProcessResult run_process(const std::vector<std::string>& argv, const fs::path& log,
                          double timeout, const std::vector<std::string>& env) {
  ProcessResult r;
  const auto start = std::chrono::steady_clock::now();
  const pid_t pid = fork();
  if (pid < 0) usage_error(fmt::format("fork failed: {}", strerror(errno)));
  if (pid == 0) {
    setpgid(0, 0);
    const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) dup2(fd, 1), dup2(fd, 2), close(fd);
    for (const std::string& e : env) putenv(const_cast<char*>(e.c_str()));
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    fmt::print(stderr, "cannot run {}: {}\n", argv[0], strerror(errno));
    _exit(127);
  }
  setpgid(pid, pid);
  g_child_group = pid;
  int status = 0;
  rusage usage{};
  while (true) {
    const pid_t done = wait4(pid, &status, WNOHANG, &usage);
    if (done == pid) break;
    const double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (elapsed > timeout && !r.timed_out) {
      r.timed_out = true;
      kill(-pid, SIGKILL);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(r.timed_out ? 1 : 10));
  }
  g_child_group = 0;
  r.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  r.max_rss_bytes = int64_t(usage.ru_maxrss) * 1024;  // Linux reports kilobytes
  if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) r.signal = WTERMSIG(status);
  return r;
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::optional<Json> read_json(const fs::path& p, std::string* error) {
  try {
    if (!fs::exists(p)) {
      *error = "no output file";
      return std::nullopt;
    }
    return bp::JsonParser(read_file(p)).parse();
  } catch (const std::exception& e) {
    *error = e.what();
    return std::nullopt;
  }
}

// Writes via a temporary file and a rename, so a reader never sees half a file.
void write_atomically(const fs::path& p, const std::string& text) {
  const fs::path tmp = p.string() + ".tmp";
  std::ofstream(tmp) << text;
  fs::rename(tmp, p);
}

std::string shell_line(const char* cmd) {
  std::string out;
  if (FILE* f = popen(cmd, "r")) {
    char buf[256];
    while (fgets(buf, sizeof buf, f)) out += buf;
    pclose(f);
  }
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return out;
}

std::string regex_quote(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (std::string_view(".[]{}()\\*+?^$|").find(c) != std::string_view::npos) out += '\\';
    out += c;
  }
  return out;
}

std::string file_stem(const std::string& bench_name) {
  std::string s;
  for (char c : bench_name) s += c == '/' ? std::string("__") : c == ':' ? "-" : std::string(1, c);
  return s;
}

// ---- formatting for people ----

std::string human_time(double seconds) {
  if (!(seconds >= 0)) return "-";
  if (seconds < 1e-6) return fmt::format("{:.1f} ns", seconds * 1e9);
  if (seconds < 1e-3) return fmt::format("{:.2f} us", seconds * 1e6);
  if (seconds < 1) return fmt::format("{:.2f} ms", seconds * 1e3);
  return fmt::format("{:.2f} s", seconds);
}
std::string human_mb(double bytes) {
  return bytes > 0 ? fmt::format("{:.1f} MB", bytes / 1e6) : "-";
}

// ---- the run ----

struct Record {  // one row of processes.json
  std::string backend, phase, benchmark, instance, file, log, status, message;
  ProcessResult proc;
  double median_seconds = -1, peak_rss_bytes = -1;  // from the benchmark's own JSON
};

std::string record_json(const Record& r) {
  return fmt::format(
      R"({{"backend": "{}", "phase": "{}", "benchmark": "{}", "instance": "{}", "file": "{}", )"
      R"("log": "{}", "status": "{}", "message": "{}", "exit_code": {}, "signal": {}, )"
      R"("timed_out": {}, "wall_seconds": {:.3f}, "max_rss_bytes": {}, )"
      R"("median_real_time_seconds": {}, "median_peak_rss_bytes": {}}})",
      r.backend, r.phase, bp::json_escape(r.benchmark), bp::json_escape(r.instance), r.file,
      r.log, r.status, bp::json_escape(r.message), r.proc.exit_code, r.proc.signal,
      r.proc.timed_out ? "true" : "false",
      r.proc.wall_seconds, r.proc.max_rss_bytes,
      r.median_seconds >= 0 ? fmt::format("{}", r.median_seconds) : "null",
      r.peak_rss_bytes >= 0 ? fmt::format("{}", r.peak_rss_bytes) : "null");
}

class Run {
 public:
  Run(Options o) : opt_(std::move(o)) {}

  int main() {
    start_ = std::time(nullptr);
    git_sha_ = shell_line(("git -C '" BP_SOURCE_DIR "' rev-parse --short HEAD 2>/dev/null")) ;
    if (git_sha_.empty()) git_sha_ = "nogit";
    else if (!shell_line("git -C '" BP_SOURCE_DIR "' status --porcelain --untracked-files=no "
                         "2>/dev/null").empty())
      git_sha_ += "-dirty";
    char host[256] = "host";
    gethostname(host, sizeof host - 1);
    char stamp[32];
    std::strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", std::gmtime(&start_));
    run_id_ = fmt::format("{}-{}-{}", stamp, host, git_sha_);
    dir_ = opt_.out / run_id_;
    fs::create_directories(dir_ / "logs");

    list_benchmarks();
    fmt::print("run {}\n  writing to {}\n", run_id_, dir_.string());
    if (!opt_.check_only) point_latest_here();
    const bool all_agree = check();
    if (opt_.check_only) return all_agree ? 0 : 1;
    bench();
    summary();
    if (opt_.plots) plot();
    return failures_ || !bad_backends_.empty() ? 3 : 0;
  }

 private:
  std::vector<std::string> common_flags(const std::string& backend) const {
    std::vector<std::string> f;
    if (!opt_.workloads.empty()) f.push_back("--workloads=" + opt_.workloads);
    for (const std::string& s : opt_.sizes) f.push_back("--sizes=" + s);
    if (!opt_.data.empty()) f.push_back("--data=" + opt_.data);
    if (spec_of(backend).threaded) f.push_back(fmt::format("--threads={}", opt_.threads));
    return f;
  }
  // Thread counts are each backend's own business (--threads): bench_libtorch sets OpenBLAS's,
  // pytorch_bench.py its environment before importing torch.
  std::vector<std::string> child_env() const { return {"BACKPROP_BENCH_GIT_SHA=" + git_sha_}; }
  std::string binary(const std::string& backend) const {
    const std::string program = spec_of(backend).program;
    if (program.find('/') != std::string::npos) return std::string(BP_SOURCE_DIR "/") + program;
    return (opt_.bin_dir / program).string();
  }
  // The start of every command line of this backend: its program, then its mode if it has one.
  std::vector<std::string> command(const std::string& backend) const {
    std::vector<std::string> argv = {binary(backend)};
    if (spec_of(backend).mode_flag) argv.push_back(spec_of(backend).mode_flag);
    return argv;
  }
  int threads_of(const std::string& backend) const {
    return spec_of(backend).threaded ? opt_.threads : 1;
  }

  // Each backend lists its matching benchmarks; its own validation of --workloads/--sizes speaks
  // first (exit 2 with one line), so every bad input is reported the same way.
  void list_benchmarks() {
    for (const std::string& b : opt_.backends) {
      if (!fs::exists(binary(b)))
        usage_error(fmt::format("{} not found; build first (make)", binary(b)));
      std::vector<std::string> argv = command(b);
      argv.push_back("--benchmark_list_tests=true");
      if (!opt_.filter.empty()) argv.push_back("--benchmark_filter=" + opt_.filter);
      for (const std::string& f : common_flags(b)) argv.push_back(f);
      const fs::path log = dir_ / "logs" / (b + ".list.log");
      ProcessResult r = run_process(argv, log, 120, child_env());
      const std::string text = read_file(log);
      if (r.exit_code == 2) {
        fmt::print(stderr, "{}", text);
        std::exit(2);
      }
      if (!r.ok()) usage_error(fmt::format("{} could not list its benchmarks ({}):\n{}", b,
                                           r.failure(), text));
      for (const std::string& line : fields(text, '\n'))
        if (bp::parse_bench_name(line)) names_[b].push_back(line);
      for (const std::string& n : names_[b]) {
        const std::string inst = bp::parse_bench_name(n)->instance();
        if (std::find(instances_.begin(), instances_.end(), inst) == instances_.end())
          instances_.push_back(inst);
      }
    }
    if (instances_.empty()) {
      std::vector<std::string> all;
      std::vector<std::string> argv = command(opt_.backends[0]);
      argv.push_back("--benchmark_list_tests=true");
      ProcessResult r = run_process(argv, dir_ / "logs" / "all.list.log", 120, child_env());
      (void)r;
      for (const std::string& line : fields(read_file(dir_ / "logs" / "all.list.log"), '\n'))
        all.push_back(line);
      usage_error(fmt::format("--filter '{}' matches no benchmark; names look like:\n  {}",
                              opt_.filter, fmt::join(all, "\n  ")));
    }
  }

  void point_latest_here() {
    const fs::path latest = opt_.out / "latest";
    std::error_code ec;
    fs::remove(latest, ec);
    fs::create_directory_symlink(run_id_, latest, ec);
  }

  // Runs every backend's check and compares each instance with the reference backend (the first
  // selected, our engine by default) and with known answers. Returns true if all agree.
  bool check() {
    fs::create_directories(dir_ / "check");
    std::map<std::string, std::map<std::string, Json>> results;  // backend -> instance -> record
    for (const std::string& b : opt_.backends) {
      fmt::print("check {:<9} ", b);
      std::fflush(stdout);
      Record rec;
      rec.backend = b, rec.phase = "check";
      rec.file = "check/" + b + ".json", rec.log = "logs/" + b + ".check.log";
      std::vector<std::string> argv = command(b);
      argv.push_back("--check_out=" + (dir_ / rec.file).string());
      if (!opt_.filter.empty()) argv.push_back("--benchmark_filter=" + opt_.filter);
      for (const std::string& f : common_flags(b)) argv.push_back(f);
      rec.proc = run_process(argv, dir_ / rec.log, opt_.timeout, child_env());
      std::string err;
      std::optional<Json> j = read_json(dir_ / rec.file, &err);
      if (!rec.proc.ok() || !j) {
        rec.status = "failed";
        rec.message = rec.proc.ok() ? err : rec.proc.failure();
        bad_backends_[b] = "check " + rec.message + " (see " + rec.log + ")";
        fmt::print("FAILED: {}\n", bad_backends_[b]);
      } else {
        rec.status = "ok";
        for (const Json& r : (*j)["results"].array) results[b][r["instance"].string] = r;
        fmt::print("{} instances in {:.1f} s\n", results[b].size(), rec.proc.wall_seconds);
      }
      add_record(rec);
    }

    const std::string& ref = opt_.backends[0];
    std::string report = "{\n  \"reference\": \"" + ref + "\",\n  \"results\": [";
    bool first_row = true, all_agree = bad_backends_.empty();
    for (const std::string& b : opt_.backends) {
      if (bad_backends_.count(b)) continue;
      double worst = 0, worst_tolerance = 0;
      std::string worst_at;
      std::vector<std::string> problems;
      for (const auto& [inst, r] : results[b]) {
        std::string status = r["status"].str_or("missing"), message = r["message"].str_or("");
        double diff = 0;
        if (status == "ok") {
          const Json& known = r["known_answer"];
          if (!known.is_null() && !(known["max_diff"].num_or(INFINITY) <=
                                    known["tolerance"].num_or(0)))
            status = "wrong", message = fmt::format("known answer off by {}",
                                                    known["max_diff"].num_or(NAN));
          if (!(r["repeat_max_diff"].num_or(INFINITY) <= 0))
            status = "wrong", message = "a second step gave different numbers (reset is broken)";
          if (b != ref && results[ref].count(inst) && results[ref][inst]["status"].string == "ok") {
            const Json& t = results[ref][inst]["tolerance"];
            const Tolerance tol{t["rel"].num_or(0), t["floor"].num_or(1)};
            diff = max_rel_diff(results[ref][inst], r, tol.floor);
            if (!(diff <= tol.rel))
              status = "wrong", message = fmt::format("differs from {} by {:.3g} (tolerance {:.0e})",
                                                      ref, diff, tol.rel);
            if (!(diff / tol.rel <= worst / std::max(worst_tolerance, 1e-300)) || worst_at.empty())
              worst = diff, worst_tolerance = tol.rel, worst_at = inst;
          }
        }
        if (status != "ok" && status != "skipped") problems.push_back(inst + ": " + message);
        report += fmt::format(R"({}    {{"backend": "{}", "instance": "{}", "status": "{}", )"
                              R"("max_rel_diff_vs_reference": {}, "message": "{}"}})",
                              first_row ? "\n" : ",\n", b, bp::json_escape(inst), status,
                              std::isfinite(diff) ? fmt::format("{}", diff) : "null",
                              bp::json_escape(message));
        first_row = false;
      }
      if (b == ref)
        fmt::print("check {:<9} reference: {} instances, known answers {}\n", b,
                   results[b].size(), problems.empty() ? "match" : "DO NOT match");
      else
        fmt::print("check {:<9} vs {}: closest to its tolerance: rel diff {:.2e} (tolerance {:.0e})"
                   " at {}; {}\n", b, ref, worst, worst_tolerance, worst_at,
                   problems.empty() ? "all OK" : "WRONG");
      for (const std::string& p : problems) fmt::print("      {}\n", p);
      if (!problems.empty()) {
        bad_backends_[b] = fmt::format("wrong answers ({})", problems.front());
        all_agree = false;
      }
    }
    write_atomically(dir_ / "check.json", report + "\n  ]\n}\n");
    return all_agree;
  }

  static double max_rel_diff(const Json& ref, const Json& got, double floor) {
    auto rel = [floor](const Json& a, const Json& b) {
      if (a.kind != Json::Kind::number || b.kind != Json::Kind::number) return double(INFINITY);
      return std::fabs(a.number - b.number) / std::max(floor, std::fabs(a.number));
    };
    double worst = rel(ref["value"], got["value"]);
    const auto &ga = ref["grads"].array, &gb = got["grads"].array;
    if (ga.size() != gb.size()) return INFINITY;
    for (size_t i = 0; i < ga.size(); i++) worst = std::max(worst, rel(ga[i], gb[i]));
    return worst;
  }

  void bench() {
    int total = 0, done = 0;
    for (const std::string& b : opt_.backends) total += int(names_[b].size());
    fmt::print("\nbenchmarks: {} in {} processes, {} repetitions of >= {} s each; medians\n",
               total, total, opt_.repetitions, opt_.min_time);
    for (const std::string& inst : instances_) {
      for (const std::string& b : opt_.backends) {
        for (const std::string& name : names_[b]) {
          if (bp::parse_bench_name(name)->instance() != inst) continue;
          done++;
          fmt::print("[{:>3}/{}] {:<11} {:<36} ", done, total, b, inst);
          std::fflush(stdout);
          Record rec = bench_one(b, name);
          if (rec.status == "ok")
            fmt::print("{:>10}  peak RSS {:>9}  ({:.1f} s)\n", human_time(rec.median_seconds),
                       human_mb(double(rec.proc.max_rss_bytes)), rec.proc.wall_seconds);
          else
            fmt::print("{}: {}\n", rec.status, rec.message);
          results_[inst][b] = rec;
          add_record(rec);
        }
      }
    }
  }

  Record bench_one(const std::string& b, const std::string& name) {
    const std::string stem = file_stem(name);
    fs::create_directories(dir_ / b);
    fs::create_directories(dir_ / "logs" / b);
    Record rec;
    rec.backend = b, rec.phase = "bench", rec.benchmark = name;
    rec.instance = bp::parse_bench_name(name)->instance();
    rec.file = b + "/" + stem + ".json", rec.log = "logs/" + b + "/" + stem + ".log";
    if (bad_backends_.count(b)) {
      rec.status = "not_run";
      rec.message = bad_backends_[b];
      return rec;
    }
    std::vector<std::string> argv = command(b);
    argv.insert(argv.end(), {
        "--benchmark_filter=^" + regex_quote(name) + "$",
        "--benchmark_out=" + (dir_ / rec.file).string(),
        "--benchmark_out_format=json",
        fmt::format("--benchmark_repetitions={}", opt_.repetitions),
        fmt::format("--benchmark_min_time={}", opt_.min_time),
        "--benchmark_display_aggregates_only=true"});
    for (const std::string& f : common_flags(b)) argv.push_back(f);
    rec.proc = run_process(argv, dir_ / rec.log, opt_.timeout, child_env());
    std::string err;
    std::optional<Json> j = read_json(dir_ / rec.file, &err);
    if (!rec.proc.ok()) {
      rec.status = rec.proc.timed_out ? "timeout" : "failed";
      rec.message = rec.proc.failure() + " (see " + rec.log + ")";
      failures_++;
      return rec;
    }
    if (!j) {
      rec.status = "failed", rec.message = err;
      failures_++;
      return rec;
    }
    for (const Json& run : (*j)["benchmarks"].array) {
      if (run["error_occurred"].boolean) {
        const std::string msg = run["error_message"].str_or("");
        rec.status = msg.rfind("skipped", 0) == 0 ? "skipped" : "failed";
        rec.message = msg;
        if (rec.status == "failed") failures_++;
        return rec;
      }
      if (run["run_type"].string == "aggregate" && run["aggregate_name"].string == "median")
        read_timing(run, rec);
    }
    // With one repetition Google Benchmark writes no aggregates: the single run is the median.
    if (rec.median_seconds < 0 && (*j)["benchmarks"].array.size() == 1)
      read_timing((*j)["benchmarks"].array[0], rec);
    rec.status = rec.median_seconds >= 0 ? "ok" : "failed";
    if (rec.status != "ok") rec.message = "no timing in " + rec.file, failures_++;
    return rec;
  }

  // A benchmark entry's real time in seconds and its peak_rss_bytes counter, into rec.
  static void read_timing(const Json& run, Record& rec) {
    const std::string unit = run["time_unit"].str_or("ns");
    const double scale = unit == "s" ? 1 : unit == "ms" ? 1e-3 : unit == "us" ? 1e-6 : 1e-9;
    rec.median_seconds = run["real_time"].num_or(NAN) * scale;
    rec.peak_rss_bytes = run["peak_rss_bytes"].num_or(-1);
  }

  void add_record(const Record& r) {
    records_.push_back(record_json(r));
    char started[32];
    std::strftime(started, sizeof started, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&start_));
    std::string text = fmt::format(
        "{{\n  \"run_id\": \"{}\",\n  \"git_sha\": \"{}\",\n  \"started_utc\": \"{}\",\n"
        "  \"options\": {{\"backends\": \"{}\", \"filter\": \"{}\", \"workloads\": \"{}\", "
        "\"sizes\": \"{}\", \"data\": \"{}\", \"threads\": {}, \"repetitions\": {}, \"min_time\": {}, "
        "\"timeout\": {}}},\n  \"processes\": [\n    {}\n  ]\n}}\n",
        run_id_, git_sha_, started, fmt::join(opt_.backends, ","), bp::json_escape(opt_.filter),
        opt_.workloads, fmt::join(opt_.sizes, " "), bp::json_escape(opt_.data), opt_.threads,
        opt_.repetitions, opt_.min_time, opt_.timeout,
        fmt::join(records_, ",\n    "));
    write_atomically(dir_ / "processes.json", text);
  }

  // The tables a person reads at the end: per instance, each backend's median time and how many
  // times slower each baseline is than the reference; then each process's peak RSS.
  void summary() {
    const std::string& ref = opt_.backends[0];
    auto cell_of = [&](const std::string& inst, const std::string& b, bool memory) {
      auto it = results_[inst].find(b);
      if (it == results_[inst].end()) return std::string("-");
      const Record& r = it->second;
      if (r.status == "not_run") return std::string("not run");
      if (r.status != "ok") return r.status;
      return memory ? human_mb(double(r.proc.max_rss_bytes)) : human_time(r.median_seconds);
    };
    std::string threads;
    for (const std::string& b : opt_.backends)
      threads += fmt::format("{}{} {}", threads.empty() ? "" : ", ", b, threads_of(b));
    std::string out = fmt::format("\nsummary (threads: {})\nmedian time per step, and backend "
                                  "time / {} time:\n{:<32}", threads, ref, "workload");
    for (const std::string& b : opt_.backends) out += fmt::format(" {:>11}", b);
    for (const std::string& b : opt_.backends)
      if (b != ref) out += fmt::format(" {:>12}", b + "/" + ref);
    out += "\n";
    for (const std::string& inst : instances_) {
      out += fmt::format("{:<32}", inst);
      for (const std::string& b : opt_.backends) out += fmt::format(" {:>11}", cell_of(inst, b, false));
      for (const std::string& b : opt_.backends) {
        if (b == ref) continue;
        std::string cell = "-";
        auto r = results_[inst].find(ref), x = results_[inst].find(b);
        if (r != results_[inst].end() && x != results_[inst].end() && r->second.status == "ok" &&
            x->second.status == "ok" && r->second.median_seconds > 0)
          cell = fmt::format("{:.1f}x", x->second.median_seconds / r->second.median_seconds);
        out += fmt::format(" {:>{}}", cell, std::max<size_t>(12, b.size() + 1 + ref.size()));
      }
      out += "\n";
    }
    out += fmt::format("\npeak RSS of each benchmark's process (wait4):\n{:<32}", "workload");
    for (const std::string& b : opt_.backends) out += fmt::format(" {:>11}", b);
    out += "\n";
    for (const std::string& inst : instances_) {
      out += fmt::format("{:<32}", inst);
      for (const std::string& b : opt_.backends) out += fmt::format(" {:>11}", cell_of(inst, b, true));
      out += "\n";
    }
    for (const auto& [b, why] : bad_backends_) out += fmt::format("{} not reported: {}\n", b, why);
    if (failures_) out += fmt::format("{} benchmark(s) failed; see processes.json\n", failures_);
    out += fmt::format("results: {}\n", dir_.string());
    fmt::print("{}", out);
    write_atomically(dir_ / "summary.txt", out);
  }

  // plots/plot.py is a pure function of the run folder; a failure there loses no result.
  void plot() const {
    std::fflush(stdout);  // our buffered lines first, then the script's
    const std::string cmd = fmt::format("/usr/bin/python3 '{}/plots/plot.py' '{}'", BP_SOURCE_DIR,
                                        dir_.string());
    if (std::system(cmd.c_str()) != 0)
      fmt::print(stderr, "plots failed; the results are intact, retry with: make plots RUN={}\n",
                 dir_.string());
  }

  Options opt_;
  std::time_t start_ = 0;
  std::string run_id_, git_sha_;
  fs::path dir_;
  std::map<std::string, std::vector<std::string>> names_;  // backend -> benchmark names
  std::vector<std::string> instances_;                      // in registry order
  std::map<std::string, std::string> bad_backends_;         // backend -> why it is not reported
  std::map<std::string, std::map<std::string, Record>> results_;  // instance -> backend -> record
  std::vector<std::string> records_;
  int failures_ = 0;
};

}  // namespace

int main(int argc, char** argv) {
  signal(SIGINT, on_interrupt);
  signal(SIGTERM, on_interrupt);
  return Run(parse_options(argc, argv)).main();
}
