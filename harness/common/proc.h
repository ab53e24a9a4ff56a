// harness/common/proc.h: what the harness reads from /proc about its own process and machine.
//
// Other benchmarks: a timing taken while another benchmark ran on the same 2 cores is not
// comparable, so the runner looks for other benchmark processes (any of kBenchmarkPrograms that
// is not its own child) before each process it starts, and records the load average at the
// start and the end of the run.
//
// Peak RSS of one benchmark: writing "5" to /proc/self/clear_refs resets the kernel's high-water
// mark (VmHWM) to the current RSS (Linux >= 4.0, proc(5)); VmHWM read after the benchmark is then
// that benchmark's peak, setup included. The whole process's peak is the larger of the parent's
// wait4 ru_maxrss and every repetition's VmHWM (harness/runner/results.h): the kernel's ru_maxrss
// follows the reset too, so a peak before the last one (a setup run once, --warm_once: a compile
// that needs more than the steps after it) is only in the counters.
#pragma once

#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <functional>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "harness/common/text.h"

namespace bp {

inline bool proc_reset_peak_rss() {
  FILE* f = std::fopen("/proc/self/clear_refs", "w");
  if (!f) return false;
  const bool ok = std::fputs("5", f) >= 0;
  return std::fclose(f) == 0 && ok;
}

// A "Vm...:  1234 kB" field of /proc/self/status in bytes, or -1 if it cannot be read.
inline int64_t proc_status_bytes(const char* field) {
  FILE* f = std::fopen("/proc/self/status", "r");
  if (!f) return -1;
  char line[256];
  int64_t bytes = -1;
  const size_t len = std::strlen(field);
  while (std::fgets(line, sizeof line, f)) {
    if (std::strncmp(line, field, len) == 0 && line[len] == ':') {
      long long kb = 0;
      if (std::sscanf(line + len + 1, "%lld", &kb) == 1) bytes = kb * 1024;
      break;
    }
  }
  std::fclose(f);
  return bytes;
}
inline int64_t proc_peak_rss_bytes() { return proc_status_bytes("VmHWM"); }

// A "Name:  1234 kB" field of /proc/meminfo in bytes, or -1.
inline int64_t proc_meminfo_bytes(const char* field) {
  std::ifstream in("/proc/meminfo");
  std::string name;
  long long kb;
  while (in >> name >> kb) {
    if (name == std::string(field) + ":") return kb * 1024;
    in.ignore(64, '\n');
  }
  return -1;
}

// The first processor's "key : value" fields of /proc/cpuinfo, in order.
inline std::vector<std::pair<std::string, std::string>> proc_cpuinfo() {
  std::vector<std::pair<std::string, std::string>> out;
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  auto trim = [](std::string t) {
    while (!t.empty() && (t.front() == ' ' || t.front() == '\t')) t.erase(0, 1);
    while (!t.empty() && (t.back() == ' ' || t.back() == '\t')) t.pop_back();
    return t;
  };
  while (std::getline(in, line) && !line.empty()) {  // a blank line ends the first processor
    const size_t colon = line.find(':');
    if (colon != std::string::npos)
      out.emplace_back(trim(line.substr(0, colon)), trim(line.substr(colon + 1)));
  }
  return out;
}

// The CPUs this process may run on (its affinity mask): more threads than this oversubscribe.
// What every rank of one data-parallel run must share: the binary (its path, size and time) and
// the arguments (apps/bench_ranks.cc, apps/bench_libtorch.cc compare it over the ranks).
inline std::string rank_launch_identity(int argc, char** argv) {
  std::string mine;
  char exe[4096];
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  struct stat st {};
  if (n > 0 && stat((exe[n] = 0, exe), &st) == 0) {
    std::tm local{};
    char when[32] = "";
    if (localtime_r(&st.st_mtime, &local)) std::strftime(when, sizeof when, "%F %T", &local);
    mine = std::string(exe) + " (" + std::to_string(st.st_size) + " bytes, " + when + ")";
  }
  for (int i = 1; i < argc; i++) mine += std::string(" ") + argv[i];
  return mine;
}
inline uint64_t fnv1a_hash(std::string_view s) {
  uint64_t hash = 1469598103934665603ull;
  for (unsigned char c : s) hash = (hash ^ c) * 1099511628211ull;
  return hash;
}

// This host's ranks of a data-parallel run, as its launcher says (mpirun, torchrun); else 1.
inline int ranks_on_this_host() {
  for (const char* name : {"OMPI_COMM_WORLD_LOCAL_SIZE", "LOCAL_WORLD_SIZE"})
    if (const char* v = std::getenv(name)) return std::max(1, std::atoi(v));
  return 1;
}
inline int process_cpus() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return 1;
  return std::max(1, CPU_COUNT(&set));
}

// A field of the first processor in /proc/cpuinfo ("model name", "flags", ...), or "unknown".
inline std::string proc_cpu_field(const std::string& field) {
  for (const auto& [key, value] : proc_cpuinfo())
    if (key == field) return value;
  return "unknown";
}
inline std::string proc_cpu_model() { return proc_cpu_field("model name"); }
inline std::string proc_cpu_flags() { return proc_cpu_field("flags"); }

// The first line of a small text file, or `otherwise`.
inline std::string first_line_of(const char* path, const char* otherwise) {
  std::ifstream in(path);
  std::string line;
  return std::getline(in, line) && !line.empty() ? line : otherwise;
}

// What a timing depends on, as the machine reports it, in a fixed order: the processor (vendor,
// family, model and stepping tell Zen 4 from Zen 5 where the model name says "AMD EPYC" for
// both; the flags say which vector units it has), the CPUs this process may run on, frequency
// policy where the VM exposes it, the kernel and the memory. Recorded in every result
// (harness/driver/backend_main.h) and in the run's summary (harness/runner/summary_phase.cc).
inline std::vector<std::pair<std::string, std::string>> proc_environment() {
  const auto cpu = proc_cpuinfo();
  auto field = [&cpu](const char* key) {
    for (const auto& [k, v] : cpu)
      if (k == key) return v;
    return std::string("unknown");
  };
  std::vector<std::pair<std::string, std::string>> env = {
      {"cpu_vendor", field("vendor_id")},    {"cpu_family", field("cpu family")},
      {"cpu_model_number", field("model")},  {"cpu_stepping", field("stepping")},
      {"cpu_microcode", field("microcode")}, {"cpu_flags", field("flags")}};
  cpu_set_t set;
  std::string affinity;
  if (sched_getaffinity(0, sizeof set, &set) == 0)
    for (int c = 0; c < CPU_SETSIZE; c++)
      if (CPU_ISSET(c, &set)) {
        if (!affinity.empty()) affinity += ',';
        affinity += std::to_string(c);
      }
  env.emplace_back("cpus_online", std::to_string(sysconf(_SC_NPROCESSORS_ONLN)));
  env.emplace_back("cpu_affinity", affinity.empty() ? "unknown" : affinity);
  env.emplace_back(
      "cpu_governor",
      first_line_of("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor", "not exposed"));
  env.emplace_back("cpu_boost",
                   first_line_of("/sys/devices/system/cpu/cpufreq/boost", "not exposed"));
  utsname u{};
  env.emplace_back("kernel", uname(&u) == 0 ? std::string(u.release) + " " + u.version : "?");
  env.emplace_back("memory_total_bytes", std::to_string(proc_meminfo_bytes("MemTotal")));
  return env;
}

// What is left to read on `fd`, or what was read before a read failed. Plain read(2): a file of
// another process under /proc fails to read (ESRCH) once that process has ended, and libstdc++'s
// filebuf throws then, whatever the stream's exception mask.
inline std::string read_to_end(int fd) {
  std::string text;
  char buffer[4096];
  for (ssize_t n; (n = read(fd, buffer, sizeof buffer)) > 0;) text.append(buffer, size_t(n));
  return text;
}
// A file of another process under /proc, whole, or what could be read of it ("": it was gone).
inline std::string read_proc_file(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  std::string text = read_to_end(fd);
  close(fd);
  return text;
}

// /proc/<pid>/stat after its command name ("pid (comm) state ppid ...": comm may hold spaces and
// parentheses, so from the last ')'); "" if the process is gone.
inline std::string proc_stat_fields(long pid) {
  const std::string line = read_proc_file("/proc/" + std::to_string(pid) + "/stat");
  const size_t close = line.rfind(')');
  return close == std::string::npos ? "" : line.substr(close + 1);
}
// A process's parent; 0 if it is gone.
inline long proc_parent_of(long pid) {
  long ppid = 0;
  std::sscanf(proc_stat_fields(pid).c_str(), " %*c %ld", &ppid);
  return ppid;
}
// A process's state letter: R running, S sleeping, D in an uninterruptible wait, T stopped by a
// signal, t stopped by a debugger, Z a zombie; 0 if it is gone.
inline char proc_state_of(long pid) {
  char state = 0;
  std::sscanf(proc_stat_fields(pid).c_str(), " %c", &state);
  return state;
}
// `name`'s value in the environment `pid` started with; "" without one (or the process gone).
inline std::string proc_environ_value(long pid, std::string_view name) {
  const std::string env = read_proc_file("/proc/" + std::to_string(pid) + "/environ");
  for (size_t at = 0; at < env.size();) {
    const size_t end = std::min(env.find('\0', at), env.size());
    const std::string_view entry(env.data() + at, end - at);
    if (entry.size() > name.size() && entry.starts_with(name) && entry[name.size()] == '=')
      return std::string(entry.substr(name.size() + 1));
    at = end + 1;
  }
  return "";
}

// The programs whose processes are benchmarks: the runner and every backend's.
inline constexpr std::string_view kBenchmarkPrograms[] = {"bench_run",      "bench_engine",
                                                          "bench_compiled", "bench_libtorch",
                                                          "bench_ranks",    "pytorch_bench.py"};

// A rank dies with the launcher that started it: mpirun puts each rank in a process group of its
// own, so the runner's kill of mpirun's group (a timeout) would otherwise leave the ranks behind.
// Asked of the kernel from the program's .preinit_array (BP_RANK_DIES_WITH_ITS_LAUNCHER), before
// any library's initialisers run: libtorch's take 2-3 s, in which the launcher may be killed, and
// a parent read after that would be whoever adopted the rank. A parent that is no launcher then
// means the launcher is gone already. System calls only: the C++ library is not initialised yet.
inline constexpr const char* kRankLaunchers[] = {"mpirun", "mpiexec", "orterun",
                                                 "orted",  "prterun", "prted"};
// envp: the environment the process started with (libc's own is not set up before its initialiser).
inline void die_with_launcher(char** envp) {
  bool rank = false;
  for (char** e = envp; e && *e && !rank; e++)
    rank = std::strncmp(*e, "OMPI_COMM_WORLD_RANK=", 21) == 0;
  if (!rank) return;  // not a rank of mpirun's
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  char path[48], name[32] = {};
  std::snprintf(path, sizeof path, "/proc/%d/comm", int(getppid()));
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  const ssize_t n = fd >= 0 ? read(fd, name, sizeof name - 1) : -1;
  if (fd >= 0) close(fd);
  if (n > 0 && name[n - 1] == '\n') name[n - 1] = 0;
  for (const char* launcher : kRankLaunchers)
    if (std::strcmp(name, launcher) == 0) return;
  raise(SIGKILL);  // adopted: the launcher died before the line above
}
// The fault `slow-start` (harness/driver/faults.h) stands for a slow library start: 4 s after
// the libraries' initialisers, before main.
inline void fault_slow_start() {
  const char* fault = std::getenv("BACKPROP_BENCH_FAULT");
  if (fault && std::strncmp(fault, "slow-start:", 11) == 0) sleep(4);
}
#define BP_RANK_DIES_WITH_ITS_LAUNCHER                                                          \
  __attribute__((section(".preinit_array"), used)) static void (*bp_preinit_die_with_launcher)( \
      int, char**, char**) = [](int, char**, char** envp) { bp::die_with_launcher(envp); };     \
  __attribute__((constructor)) static void bp_fault_slow_start() { bp::fault_slow_start(); }

// The benchmark program a command line runs ("" for none): its program's name, or for a Python
// interpreter its script's. Only those: a wrapper (`timeout 600 build/bench_run ...`, `bash -c`)
// names a benchmark in its arguments and is none itself.
inline std::string benchmark_program_of(const std::vector<std::string>& argv) {
  auto listed = [](const std::string& path) {
    const std::string base = path.substr(path.rfind('/') + 1);
    return std::find(std::begin(kBenchmarkPrograms), std::end(kBenchmarkPrograms), base) !=
                   std::end(kBenchmarkPrograms)
               ? base
               : std::string();
  };
  if (argv.empty()) return "";
  if (std::string name = listed(argv[0]); !name.empty()) return name;
  const std::string program = argv[0].substr(argv[0].rfind('/') + 1);
  if (program.rfind("python", 0) == 0)
    for (size_t i = 1; i < argv.size(); i++)
      if (!argv[i].empty() && argv[i][0] != '-') return listed(argv[i]);
  return "";
}

// Whether `pid` is a descendant of `ancestor` (a child, or a child's child: a process the runner
// forks may fork again before its exec, and until then it is named bench_run too).
inline bool proc_descends_from(long pid, long ancestor) {
  for (long p = proc_parent_of(pid), hops = 0; p > 1 && hops < 64; p = proc_parent_of(p), hops++)
    if (p == ancestor) return true;
  return false;
}

// The processes `pid` started that are alive.
inline std::vector<long> proc_children_of(long pid) {
  std::vector<long> out;
  DIR* proc = opendir("/proc");
  if (!proc) return out;
  while (const dirent* e = readdir(proc)) {
    const long child = std::strtol(e->d_name, nullptr, 10);
    if (child > 0 && proc_parent_of(child) == pid) out.push_back(child);
  }
  closedir(proc);
  return out;
}

// "pid NAME" of every benchmark process on the machine that is not `self`, one of its
// descendants, or one of its ancestors.
inline std::vector<std::string> proc_other_benchmarks(pid_t self) {
  std::vector<long> ancestors;
  for (long p = proc_parent_of(self); p > 1 && ancestors.size() < 64; p = proc_parent_of(p))
    ancestors.push_back(p);
  std::vector<std::string> out;
  DIR* proc = opendir("/proc");
  if (!proc) return out;
  while (const dirent* e = readdir(proc)) {
    const long pid = std::strtol(e->d_name, nullptr, 10);
    if (pid <= 0 || pid == self ||
        std::find(ancestors.begin(), ancestors.end(), pid) != ancestors.end())
      continue;
    const std::string cmdline = read_proc_file(std::string("/proc/") + e->d_name + "/cmdline");
    const std::string name = benchmark_program_of(split(cmdline, '\0'));
    if (!name.empty() && !proc_descends_from(pid, self))
      out.push_back(std::to_string(pid) + " " + name);
  }
  closedir(proc);
  return out;
}

// The process that started `pid`'s run: its highest ancestor (itself included) that is a
// benchmark program, so that a run's backends count as that one run; 0 if `pid` is gone (a
// child that ended between the listing and now).
inline long proc_benchmark_root(long pid) {
  long root = pid;
  if (proc_parent_of(pid) == 0) return 0;
  for (long p = proc_parent_of(pid), hops = 0; p > 1 && hops < 64; p = proc_parent_of(p), hops++) {
    const std::string cmdline = read_proc_file("/proc/" + std::to_string(p) + "/cmdline");
    if (benchmark_program_of(split(cmdline, '\0')).empty()) break;
    root = p;
  }
  return root;
}

// This process's resident memory now (VmRSS), in bytes.
inline size_t proc_resident_bytes() {
  return size_t(std::max<int64_t>(0, proc_status_bytes("VmRSS")));
}

// Runs `work` in a child process (fork) and returns what it returned, sent back through a pipe;
// nothing if the child could not be made or did not exit 0. The child shares nothing afterwards
// with this process: what `work` loads (a library) never enters it. Threads are not forked: work
// must restart any it needs.
inline std::optional<std::string> run_in_child(const std::function<std::string()>& work) {
  int fds[2];
  if (pipe(fds) != 0) return std::nullopt;
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    const std::string out = work();
    for (size_t at = 0; at < out.size();) {
      const ssize_t n = write(fds[1], out.data() + at, out.size() - at);
      if (n <= 0) _exit(1);
      at += size_t(n);
    }
    _exit(0);
  }
  close(fds[1]);
  std::string in;
  char buf[4096];
  for (ssize_t n; pid > 0 && (n = read(fds[0], buf, sizeof buf)) != 0;)
    if (n > 0)
      in.append(buf, size_t(n));
    else if (errno != EINTR)
      break;
  close(fds[0]);
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return std::nullopt;
  return in;
}

inline double load_average_1min() {
  double load[1] = {-1};
  return getloadavg(load, 1) == 1 ? load[0] : -1;
}

}  // namespace bp
