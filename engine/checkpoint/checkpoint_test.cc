// engine/checkpoint/checkpoint_test.cc: backpropagation through time in bounded memory
// (engine/checkpoint/checkpoint.h) against store-all, on the recurrent workload itself
// (workloads/recurrent.h).
//
// Revolve and multistage must give bitwise the gradients of autograd over the unrolled sequence,
// at every length and snapshot count tried, at every interval, over several training steps (so
// that nothing of one sequence leaks into the next); Revolve must advance exactly t(n, c) steps
// and never hold more than c snapshots; multistage must write one record per interval and read
// back all but the last. Its failures (a missing directory, a record changed on disk, a file that
// cannot grow) must each be one line that stops the run, and bad c or k one line and exit 2.
#include "engine/checkpoint/checkpoint.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "engine/backend.h"
#include "workloads/recurrent.h"

namespace {

// Under AddressSanitizer (make sanitize) fewer lengths and counts: the same code paths, a fifth of
// the time.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
std::vector<int64_t> lengths(std::vector<int64_t> all, std::vector<int64_t> sanitized) {
  return kSanitized ? sanitized : all;
}

bp::Corpus test_corpus() {
  const std::string text =
      "it was the best of times, it was the worst of times, it was the age of wisdom, it was the "
      "age of foolishness, it was the epoch of belief, it was the epoch of incredulity, it was "
      "the season of light, it was the season of darkness, it was the spring of hope, it was the "
      "winter of despair.\n";
  bp::Corpus c;
  uint8_t id_of[256] = {};
  bool present[256] = {};
  for (unsigned char ch : text) present[ch] = true;
  for (int b = 0; b < 256; b++) id_of[b] = present[b] ? uint8_t(c.vocab_size++) : 0;
  for (unsigned char ch : text) c.tokens.push_back(id_of[ch]);
  return c;
}
const bp::Corpus& corpus() {
  static const bp::Corpus c = test_corpus();
  return c;
}

std::string scratch_dir() {
  const char* tmp = std::getenv("TMPDIR");
  return tmp && *tmp ? tmp : "/var/tmp";
}

// What one strategy produced over `steps` training steps: the last step's loss and gradients,
// and its counters.
struct Outcome {
  double loss = 0;
  std::vector<std::vector<float>> grads;
  bp::BpttStats stats;
};

template <class W>
Outcome train(int64_t n, const bp::ThroughTime& how, int steps = 1,
              std::function<void(bp::BpttRunner&)> before = nullptr) {
  bp::EngineBackend be;
  be.use_through_time(how);
  if (before && be.bptt) before(*be.bptt);
  typename W::template Run<bp::EngineBackend> run(be, n, corpus());
  Outcome out;
  for (int s = 0; s < steps; s++) {
    be.zero_grad();
    out.loss = run.forward_backward(be, 0);
    if (s + 1 == steps) {
      for (size_t i = 0; i < run.params.size(); i++) {
        out.grads.emplace_back(run.param_sizes[i]);
        be.read_grad(run.params[i], out.grads.back());
      }
    }
    be.optimizer_step();
    be.end_step();
  }
  if (be.bptt) out.stats = be.bptt->stats();
  return out;
}

bp::ThroughTime strategy(const char* name, int32_t c, int64_t k = 0) {
  bp::ThroughTime t;
  t.strategy = name, t.snapshots = c, t.interval = k, t.directory = scratch_dir();
  return t;
}

// Every gradient bitwise equal (memcmp: -0 and 0 differ, NaNs must match bit for bit); the loss,
// summed in another order, within a relative 1e-6.
void expect_same(const Outcome& reference, const Outcome& got, const std::string& what) {
  ASSERT_EQ(reference.grads.size(), got.grads.size()) << what;
  for (size_t p = 0; p < got.grads.size(); p++) {
    size_t differing = 0;
    float worst = 0;
    for (size_t i = 0; i < got.grads[p].size(); i++)
      if (std::memcmp(&got.grads[p][i], &reference.grads[p][i], sizeof(float)) != 0) {
        differing++;
        worst = std::max(worst, std::fabs(got.grads[p][i] - reference.grads[p][i]));
      }
    EXPECT_EQ(differing, 0u) << what << ": parameter " << p << " has " << differing
                             << " gradients not bitwise equal to store_all's (max difference "
                             << worst << ")";
  }
  EXPECT_NEAR(got.loss, reference.loss, 1e-6 * std::fabs(reference.loss)) << what;
}

TEST(Checkpoint, RevolveIsBitwiseStoreAllAndAdvancesExactlyTnc) {
  for (int64_t n : lengths({1, 2, 3, 17, 100, 300}, {1, 3, 40})) {
    const Outcome all = train<bp::CharRnn>(n, strategy("store_all", 1));
    for (int32_t c : {1, 2, 3, 8, 64}) {
      const Outcome rev = train<bp::CharRnn>(n, strategy("revolve", c));
      const std::string what = "revolve n=" + std::to_string(n) + " c=" + std::to_string(c);
      expect_same(all, rev, what);
      EXPECT_EQ(rev.stats.advanced, bp::revolve::forward_steps(n, c)) << what;
      EXPECT_LE(rev.stats.most_snapshots, c) << what;
      EXPECT_GE(rev.stats.most_snapshots, 1) << what;
    }
    std::printf("revolve, n = %lld: c = 1, 2, 3, 8, 64 bitwise equal to store_all\n", (long long)n);
  }
}

TEST(Checkpoint, MultistageIsBitwiseStoreAllAtEveryInterval) {
  for (int64_t n : lengths({1, 2, 17, 100, 300}, {1, 17, 40})) {
    const Outcome all = train<bp::CharRnn>(n, strategy("store_all", 1));
    for (int64_t k : {1, 2, 7, 64, 1000})
      for (int32_t c : {1, 3}) {
        const Outcome ms = train<bp::CharRnn>(n, strategy("multistage", c, k));
        const std::string what = "multistage n=" + std::to_string(n) + " k=" + std::to_string(k) +
                                 " c=" + std::to_string(c);
        expect_same(all, ms, what);
        const int64_t records = (n + k - 1) / k;
        EXPECT_EQ(ms.stats.interval, k) << what;
        EXPECT_EQ(ms.stats.records, records) << what;
        EXPECT_EQ(ms.stats.bytes_written, records * 4096) << what;  // a 2 KiB state: one page
        EXPECT_EQ(ms.stats.bytes_read, (records - 1) * 4096) << what;
        EXPECT_LE(ms.stats.most_snapshots, c) << what;
        // the forward sweep, then within each interval Revolve's own advances
        int64_t advanced = n;
        for (int64_t first = 0; first < n; first += k)
          advanced += bp::revolve::forward_steps(std::min(k, n - first), c);
        EXPECT_EQ(ms.stats.advanced, advanced) << what;
      }
    std::printf("multistage, n = %lld: k = 1, 2, 7, 64, 1000 x c = 1, 3 bitwise equal\n",
                (long long)n);
  }
}

// Several training steps: the states, snapshots, file and threads of one sequence must not leak
// into the next (AdamW makes every step's gradients depend on the previous updates).
TEST(Checkpoint, StaysBitwiseOverTrainingSteps) {
  const Outcome all = train<bp::CharRnn>(150, strategy("store_all", 1), 4);
  expect_same(all, train<bp::CharRnn>(150, strategy("revolve", 4), 4), "revolve, 4 steps");
  expect_same(all, train<bp::CharRnn>(150, strategy("multistage", 2, 16), 4),
              "multistage, 4 steps");
  expect_same(all, train<bp::CharRnn>(150, strategy("multistage", 2, 0), 4),
              "multistage, k measured, 4 steps");
}

TEST(Checkpoint, WideStateIsBitwiseToo) {  // (32, 512): 64 KiB, a record of 17 pages
  const int64_t n = kSanitized ? 9 : 23;
  const Outcome all = train<bp::CharRnnWide>(n, strategy("store_all", 1));
  expect_same(all, train<bp::CharRnnWide>(n, strategy("revolve", 3)), "wide revolve");
  const Outcome ms = train<bp::CharRnnWide>(n, strategy("multistage", 2, 5));
  expect_same(all, ms, "wide multistage");
  EXPECT_EQ(ms.stats.bytes_written, (n + 4) / 5 * 17 * 4096);
}

TEST(Checkpoint, MeasuredIntervalOutlastsTwoWrites) {
  const Outcome ms = train<bp::CharRnn>(200, strategy("multistage", 4, 0));
  ASSERT_GT(ms.stats.write_seconds, 0);
  ASSERT_GT(ms.stats.step_seconds, 0);
  EXPECT_GE(double(ms.stats.interval) * ms.stats.step_seconds, 2 * ms.stats.write_seconds);
  EXPECT_LT(double(ms.stats.interval - 1) * ms.stats.step_seconds, 2 * ms.stats.write_seconds);
  std::printf("measured: a write %.1f us, a step %.2f us: k = %lld\n", ms.stats.write_seconds * 1e6,
              ms.stats.step_seconds * 1e6, (long long)ms.stats.interval);
}

// ---- failures: one line, the run stops, nothing else is lost ----

std::string failure_of(const bp::ThroughTime& how, int64_t n,
                       std::function<void(bp::BpttRunner&)> before = nullptr) {
  try {
    train<bp::CharRnn>(n, how, 1, before);
  } catch (const bp::CheckpointError& e) {
    return e.what();
  }
  return "";
}

TEST(Checkpoint, MissingDirectoryIsOneLine) {
  bp::ThroughTime how = strategy("multistage", 2, 4);
  how.directory = "/nonexistent/checkpoints";
  const std::string error = failure_of(how, 20);
  std::printf("%s\n", error.c_str());
  EXPECT_NE(error.find("/nonexistent/checkpoints"), std::string::npos) << error;
  EXPECT_NE(error.find("No such file or directory"), std::string::npos) << error;
  EXPECT_EQ(error.find('\n'), std::string::npos) << error;

  how.directory = "/etc/hostname";  // a file, not a directory
  const std::string not_dir = failure_of(how, 20);
  std::printf("%s\n", not_dir.c_str());
  EXPECT_NE(not_dir.find("not a directory"), std::string::npos) << not_dir;
}

TEST(Checkpoint, RecordChangedOnDiskFailsItsChecksum) {
  const std::string error =
      failure_of(strategy("multistage", 2, 4), 40, [](bp::BpttRunner& runner) {
        runner.after_forward = [&runner] {
          // flip one bit of record 3's state, through another descriptor of the unlinked file
          const std::string path = "/proc/self/fd/" + std::to_string(runner.file()->fd());
          FILE* f = std::fopen(path.c_str(), "r+b");
          ASSERT_NE(f, nullptr);
          const long at = long(3 * runner.file()->record_bytes() + 64 + 100);
          std::fseek(f, at, SEEK_SET);
          const int byte = std::fgetc(f);
          std::fseek(f, at, SEEK_SET);
          std::fputc(byte ^ 0x10, f);
          std::fclose(f);
        };
      });
  std::printf("%s\n", error.c_str());
  EXPECT_NE(error.find("record 3 (state 12) fails its checksum"), std::string::npos) << error;
}

// A disk that fills up mid-run, as a file capped at 64 KiB (RLIMIT_FSIZE): the write fails with
// EFBIG, the run stops with that line. In a child process, so the cap stays there.
void run_with_capped_file() {
  std::signal(SIGXFSZ, SIG_IGN);  // a write past the cap fails instead of killing the process
  const rlimit cap{64 << 10, 64 << 10};
  setrlimit(RLIMIT_FSIZE, &cap);
  const std::string error = failure_of(strategy("multistage", 2, 1), 100);
  std::fprintf(stderr, "%s\n", error.c_str());
  std::exit(error.empty() ? 0 : 3);
}
TEST(Checkpoint, FullDiskStopsTheRunWithOneLine) {
  EXPECT_EXIT(run_with_capped_file(), testing::ExitedWithCode(3),
              "writing record 16: File too large");
}

TEST(Checkpoint, BadSnapshotsOrIntervalIsOneLineAndExit2) {
  EXPECT_EXIT(bp::BpttRunner(bp::BpttConfig{bp::Bptt::revolve, 0, 0, "/var/tmp"}),
              testing::ExitedWithCode(2), "--snapshots=0: need at least 1");
  EXPECT_EXIT(bp::BpttRunner(bp::BpttConfig{bp::Bptt::multistage, 4, -3, "/var/tmp"}),
              testing::ExitedWithCode(2), "--interval=-3: need at least 1, or auto");
}

// A sequence of no steps has no loss to take a gradient of: every strategy refuses it alike
// (store-all returned step 0's loss, multistage zeros, revolve refused).
TEST(Checkpoint, ASequenceOfLengthZeroIsRefusedByEveryStrategy) {
  for (const char* how : {"store_all", "revolve", "multistage"})
    EXPECT_EXIT(train<bp::CharRnn>(0, strategy(how, 4)), testing::ExitedWithCode(2),
                "RnnModel: a sequence of length 0; need at least 1 step")
        << how;
}
}  // namespace
