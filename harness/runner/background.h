// harness/runner/background.h: --background N[,NICE], busy processes beside a run, as a user's
// machine has other work beside the benchmark (issue 59: threads that hold on a busy machine).
//
// Each is a child of bench_run that spins (no exec, no memory of its own, every inherited file
// closed), at the stated nice level, in the runner's process group: Ctrl-C at the terminal
// reaches it as it reaches the runner, and its parent-death signal kills it however the runner
// ends (SIGKILL, a crash). The runner stops them with SIGSTOP between the turns they are not
// meant for (a study's rows under load: BackendSpec::under_load) and kills and reaps them when
// the run ends. Every result says which load it ran beside (its context's "background").
//   Tests: harness/tests/test_run.py (-k background).
#pragma once

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <optional>
#include <string>
#include <vector>

#include "harness/common/text.h"

namespace bp {

// What --background asks: how many busy processes, at which nice level.
struct BackgroundLoad {
  int processes = 0, nice = 0;
  bool any() const { return processes > 0; }
  // As the results and the summary say it; "none" without any.
  std::string text() const {
    return any() ? fmt::format("{} busy process{} at nice {}", processes,
                               processes == 1 ? "" : "es", nice)
                 : "none";
  }
};

inline constexpr int kMostBackground = 64;

// "N" or "N,NICE": N from 1 to 64, NICE from 0 to 19 (default 0: each takes a whole CPU from the
// benchmark as an equal). nullopt on anything else.
inline std::optional<BackgroundLoad> parse_background(const std::string& text) {
  const std::vector<std::string> parts = fields(text, ',');
  if (parts.empty() || parts.size() > 2) return std::nullopt;
  const std::optional<int64_t> n = parse_whole(parts[0]);
  const std::optional<int64_t> nice = parts.size() == 2 ? parse_whole(parts[1]) : int64_t(0);
  if (!n || *n < 1 || *n > kMostBackground || !nice || *nice < 0 || *nice > 19) return std::nullopt;
  return BackgroundLoad{int(*n), int(*nice)};
}

// The busy processes of one run: started stopped or running, paused and resumed, killed and
// reaped by the destructor.
class BackgroundProcesses {
 public:
  BackgroundProcesses() = default;
  // Starts load.processes of them, running or stopped (each once it has set its parent-death
  // signal and closed what it inherited).
  BackgroundProcesses(const BackgroundLoad& load, bool running) {
    const pid_t parent = getpid();
    for (int i = 0; i < load.processes; i++) {
      int ready[2];
      if (pipe2(ready, O_CLOEXEC) != 0) break;
      const pid_t pid = fork();
      if (pid == 0) close(ready[0]), spin(parent, load.nice, ready[1]);
      close(ready[1]);
      if (pid < 0) {
        close(ready[0]);
        break;
      }
      // stopped only once it is ready: one stopped before its parent-death signal was set would
      // outlive a runner killed then
      char byte;
      while (read(ready[0], &byte, 1) < 0 && errno == EINTR) {
      }
      close(ready[0]);
      pids_.push_back(pid);
      if (!running) kill(pid, SIGSTOP);
    }
    running_ = running;
  }
  BackgroundProcesses(const BackgroundProcesses&) = delete;
  BackgroundProcesses& operator=(const BackgroundProcesses&) = delete;
  BackgroundProcesses(BackgroundProcesses&& o) noexcept { *this = std::move(o); }
  BackgroundProcesses& operator=(BackgroundProcesses&& o) noexcept {
    end();
    pids_ = std::move(o.pids_), running_ = o.running_;
    o.pids_.clear();
    return *this;
  }
  ~BackgroundProcesses() { end(); }

  void resume() { signal_all(SIGCONT, true); }
  void pause() { signal_all(SIGSTOP, false); }
  int started() const { return int(pids_.size()); }

  // Kills and reaps every one (a stopped one too: SIGKILL needs no SIGCONT).
  void end() {
    for (pid_t pid : pids_) kill(pid, SIGKILL);
    for (pid_t pid : pids_)
      while (waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
      }
    pids_.clear();
  }

 private:
  void signal_all(int sig, bool running) {
    if (running_ == running) return;
    for (pid_t pid : pids_) kill(pid, sig);
    running_ = running;
  }
  // The child: dies with the runner, keeps no file of it open (a backend's pipe end held here
  // would hide that backend's end), takes the signals' default actions, and spins.
  [[noreturn]] static void spin(pid_t parent, int nice, int ready) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(0);  // the runner died before the line above
    prctl(PR_SET_NAME, "bp_background");
    for (int sig : {SIGINT, SIGTERM, SIGPIPE}) signal(sig, SIG_DFL);
    if (write(ready, "r", 1) != 1) _exit(0);
    close_range(3, ~0U, 0);
    setpriority(PRIO_PROCESS, 0, nice);
    volatile uint64_t spins = 0;
    for (;;) spins = spins + 1;
  }

  std::vector<pid_t> pids_;
  bool running_ = false;
};

}  // namespace bp
