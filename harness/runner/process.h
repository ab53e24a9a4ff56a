// harness/runner/process.h: running backend processes (and git) from bench_run, without a shell.
//
// Every child runs from an argument vector (execv): no user string is ever parsed by a shell. A
// backend process runs in its own process group, so that a timeout or Ctrl-C kills it with
// everything it started; its stdout and stderr go to a log file that starts with the command line,
// so any process of a run can be repeated by hand; it dies with the runner, however the runner
// dies. Its peak RSS comes from wait4's rusage: the child's own high-water mark, as the kernel
// saw it. Several may be alive at once, taking turns (harness/common/protocol.h, --take_turns): a
// Child started with turns gets a pipe to say "ready" on (fd 4) and one to hear "go" on (fd 3).
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "harness/common/proc.h"
#include "harness/common/text.h"
#include "harness/runner/background.h"

namespace bp {

// A launcher's rank as the runner found it at the row's timeout, before it asked where it was.
struct RankAtTimeout {
  long pid = 0;
  std::string rank;  // OMPI_COMM_WORLD_RANK (mpirun) or RANK (torchrun); "" if neither
  char state = 0;    // proc_state_of: T or t, stopped, cannot answer
};

struct ProcessResult {
  std::vector<RankAtTimeout> ranks_at_timeout;  // asks_children_ only
  int exit_code = -1, signal = 0;
  bool timed_out = false, started = true, interrupted = false;
  double wall_seconds = 0;
  int64_t max_rss_bytes = 0;
  bool ok() const { return started && !timed_out && signal == 0 && exit_code == 0; }
  std::string failure() const {
    if (!started) return "could not start";
    if (interrupted) return "interrupted (Ctrl-C or SIGTERM to bench_run)";
    if (timed_out) return "timed out";
    if (signal)
      return "killed by signal " + std::to_string(signal) + " (" + strsignal(signal) + ")";
    return "exit code " + std::to_string(exit_code);
  }
};

// The process groups of the running children, for the signal handler; 0 marks a free slot.
inline constexpr int kMaxChildren = 16;
inline volatile sig_atomic_t g_child_groups[kMaxChildren] = {};
// The signal that interrupted the run (SIGINT, SIGTERM), 0 while none did.
inline volatile sig_atomic_t g_interrupted = 0;

// Ctrl-C or SIGTERM: every backend process dies at once with all it started; the runner sees
// them end, stops starting new ones, and writes what finished (bench_run's main installs it).
inline void interrupt_children(int sig) {
  g_interrupted = sig;
  for (int i = 0; i < kMaxChildren; i++)
    if (g_child_groups[i] > 0) kill(-g_child_groups[i], SIGKILL);
}

// What exec needs, in one fresh private mapping that survives the pages returned before exec:
// argv, the runner's environment with `env` replacing what it names, and /proc/self/maps.
struct ExecImage {
  char** args = nullptr;
  char** envp = nullptr;
  char* maps = nullptr;  // "start-end perms offset dev inode [path]" lines, NUL-terminated
  void* region = nullptr;
  size_t region_bytes = 0;
};

inline ExecImage lay_out_exec_image(const std::vector<std::string>& argv,
                                    const std::vector<std::string>& env) {
  std::vector<const char*> vars;
  for (char** e = environ; *e; e++) {
    const std::string_view var = *e, name = var.substr(0, var.find('=') + 1);
    if (std::none_of(env.begin(), env.end(), [&](const std::string& x) {
          return std::string_view(x).substr(0, name.size()) == name;
        }))
      vars.push_back(*e);
  }
  for (const std::string& e : env) vars.push_back(e.c_str());
  constexpr size_t kMapsBytes = size_t(1) << 20;
  size_t bytes = kMapsBytes + (argv.size() + vars.size() + 2) * sizeof(char*);
  for (const std::string& a : argv) bytes += a.size() + 1;
  for (const char* v : vars) bytes += std::strlen(v) + 1;
  void* region = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (region == MAP_FAILED) return {};
  ExecImage image;
  image.region = region, image.region_bytes = bytes;
  image.args = static_cast<char**>(region);
  image.envp = image.args + argv.size() + 1;
  char* text = reinterpret_cast<char*>(image.envp + vars.size() + 1);
  auto copy = [&text](const char* from, size_t n) {
    char* to = text;
    std::memcpy(to, from, n + 1);
    text += n + 1;
    return to;
  };
  for (size_t i = 0; i < argv.size(); i++) image.args[i] = copy(argv[i].c_str(), argv[i].size());
  image.args[argv.size()] = nullptr;
  for (size_t i = 0; i < vars.size(); i++) image.envp[i] = copy(vars[i], std::strlen(vars[i]));
  image.envp[vars.size()] = nullptr;
  image.maps = text;
  size_t got = 0;
  if (const int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC); fd >= 0) {
    for (ssize_t n; got + 1 < kMapsBytes && (n = read(fd, text + got, kMapsBytes - 1 - got)) > 0;)
      got += size_t(n);
    close(fd);
  }
  image.maps[got] = '\0';
  return image;
}

// Addresses [start, end) that must survive the pages returned before exec.
struct KeptRange {
  uintptr_t start, end;
};

// Returns the pages of every private anonymous mapping of `maps` outside the `keep` ranges
// (MADV_DONTNEED: in a child of fork() the parent's pages are untouched). Page by range, not
// mapping by mapping: the kernel merges neighbouring anonymous mappings, so the fresh one exec
// needs can share a mapping with the runner's largest allocation. Raw system calls only.
inline void return_private_pages(char* maps, const KeptRange* keep, size_t num_keep) {
  constexpr uintptr_t kPage = 4096;
  auto unkept = [&](uintptr_t from, uintptr_t end) {  // madvise whatever keep does not cover
    while (from < end) {
      for (bool moved = true; moved;) {
        moved = false;
        for (size_t k = 0; k < num_keep; k++)
          if (keep[k].start <= from && from < keep[k].end)
            from = (keep[k].end + kPage - 1) & ~(kPage - 1), moved = true;
      }
      if (from >= end) return;
      uintptr_t to = end;
      for (size_t k = 0; k < num_keep; k++)
        if (keep[k].start > from && keep[k].start < to) to = keep[k].start & ~(kPage - 1);
      if (to > from) syscall(SYS_madvise, from, to - from, MADV_DONTNEED);
      from = to > from ? to : from + kPage;
    }
  };
  for (char* line = maps; *line;) {
    char* next = std::strchr(line, '\n');
    if (next) *next = '\0';
    char* cursor = line;
    const uintptr_t start = std::strtoull(cursor, &cursor, 16);
    const uintptr_t end = std::strtoull(cursor + 1, &cursor, 16);
    const bool private_rw = std::strncmp(cursor, " rw-p", 5) == 0;
    int field = 0;  // the path follows the fifth field
    for (char* c = cursor; *c && field < 5; c++)
      if (*c == ' ' && c[1] != ' ') field++, cursor = c + 1;
    const bool anonymous = field < 5 || *cursor == '\0' || std::strcmp(cursor, "[heap]") == 0;
    if (private_rw && anonymous) unkept(start, end);
    if (!next) break;
    line = next + 1;
  }
}

// "cannot run PATH: why" on stderr and exit 127, without stdio or strerror's locale.
[[noreturn]] inline void exit_cannot_run(const char* path, int error) {
  const char* why = error == ENOENT ? "no such file" : error == EACCES ? "permission denied" : "";
  char number[16];
  int at = int(sizeof number) - 1;
  number[at] = '\0';
  for (int e = error; at > 0 && (e > 0 || at == int(sizeof number) - 1); e /= 10)
    number[--at] = char('0' + e % 10);
  const char* const parts[] = {"cannot run ",           path, ": ", why, *why ? "" : "errno ",
                               *why ? "" : number + at, "\n"};
  for (const char* part : parts) {
    size_t n = 0;
    while (part[n]) n++;
    if (syscall(SYS_write, 2, part, n) < 0) break;
  }
  syscall(SYS_exit_group, 127);
  __builtin_unreachable();
}

// Execs argv with `env` added from a child of fork(), so that its peak RSS is its own. The child
// holds a copy of the runner's private memory, and exec records the copy's high-water mark in the
// peak that wait4 reports: every backend would seem to need the runner's size. So what exec needs
// moves to a fresh mapping, every other private anonymous page of the copy is returned, the
// high-water mark restarts (clear_refs 5), then exec. If exec fails it says why in one line and
// exits with 127; it returns (for the caller to exit) only if it could not start at all.
inline void exec_with_own_peak(const std::vector<std::string>& argv,
                               const std::vector<std::string>& env) {
  const ExecImage image = lay_out_exec_image(argv, env);
  if (!image.region) return;
  // Kept: this stack around here, the fresh mapping, and the thread's control block and static
  // TLS (errno, the stack protector's canary), which lie below and at the thread pointer.
  static thread_local char tls_marker;
  const char on_stack = 0;
  const uintptr_t here = uintptr_t(&on_stack), tls = uintptr_t(&tls_marker),
                  tp = uintptr_t(__builtin_thread_pointer()), region = uintptr_t(image.region);
  constexpr uintptr_t kStack = 256 << 10, kTls = 256 << 10;
  const KeptRange keep[] = {{here - kStack, here + kStack},
                            {region, region + image.region_bytes},
                            {std::min(tls, tp) - kTls, std::max(tls, tp) + kTls}};
  // After the first page is returned, only raw system calls: a libc function called for the
  // first time would be bound by the dynamic loader, whose tables are among those pages. Under
  // AddressSanitizer nothing is returned: its shadow and thread state are such pages too (and no
  // peak is measured in that build).
  syscall(SYS_getpid);
#if !defined(__SANITIZE_ADDRESS__)
  return_private_pages(image.maps, keep, std::size(keep));
#endif
  if (const long fd = syscall(SYS_open, "/proc/self/clear_refs", O_WRONLY | O_CLOEXEC); fd >= 0) {
    if (syscall(SYS_write, fd, "5", 1) != 1) {
    }
    syscall(SYS_close, fd);
  }
  syscall(SYS_execve, image.args[0], image.args, image.envp);
  exit_cannot_run(image.args[0], errno);
}

// One child process: started, then (taking turns, if it does) waited for.
class Child {
 public:
  enum class Turn { ready, ended, timed_out };

  // Runs argv with `env` added, stdout and stderr appended to `log` after a first line with the
  // command; its group is killed `timeout` seconds after the start. `memory_limit` (bytes, 0:
  // none) caps its address space (RLIMIT_AS): an allocation beyond it is refused, which the
  // backend reports as out of memory, rather than the machine swapping or the kernel killing at
  // random.
  Child(const std::vector<std::string>& argv, const std::string& log, double timeout,
        const std::vector<std::string>& env, int64_t memory_limit, bool takes_turns = false)
      : start_(std::chrono::steady_clock::now()), timeout_(timeout) {
    if (FILE* f = std::fopen(log.c_str(), "w")) {
      std::fprintf(f, "$ %s\n", command_line(argv).c_str());
      std::fclose(f);
    }
    int go[2] = {-1, -1}, ready[2] = {-1, -1};  // runner -> child, child -> runner
    auto close_all = [&] {
      for (int fd : {go[0], go[1], ready[0], ready[1]})
        if (fd >= 0) close(fd);
    };
    for (int i = 0; i < kMaxChildren && slot_ < 0; i++)
      if (g_child_groups[i] == 0) slot_ = i;
    // Not started (finish() says so): the runner never has this many alive, or no pipe or fork.
    if (slot_ < 0 || (takes_turns && (pipe2(go, O_CLOEXEC) != 0 || pipe2(ready, O_CLOEXEC) != 0))) {
      close_all();
      return;
    }
    const pid_t parent = getpid();
    pid_ = fork();
    if (pid_ < 0) {
      close_all();
      return;
    }
    if (pid_ == 0) {
      setpgid(0, 0);
      // A runner killed outright (SIGKILL: no handler runs) takes its backend with it.
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(127);
      if (memory_limit > 0) {
        const rlimit cap{rlim_t(memory_limit), rlim_t(memory_limit)};
        setrlimit(RLIMIT_AS, &cap);
      }
      if (takes_turns) {  // to fds 3 and 4 by way of high ones: a pipe end may already be 3 or 4
        const int in = fcntl(go[0], F_DUPFD_CLOEXEC, 10),
                  out = fcntl(ready[1], F_DUPFD_CLOEXEC, 10);
        dup2(in, 3), dup2(out, 4);  // the copies lose O_CLOEXEC: the backend inherits them
      }
      const int fd = open(log.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
      if (fd >= 0) dup2(fd, 1), dup2(fd, 2);
      signal(SIGPIPE, SIG_DFL);  // the runner ignores it (a child gone mid-turn), exec keeps that
      exec_with_own_peak(argv, env);  // returns only if it had no memory to start with
      _exit(127);
    }
    setpgid(pid_, pid_);
    g_child_groups[slot_] = pid_;
    if (g_interrupted) kill_group();  // the signal came before the handler could see this child
    if (takes_turns) {
      close(go[0]), close(ready[1]);
      go_fd_ = go[1], ready_fd_ = ready[0];
    }
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  ~Child() {
    if (pid_ > 0 && !reaped_) kill_group(), finish();
    close_pipes();
  }

  // Taking turns: blocks until the child says it is ready for its next timed loop, or has ended
  // (its pipe closed: it finished, crashed or was killed), or its time is up (then it is killed).
  // Its time is its own: while it waits for its turn, its timeout does not run, so a backend that
  // hangs costs the others nothing but the wait.
  Turn wait_ready() {
    if (ready_fd_ < 0) return Turn::ended;
    while (true) {
      const double left = timeout_ - own_seconds();
      if (left <= 0) {
        timed_out_ = true;
        kill_group();
        close_pipes();
        return Turn::timed_out;
      }
      pollfd p{ready_fd_, POLLIN, 0};
      const int n = poll(&p, 1, int(std::min(left, 1.0) * 1000) + 1);
      if (n <= 0) continue;  // time passing, or a signal (the handler killed the child: EOF next)
      char c;
      const ssize_t got = read(ready_fd_, &c, 1);
      if (got <= 0) {
        if (got < 0 && errno == EINTR) continue;
        close_pipes();
        return Turn::ended;
      }
      if (c == '\n') {
        waiting_since_ = std::chrono::steady_clock::now();
        return Turn::ready;
      }
    }
  }
  // Its turn: it runs one timed loop, then says ready again (or ends).
  void go() {
    stop_waiting();
    turns_.push_back(std::chrono::steady_clock::now());
    if (go_fd_ >= 0 && write(go_fd_, "go\n", 3) != 3) close_pipes();
  }

  // Whether it has ended, without waiting (it is killed if its time is up or the run was
  // interrupted): several children can then be watched at once, each finish()ed once it ended.
  bool ended() {
    if (pid_ <= 0 || reaped_) return true;
    if (wait4(pid_, &status_, WNOHANG, &usage_) == pid_) {
      reaped_ = true;
      wall_seconds_ = elapsed();
      g_child_groups[slot_] = 0;
      return true;
    }
    if (g_interrupted) kill_group();
    if (own_seconds() > timeout_ && !timed_out_) {
      timed_out_ = true;
      if (asks_children_) {  // data-parallel ranks: each says where it is, in the log
        for (long child : proc_children_of(pid_)) {
          std::string rank = proc_environ_value(child, "OMPI_COMM_WORLD_RANK");
          if (rank.empty()) rank = proc_environ_value(child, "RANK");
          ranks_at_timeout_.push_back({child, rank, proc_state_of(child)});
          kill(pid_t(child), SIGUSR1);
        }
        std::this_thread::sleep_for(std::chrono::seconds(1));
      }
      kill_group();
    }
    return false;
  }
  // At its timeout, before it is killed, its children (a launcher's ranks) get SIGUSR1, and a
  // second to answer it (harness/driver/rank_progress.h).
  void ask_children_at_timeout() { asks_children_ = true; }

  // Waits for it to end (killing it when its time is up) and says how it ended.
  ProcessResult finish() {
    ProcessResult r;
    if (pid_ <= 0) {
      r.started = false;
      return r;
    }
    stop_waiting();
    close_pipes();  // a child still waiting for its turn reads end-of-file and stops
    while (!ended()) std::this_thread::sleep_for(std::chrono::milliseconds(timed_out_ ? 1 : 10));
    r.timed_out = timed_out_;
    r.ranks_at_timeout = ranks_at_timeout_;
    r.interrupted = g_interrupted != 0 && !(WIFEXITED(status_) && WEXITSTATUS(status_) == 0);
    r.wall_seconds = wall_seconds_;
    r.max_rss_bytes = int64_t(usage_.ru_maxrss) * 1024;  // Linux reports kilobytes
    if (WIFEXITED(status_)) r.exit_code = WEXITSTATUS(status_);
    if (WIFSIGNALED(status_)) r.signal = WTERMSIG(status_);
    return r;
  }

  // When each of its turns began.
  const std::vector<std::chrono::steady_clock::time_point>& turns() const { return turns_; }

  void kill_group() const {
    if (pid_ > 0 && !reaped_) kill(-pid_, SIGKILL);
  }

 private:
  double elapsed() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }
  double own_seconds() const { return elapsed() - waited_; }
  void stop_waiting() {
    if (waiting_since_ == std::chrono::steady_clock::time_point{}) return;
    waited_ +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - waiting_since_).count();
    waiting_since_ = {};
  }
  void close_pipes() {
    if (go_fd_ >= 0) close(go_fd_);
    if (ready_fd_ >= 0) close(ready_fd_);
    go_fd_ = ready_fd_ = -1;
  }

  std::chrono::steady_clock::time_point start_, waiting_since_{};
  std::vector<std::chrono::steady_clock::time_point> turns_;
  double timeout_, waited_ = 0;  // waited_: seconds it spent ready, waiting for its turn
  double wall_seconds_ = 0;      // from its start to when it was seen to end
  pid_t pid_ = -1;
  int slot_ = -1, go_fd_ = -1, ready_fd_ = -1, status_ = 0;
  rusage usage_{};
  bool reaped_ = false, timed_out_ = false, asks_children_ = false;
  std::vector<RankAtTimeout> ranks_at_timeout_;
};

// One process, start to end.
inline ProcessResult run_process(const std::vector<std::string>& argv, const std::string& log,
                                 double timeout, const std::vector<std::string>& env,
                                 int64_t memory_limit = 0) {
  return Child(argv, log, timeout, env, memory_limit).finish();
}

// The stdout of a short command (its stderr discarded), trailing whitespace removed; "" if it
// could not run or failed.
inline std::string capture_output(const std::vector<std::string>& argv) {
  int fds[2];
  if (pipe(fds) != 0) return "";
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) return close(fds[0]), close(fds[1]), "";
  if (pid == 0) {
    dup2(fds[1], 1), close(fds[0]), close(fds[1]);
    const int null = open("/dev/null", O_WRONLY);
    if (null >= 0) dup2(null, 2), close(null);
    execvp(args[0], args.data());
    _exit(127);
  }
  close(fds[1]);
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) out.append(buf, size_t(n));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return "";
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return out;
}

// Processes started with --take_turns, one turn each in the order they were added, round after
// round, until every one has ended. Nothing is timed before the first turn, so setups may run
// together; but a process that measures something in its setup (engine_multistage's write and
// step times that choose its k, the compiled mode's kernel timings) is started alone: every
// process before it ready, and it ready, before the next starts (add with alone).
class Turns {
 public:
  // `load`: busy processes resumed for this child's turns and paused after them (bench_run
  // --background beside the rows under load); null: none.
  void add(Child& c, bool alone, BackgroundProcesses* load = nullptr) {
    if (alone) all_ready();
    waiting_.push_back({&c, false});
    loads_.push_back(load);
    if (alone) all_ready();
  }
  // Waits until every process added so far is ready for its first turn (or has ended).
  void all_ready() {
    for (; asked_ < waiting_.size(); asked_++)
      waiting_[asked_].second = waiting_[asked_].first->wait_ready() == Child::Turn::ready;
  }
  void take() {
    all_ready();
    for (bool any = true; any && !g_interrupted;) {
      any = false;
      for (size_t i = 0; i < waiting_.size(); i++) {
        auto& [child, ready] = waiting_[i];
        if (!ready || g_interrupted) continue;
        if (loads_[i]) loads_[i]->resume();
        child->go();
        ready = child->wait_ready() == Child::Turn::ready;
        if (loads_[i]) loads_[i]->pause();
        any = true;
      }
    }
  }

 private:
  std::vector<std::pair<Child*, bool>> waiting_;
  std::vector<BackgroundProcesses*> loads_;  // each child's, or null
  size_t asked_ = 0;                         // processes asked whether they are ready
};

}  // namespace bp
