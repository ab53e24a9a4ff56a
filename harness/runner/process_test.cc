// harness/runner/process_test.cc: child processes (harness/runner/process.h): a child's peak RSS
// is its own, the environment it is given, a program that cannot run; and what counts as another
// benchmark running (harness/common/proc.h).
//   build/harness_test --gtest_filter='Proc*'
#include "harness/runner/process.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "harness/common/proc.h"
#include "harness/harness_test.h"

namespace {

// A child of this test that runs sleep under the name `program` (its argv[0], what
// /proc/<pid>/cmdline shows), returned once it has exec'd (at most 5 s: a loaded machine).
pid_t start_named(const std::string& program) {
  const pid_t pid = fork();
  if (pid == 0) {
    execl("/bin/sleep", program.c_str(), "30", static_cast<char*>(nullptr));
    _exit(127);
  }
  for (int tries = 0; tries < 500; tries++) {
    const std::string cmdline = bp::read_proc_file("/proc/" + std::to_string(pid) + "/cmdline");
    if (cmdline.substr(0, cmdline.find('\0')) == program) break;
    usleep(10 * 1000);
  }
  return pid;
}

// Every backend's program is another benchmark unless it descends from the runner (its child, or
// a child of that child, named bench_run until its exec); other programs are not. Seen from a
// sibling of theirs, this test's children are another run's.
TEST(Proc, EveryBackendProgramIsAnotherBenchmark) {
  std::vector<std::pair<std::string, pid_t>> started;
  for (const char* name : {"/x/bench_run", "/x/bench_engine", "/x/bench_compiled",
                           "/x/bench_libtorch", "/x/pytorch_bench.py", "/x/bench_other"})
    started.push_back({name, start_named(name)});
  const pid_t sibling = start_named("/x/observer");
  const std::vector<std::string> others = bp::proc_other_benchmarks(sibling);
  EXPECT_TRUE(bp::proc_descends_from(started[0].second, getpid()));
  EXPECT_FALSE(bp::proc_descends_from(started[0].second, sibling));
  const std::vector<std::string> mine = bp::proc_other_benchmarks(getpid());
  for (const auto& [name, pid] : started) {
    const std::string seen = std::to_string(pid) + " " + name.substr(3);
    const bool listed = std::find(others.begin(), others.end(), seen) != others.end();
    EXPECT_EQ(listed, name != "/x/bench_other") << seen;
    EXPECT_EQ(std::find(mine.begin(), mine.end(), seen), mine.end()) << seen << " is our child";
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
  }
  kill(sibling, SIGKILL);
  waitpid(sibling, nullptr, 0);
}

// Another run's process that ends while this one reads its /proc files is no error (a read of
// them fails with ESRCH then, and a std::ifstream threw it: bench_run ended on SIGABRT).
TEST(Proc, AProcessThatEndsMidReadIsNoError) {
  const pid_t pid = start_named("bench_engine");
  ASSERT_GT(pid, 0);
  const std::string cmdline = "/proc/" + std::to_string(pid) + "/cmdline";
  const int fd = open(cmdline.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  EXPECT_EQ(bp::read_to_end(fd), "");
  close(fd);
  EXPECT_EQ(bp::read_proc_file(cmdline), "");
  EXPECT_EQ(bp::proc_parent_of(pid), 0);
}

// A wrapper names a benchmark in its arguments and is none itself; Python runs the driver.
TEST(Proc, AWrapperIsNoBenchmark) {
  using V = std::vector<std::string>;
  EXPECT_EQ(bp::benchmark_program_of(V{"timeout", "600", "build/bench_run", "--out", "r"}), "");
  EXPECT_EQ(bp::benchmark_program_of(V{"/bin/bash", "-c", "build/bench_run --out r"}), "");
  EXPECT_EQ(bp::benchmark_program_of(V{"/usr/bin/time", "-v", "build/bench_engine"}), "");
  EXPECT_EQ(bp::benchmark_program_of(V{"build/bench_run", "--out", "r"}), "bench_run");
  EXPECT_EQ(bp::benchmark_program_of(V{"/usr/bin/python3", "-u", "/s/pytorch_bench.py", "--x"}),
            "pytorch_bench.py");
  EXPECT_EQ(bp::benchmark_program_of(V{"/usr/bin/python3", "/s/other.py", "pytorch_bench.py"}), "");
}

// The pages returned before exec are every page outside the kept ranges, also in a mapping that
// holds a kept address: the kernel merges neighbouring anonymous mappings, and the fresh one exec
// needs had shared a mapping with the runner's 96 MB in about one child in a hundred.
TEST(Process, PagesAroundAKeptRangeInOneMappingAreReturned) {
  constexpr size_t kPage = 4096, kPages = 64;
  char* m = static_cast<char*>(
      mmap(nullptr, kPages * kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(m, MAP_FAILED);
  std::fill(m, m + kPages * kPage, 1);
  const uintptr_t base = uintptr_t(m);
  // keep pages 10-12 (from the middle of page 10) and 40 (one byte): the rest of the mapping goes
  const bp::KeptRange keep[] = {{base + 10 * kPage + 100, base + 13 * kPage},
                                {base + 40 * kPage + 7, base + 40 * kPage + 8}};
  std::string maps = fmt::format("{:x}-{:x} rw-p 00000000 00:00 0 \n", base, base + kPages * kPage);
  bp::return_private_pages(maps.data(), keep, std::size(keep));
  std::vector<int> kept;
  for (size_t p = 0; p < kPages; p++)
    if (m[p * kPage] == 1 && m[p * kPage + kPage - 1] == 1) kept.push_back(int(p));
  EXPECT_EQ(kept, (std::vector<int>{10, 11, 12, 40}));
  munmap(m, kPages * kPage);
}

// A backend's peak RSS is its own: not the copy of the runner that fork() made, however large
// the runner has grown (exec records the copy's high-water mark, which wait4 reports).
TEST(Process, AChildsPeakIsItsOwnNotTheRunners) {
  std::vector<char> held(size_t(96) << 20, 1);  // the runner holding 96 MB, every page touched
  const std::string log = ::testing::TempDir() + "process_test.log";
  bp::Child child({"/bin/sh", "-c", "true"}, log, 10, {}, 0);
  const bp::ProcessResult r = child.finish();
  EXPECT_TRUE(r.ok()) << r.failure();
  std::printf("  /bin/sh's peak RSS %.1f MB, with the runner holding %zu MB (limit 16 MB)\n",
              double(r.max_rss_bytes) / 1e6, held.size() >> 20);
#if !defined(__SANITIZE_ADDRESS__)  // ASan's pages cannot be returned (harness/runner/process.h)
  EXPECT_LT(r.max_rss_bytes, int64_t(16) << 20);
#endif
  EXPECT_EQ(held[held.size() / 2], 1) << "the runner's own memory is untouched";
  // the variables given replace the runner's of the same name: once each, in env's own listing
  setenv("BP_PROCESS_TEST", "the runner's own", 1);
  const std::string env_log = ::testing::TempDir() + "process_env.log";
  EXPECT_TRUE(bp::Child({"/usr/bin/env"}, env_log, 10, {"BP_PROCESS_TEST=given"}, 0).finish().ok());
  unsetenv("BP_PROCESS_TEST");
  std::ifstream env_in(env_log);
  std::vector<std::string> values;
  for (std::string line; std::getline(env_in, line);)
    if (line.rfind("BP_PROCESS_TEST=", 0) == 0) values.push_back(line);
  EXPECT_EQ(values, std::vector<std::string>{"BP_PROCESS_TEST=given"});
  // a program that cannot run says so in its log, in one line
  bp::Child missing({"/no/such/program"}, log, 10, {}, 0);
  EXPECT_EQ(missing.finish().exit_code, 127);
  std::ifstream in(log);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("cannot run /no/such/program: no such file\n"), std::string::npos) << text;
}

}  // namespace
