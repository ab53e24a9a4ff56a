// harness/process.h: running a backend process (or git) from bench_run, without a shell.
//
// Every child runs from an argument vector (execv): no user string is ever parsed by a shell. A
// backend process runs in its own process group, so that a timeout or Ctrl-C kills it with
// everything it started; its stdout and stderr go to a log file that starts with the command line,
// so any process of a run can be repeated by hand; it dies with the runner, however the runner
// dies. Its peak RSS comes from wait4's rusage: the child's own high-water mark, as the kernel
// saw it.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "harness/text.h"

namespace bp {

struct ProcessResult {
  int exit_code = -1, signal = 0;
  bool timed_out = false, started = true;
  double wall_seconds = 0;
  int64_t max_rss_bytes = 0;
  bool ok() const { return started && !timed_out && signal == 0 && exit_code == 0; }
  std::string failure() const {
    if (!started) return "could not start";
    if (timed_out) return "timed out";
    if (signal)
      return "killed by signal " + std::to_string(signal) + " (" + strsignal(signal) + ")";
    return "exit code " + std::to_string(exit_code);
  }
};

// The process group of the running child, for the signal handler (bench_run's main installs it).
inline volatile sig_atomic_t g_child_group = 0;

// Ctrl-C stops the backend process too; files already written stay.
inline void kill_child_and_reraise(int sig) {
  if (g_child_group > 0) kill(-g_child_group, SIGKILL);
  signal(sig, SIG_DFL);
  raise(sig);
}

// Runs argv with `env` added, stdout and stderr appended to `log` after a first line with the
// command; kills the process group after `timeout` seconds. `memory_limit` (bytes, 0: none) caps
// the child's address space (RLIMIT_AS): an allocation beyond it is refused, which the backend
// reports as out of memory, rather than the machine swapping or the kernel killing at random.
inline ProcessResult run_process(const std::vector<std::string>& argv, const std::string& log,
                                 double timeout, const std::vector<std::string>& env,
                                 int64_t memory_limit = 0) {
  ProcessResult r;
  if (FILE* f = std::fopen(log.c_str(), "w")) {
    std::fprintf(f, "$ %s\n", command_line(argv).c_str());
    std::fclose(f);
  }
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const auto start = std::chrono::steady_clock::now();
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    r.started = false;
    return r;
  }
  if (pid == 0) {
    setpgid(0, 0);
    // A runner killed outright (SIGKILL: no handler runs) takes its backend with it.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    if (memory_limit > 0) {
      const rlimit cap{rlim_t(memory_limit), rlim_t(memory_limit)};
      setrlimit(RLIMIT_AS, &cap);
    }
    const int fd = open(log.c_str(), O_WRONLY | O_APPEND);
    if (fd >= 0) dup2(fd, 1), dup2(fd, 2), close(fd);
    for (const std::string& e : env) putenv(const_cast<char*>(e.c_str()));
    execv(args[0], args.data());
    std::fprintf(stderr, "cannot run %s: %s\n", args[0], std::strerror(errno));
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

}  // namespace bp
