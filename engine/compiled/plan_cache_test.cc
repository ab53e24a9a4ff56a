// engine/compiled/plan_cache_test.cc: compiled plans on disk (engine/compiled/plan_cache.h).
// A warm start is bitwise a cold one and times no kernel; every field of the key misses when it
// changes; a truncated, corrupt or other-format file is one line, ignored and rewritten; a
// directory that is a file, or one that cannot be made, and a write that fails (a full disk) are
// one line and the run goes on uncached; two processes writing one key leave one whole file.
//   build/engine_tests --gtest_filter='PlanCache*'
#include "engine/compiled/plan_cache.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cinttypes>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "engine/compiled/backend.h"
#include "workloads/data.h"
#include "workloads/registry.h"

namespace plan_cache_test {

namespace fs = std::filesystem;

// A fresh directory under the test's temporary folder, removed when the process that made it
// ends (a forked child ends with _exit, and a child's exit would not be the maker's).
std::string fresh_dir(const std::string& name) {
  static struct Made {
    pid_t maker = getpid();
    std::vector<fs::path> dirs;
    ~Made() {
      std::error_code ec;
      if (getpid() == maker)
        for (const fs::path& d : dirs) fs::remove_all(d, ec);
    }
  } made;
  const fs::path p =
      fs::path(testing::TempDir()) / ("plan_cache_" + name + "_" + std::to_string(getpid()));
  fs::remove_all(p);
  made.dirs.push_back(p);
  return p.string();
}

// Three steps of mini_gpt (batch 2) compiled with kernels chosen by timing them (auto): every
// loss and every gradient of the last step, and what the compile found in the cache.
struct Result {
  std::vector<double> losses;
  std::vector<std::vector<float>> grads;
  std::string cache, kernels;
  double selection_seconds = 0;
};
Result run_mini_gpt(const std::string& dir, double budget_fraction = 0) {
  static const bp::Corpus corpus = bp::load_corpus(bp::kDefaultCorpus, 1000);
  Result r;
  bp::DialectSelector<float>::forget_verdicts();  // a cold start times every candidate again
  bp::CompiledBackend be;
  std::string unused;
  be.dialects = *bp::parse_dialect_spec("auto", &unused);
  be.plan_cache_dir = dir;
  be.budget_fraction = budget_fraction;
  bp::MiniGpt::Run<bp::CompiledBackend> run(be, 2, corpus);
  for (int s = 0; s < 3; s++) r.losses.push_back(run.step(be));
  be.zero_grad();
  be.backward(run.loss(be, 3));
  for (size_t i = 0; i < run.params.size(); i++) {
    r.grads.emplace_back(run.param_sizes[i]);
    be.read_grad(run.params[i], r.grads.back());
  }
  be.end_step();
  r.cache = be.plan_cache, r.kernels = be.kernel_report(),
  r.selection_seconds = be.selection_seconds;
  return r;
}
bool same_bits(const Result& a, const Result& b) {
  if (a.losses.size() != b.losses.size() || a.grads.size() != b.grads.size()) return false;
  if (std::memcmp(a.losses.data(), b.losses.data(), a.losses.size() * sizeof(double)) != 0)
    return false;
  for (size_t i = 0; i < a.grads.size(); i++)
    if (a.grads[i].size() != b.grads[i].size() ||
        std::memcmp(a.grads[i].data(), b.grads[i].data(), a.grads[i].size() * sizeof(float)) != 0)
      return false;
  return true;
}
std::vector<fs::path> plans_in(const std::string& dir) {
  std::vector<fs::path> out;
  if (fs::is_directory(dir))
    for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path());
  return out;
}

TEST(PlanCache, AWarmStartIsBitwiseTheColdOneAndTimesNoKernel) {
  const std::string dir = fresh_dir("warm");
  const Result off = run_mini_gpt(""), cold = run_mini_gpt(dir), warm = run_mini_gpt(dir);
  EXPECT_EQ(off.cache, "off");
  EXPECT_EQ(cold.cache, "miss");
  EXPECT_EQ(warm.cache, "hit");
  EXPECT_EQ(plans_in(dir).size(), 1u);
  EXPECT_TRUE(same_bits(cold, warm));
  EXPECT_EQ(cold.kernels, warm.kernels);
  EXPECT_EQ(warm.selection_seconds, 0) << "a warm start timed kernels";
  std::printf("  cold: %s\n  warm: the same kernels, selection %.1f ms -> 0\n",
              cold.kernels.c_str(), cold.selection_seconds * 1e3);
  // Under a memory budget: the recomputation decisions come back too.
  const std::string budget_dir = fresh_dir("budget");
  const Result b_cold = run_mini_gpt(budget_dir, 0.65), b_warm = run_mini_gpt(budget_dir, 0.65);
  EXPECT_EQ(b_warm.cache, "hit");
  EXPECT_TRUE(same_bits(b_cold, b_warm));
}

// One key per field: each one changed alone gives another key, and a plan stored under the first
// is not found under it.
TEST(PlanCache, EveryFieldOfTheKeyMissesWhenItChanges) {
  const std::string dir = fresh_dir("keys");
  bp::PlanCache cache(dir);
  auto graph_of = [](int rows, bp::TensorOp second) {
    auto g = std::make_unique<bp::TensorGraph<float>>(256, true);
    const bp::Tensor w = g->param(3, 4, std::vector<float>(12, 0.1f));
    const bp::Tensor x = g->constant(rows, 4, std::vector<float>(size_t(rows) * 4, 1.0f));
    bp::Tensor h = g->matmul(x, w, true);
    h = second == bp::TensorOp::tanh ? g->tanh(h) : g->relu(h);
    static const int32_t targets[8] = {0, 1, 2, 0, 1, 2, 0, 1};
    g->cross_entropy(h, {targets, rows});
    return g;
  };
  const auto base_graph = graph_of(4, bp::TensorOp::tanh);
  const uint32_t root = uint32_t(base_graph->num_nodes() - 1);
  const bp::PlanOptions base_options{0, 0, "auto", true, 1};
  const bp::PlanMachine base_machine = bp::PlanCache::this_machine();
  const bp::PlanKey base = bp::PlanCache::key(*base_graph, root, base_options, base_machine);
  EXPECT_EQ(base,
            bp::PlanCache::key(*graph_of(4, bp::TensorOp::tanh), root, base_options, base_machine));
  bp::PlanDecisions d;
  d.instructions = 7;
  ASSERT_TRUE(cache.store(base, d));
  ASSERT_TRUE(cache.load(base).has_value());

  auto graph_f64 = [] {
    bp::TensorGraph<double> g(256, true);
    const bp::Tensor w = g.param(3, 4, std::vector<double>(12, 0.1));
    const bp::Tensor x = g.constant(4, 4, std::vector<double>(16, 1.0));
    static const int32_t targets[4] = {0, 1, 2, 0};
    g.cross_entropy(g.tanh(g.matmul(x, w, true)), {targets, 4});
    return bp::PlanCache::key(g, uint32_t(g.num_nodes() - 1), {0, 0, "auto", true, 1},
                              bp::PlanCache::this_machine());
  };
  auto with = [&](auto change) {
    bp::PlanOptions o = base_options;
    bp::PlanMachine m = base_machine;
    change(o, m);
    return bp::PlanCache::key(*base_graph, root, o, m);
  };
  const std::vector<std::pair<const char*, bp::PlanKey>> changed = {
      {"structure (another op)",
       bp::PlanCache::key(*graph_of(4, bp::TensorOp::relu), root, base_options, base_machine)},
      {"shapes",
       bp::PlanCache::key(*graph_of(8, bp::TensorOp::tanh), root, base_options, base_machine)},
      {"element type", graph_f64()},
      {"budget bytes", with([](bp::PlanOptions& o, bp::PlanMachine&) { o.budget_bytes = 4096; })},
      {"budget fraction",
       with([](bp::PlanOptions& o, bp::PlanMachine&) { o.budget_fraction = 0.5; })},
      {"dialects",
       with([](bp::PlanOptions& o, bp::PlanMachine&) { o.dialects = "auto,matmul:blis"; })},
      {"libraries", with([](bp::PlanOptions& o, bp::PlanMachine&) { o.libraries = false; })},
      {"threads", with([](bp::PlanOptions& o, bp::PlanMachine&) { o.threads = 2; })},
      {"processor",
       with([](bp::PlanOptions&, bp::PlanMachine& m) { m.cpu += "flags\t: avx512f\n"; })},
      {"engine version", with([](bp::PlanOptions&, bp::PlanMachine& m) { m.engine += "x"; })},
  };
  for (const auto& [field, key] : changed) {
    EXPECT_FALSE(key == base) << field;
    EXPECT_FALSE(cache.load(key).has_value()) << field;
  }
}

// Stores one plan (a cold run of mini_gpt), damages its file with `damage`, and runs again: one
// line on stderr containing `said`, a cold compile bitwise the first, the file rewritten.
void damaged(const char* name, void (*damage)(const fs::path&), const char* said) {
  const std::string dir = fresh_dir(name);
  const Result cold = run_mini_gpt(dir);
  const std::vector<fs::path> files = plans_in(dir);
  ASSERT_EQ(files.size(), 1u);
  damage(files[0]);
  testing::internal::CaptureStderr();
  const Result again = run_mini_gpt(dir);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find(said), std::string::npos) << name << ": " << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << name << ": " << err;
  EXPECT_EQ(again.cache, "miss") << name;
  EXPECT_TRUE(same_bits(cold, again)) << name;
  EXPECT_EQ(run_mini_gpt(dir).cache, "hit") << name << ": not rewritten";
  std::printf("  %s: %s", name, err.c_str());
}
std::string contents(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}
void write(const fs::path& p, const std::string& s) { std::ofstream(p, std::ios::binary) << s; }

TEST(PlanCache, ABadFileIsOneLineIgnoredAndRewritten) {
  damaged(
      "truncated",
      [](const fs::path& p) {
        const std::string s = contents(p);
        write(p, s.substr(0, s.size() / 2));
      },
      "truncated");
  damaged(
      "corrupt",
      [](const fs::path& p) {
        std::string s = contents(p);
        s[s.size() - 20] ^= 1;  // one bit of the payload
        write(p, s);
      },
      "checksum");
  damaged(
      "format",
      [](const fs::path& p) {
        std::string s = contents(p);
        s.replace(s.find("cache 1"), 7, "cache 9");
        write(p, s);
      },
      "of format 9");
  damaged(
      "empty", [](const fs::path& p) { write(p, ""); }, "not a plan file");
}

// What an attacker with write access to the cache can do: edit the payload and write its length
// and checksum again (FNV-1a is no key). `edit` changes the payload's text.
void rewrite_payload(const fs::path& p, std::string (*edit)(std::string)) {
  const std::string s = contents(p);
  size_t at = 0;
  for (int line = 0; line < 4; line++) at = s.find('\n', at) + 1;
  const std::string payload = edit(s.substr(at));
  char header[200];
  std::snprintf(header, sizeof header, "%sbytes %zu\nchecksum %016" PRIx64 "\n",
                s.substr(0, s.find("bytes ")).c_str(), payload.size(),
                bp::PlanCache::checksum(payload));
  write(p, header + payload);
}
// The payload's line that starts with `word`, as numbers, and back.
std::vector<std::string> words_of(const std::string& payload, const char* word, size_t* begin,
                                  size_t* end) {
  *begin = payload.find(std::string("\n") + word + " ") + 1;
  *end = payload.find('\n', *begin);
  std::vector<std::string> w;
  std::istringstream in(payload.substr(*begin, *end - *begin));
  for (std::string x; in >> x;) w.push_back(x);
  return w;
}
std::string with_words(std::string payload, const char* word,
                       void (*change)(std::vector<std::string>&)) {
  size_t begin = 0, end = 0;
  std::vector<std::string> w = words_of(payload, word, &begin, &end);
  change(w);
  std::string line;
  for (const std::string& x : w) line += (line.empty() ? "" : " ") + x;
  return payload.replace(begin, end - begin, line);
}

// The payload with the kernels' line `pick` chose among them rewritten by `change` (the line's
// words: the chosen dialect, how many were timed, then each dialect and its seconds).
std::string with_kernel_line(std::string payload,
                             size_t (*pick)(const std::vector<std::vector<std::string>>&),
                             void (*change)(std::vector<std::string>&)) {
  const size_t begin = payload.find("\nkernels ") + 1, first = payload.find('\n', begin) + 1;
  const size_t end = payload.find("\nleft_out ");
  std::vector<std::vector<std::string>> lines;
  std::istringstream in(payload.substr(first, end - first));
  for (std::string line; std::getline(in, line);) {
    std::istringstream words(line);
    lines.emplace_back();
    for (std::string w; words >> w;) lines.back().push_back(w);
  }
  const size_t i = pick(lines);
  if (i >= lines.size()) return payload;  // nothing to change: the test fails on its message
  change(lines[i]);
  std::string text;
  for (const auto& line : lines) {
    for (size_t w = 0; w < line.size(); w++) text += (w ? " " : "") + line[w];
    text += "\n";
  }
  return payload.replace(first, end + 1 - first, text);
}

// A plan whose checksum holds but whose decisions are hostile: each is found before the arena is
// touched, one line, a cold compile bitwise the first, and the file written again.
TEST(PlanCache, AHostilePlanWithAValidChecksumIsOneLineIgnoredAndRewritten) {
  damaged(
      "offset_near_2_64",
      [](const fs::path& p) {
        rewrite_payload(p, [](std::string s) {
          return with_words(s, "buffers", [](std::vector<std::string>& w) {
            w[2] = std::string("18446744073709551552");  // 2^64 - 64: offset + bytes wraps
          });
        });
      },
      "lies outside the arena");
  damaged(
      "offset_minus_64",
      [](const fs::path& p) {
        rewrite_payload(p, [](std::string s) {
          return with_words(s, "buffers",
                            [](std::vector<std::string>& w) { w[2] = std::string("-64"); });
        });
      },
      "lies outside the arena");
  damaged(
      "all_offsets_0",
      [](const fs::path& p) {
        rewrite_payload(p, [](std::string s) {
          return with_words(s, "buffers", [](std::vector<std::string>& w) {
            for (size_t i = 2; i < w.size(); i++) w[i] = std::string("0");
          });
        });
      },
      "live together and share bytes");
  damaged(
      "offsets_overlapping",
      [](const fs::path& p) {
        rewrite_payload(p, [](std::string s) {
          return with_words(s, "buffers", [](std::vector<std::string>& w) {
            for (size_t i = 3; i < w.size(); i++) w[i] = w[2];  // every buffer where the first is
          });
        });
      },
      "live together and share bytes");
  damaged(
      "arena_2_62",
      [](const fs::path& p) {
        rewrite_payload(p, [](std::string s) {
          return with_words(s, "plan", [](std::vector<std::string>& w) {
            w[1] = std::string("4611686018427387904");
          });
        });
      },
      "where its buffers side by side take");
  damaged(
      "bytes_past_the_file",
      [](const fs::path& p) {
        std::string s = contents(p);
        const size_t at = s.find("bytes ") + 6;
        s.replace(at, s.find('\n', at) - at, "18446744073709551615");
        write(p, s);
      },
      "truncated");
  // Another kernel of the build named for an op: its timings choose another, or (untimed) the
  // priority rule does. Taken, it would run other arithmetic than the cold compile's.
  damaged(
      "timed_kernel_renamed",
      [](const fs::path& p) {
        rewrite_payload(p, [](std::string s) {
          return with_kernel_line(
              s,
              [](const std::vector<std::vector<std::string>>& lines) {
                for (size_t i = 0; i < lines.size(); i++)
                  if (lines[i].size() > 4) return i;  // the first op timed among two or more
                return lines.size();
              },
              [](std::vector<std::string>& w) {
                size_t slowest = 2;
                for (size_t d = 2; d + 1 < w.size(); d += 2)
                  if (std::stod(w[d + 1]) > std::stod(w[slowest + 1])) slowest = d;
                w[0] = w[slowest];
              });
        });
      },
      "where its timings choose");
  damaged(
      "untimed_kernel_renamed",
      [](const fs::path& p) {
        rewrite_payload(p, [](std::string s) {
          return with_kernel_line(
              s,
              [](const std::vector<std::vector<std::string>>& lines) {
                return lines.size() - 1;  // the loss (cross_entropy: engine, then reference)
              },
              [](std::vector<std::string>& w) { w[0] = "reference"; });
        });
      },
      "reference where engine comes first");
  damaged(
      "cut_in_its_header",
      [](const fs::path& p) {
        const std::string s = contents(p);
        write(p, s.substr(0, s.find("checksum ") + 12));
      },
      "truncated in its header");
  damaged(
      "cut_in_its_key",
      [](const fs::path& p) {
        std::string s = contents(p);
        s.erase(s.find("key ") + 10, 26);  // 6 of its 32 digits left
        write(p, s);
      },
      "a damaged header");
}

// Not a regular file where the plan should be: a FIFO is not opened for reading (it would block)
// and a link to a device is not followed (/dev/zero never ends); both are replaced by the next
// store. A directory is left as it is: the compile goes on uncached, with one line.
TEST(PlanCache, APlanThatIsNotARegularFileIsNeitherReadNorWaitedFor) {
  damaged(
      "fifo",
      [](const fs::path& p) {
        fs::remove(p);
        ASSERT_EQ(mkfifo(p.c_str(), 0600), 0);
      },
      "not a regular file");
  damaged(
      "link_to_dev_zero",
      [](const fs::path& p) {
        fs::remove(p);
        fs::create_symlink("/dev/zero", p);
      },
      "a symbolic link");
  const std::string dir = fresh_dir("directory");
  const Result cold = run_mini_gpt(dir);
  const std::vector<fs::path> files = plans_in(dir);
  ASSERT_EQ(files.size(), 1u);
  fs::remove(files[0]);
  fs::create_directory(files[0]);
  testing::internal::CaptureStderr();
  const Result again = run_mini_gpt(dir);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("a directory"), std::string::npos) << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  EXPECT_TRUE(same_bits(cold, again));
  std::printf("  directory: %s", err.c_str());
}

// A bad plan is said once per process, however often the step is compiled again (a benchmark
// compiles once per repetition).
TEST(PlanCache, ABadPlanIsSaidOncePerProcess) {
  const std::string dir = fresh_dir("once");
  run_mini_gpt(dir);
  const std::vector<fs::path> files = plans_in(dir);
  ASSERT_EQ(files.size(), 1u);
  fs::remove(files[0]);
  fs::create_directory(files[0]);  // stays bad: nothing can rewrite it
  testing::internal::CaptureStderr();
  for (int i = 0; i < 3; i++) run_mini_gpt(dir);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
}

TEST(PlanCache, ADirectoryThatCannotBeUsedIsOneLineAndTheRunGoesOnUncached) {
  const std::string file = fresh_dir("a_file");
  write(file, "not a directory");
  const Result reference = run_mini_gpt("");
  for (const std::string& dir : {file, std::string("/proc/self/no_such/plans")}) {
    testing::internal::CaptureStderr();
    const Result r = run_mini_gpt(dir);
    const std::string err = testing::internal::GetCapturedStderr();
    EXPECT_EQ(r.cache, "off") << dir;
    EXPECT_NE(err.find("going on uncached"), std::string::npos) << err;
    EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
    EXPECT_TRUE(same_bits(reference, r)) << dir;
    std::printf("  %s", err.c_str());
  }
}

// A full disk: the file-size limit makes every write to a file fail (EFBIG), as ENOSPC would.
// The child's stderr is a pipe, which the limit does not cover.
TEST(PlanCache, AWriteThatFailsIsOneLineAndLeavesNoFile) {
  const std::string dir = fresh_dir("full");
  int err_pipe[2];
  ASSERT_EQ(pipe(err_pipe), 0);
  const pid_t child = fork();
  if (child == 0) {
    dup2(err_pipe[1], 2);
    std::signal(SIGXFSZ, SIG_IGN);
    const rlimit small{64, 64};
    setrlimit(RLIMIT_FSIZE, &small);
    _exit(run_mini_gpt(dir).cache == "off" ? 0 : 1);
  }
  close(err_pipe[1]);
  std::string err;
  char buf[512];
  for (ssize_t n; (n = read(err_pipe[0], buf, sizeof buf)) > 0;) err.append(buf, size_t(n));
  close(err_pipe[0]);
  int status = 0;
  waitpid(child, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the compile was not uncached";
  EXPECT_NE(err.find("cannot write"), std::string::npos) << err;
  EXPECT_NE(err.find("going on uncached"), std::string::npos) << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  EXPECT_TRUE(plans_in(dir).empty()) << "a temporary file was left behind";
  std::printf("  %s", err.c_str());
}

// Two processes storing one key at once, many times: the file is whole after every round.
TEST(PlanCache, TwoProcessesWritingOneKeyLeaveOneWholeFile) {
  const std::string dir = fresh_dir("race");
  const bp::PlanKey key{1, 2};
  bp::PlanDecisions d;
  d.instructions = 42;
  for (int i = 0; i < 2000; i++) d.offsets.push_back(size_t(i) * 64);  // a file of some size
  std::vector<pid_t> children;
  for (int c = 0; c < 2; c++) {
    const pid_t pid = fork();
    if (pid == 0) {
      bp::PlanCache cache(dir);
      for (int i = 0; i < 200; i++)
        if (!cache.store(key, d)) _exit(1);
      _exit(0);
    }
    children.push_back(pid);
  }
  bp::PlanCache reader(dir);
  int whole = 0;
  for (int i = 0; i < 200; i++) {
    testing::internal::CaptureStderr();
    const auto got = reader.load(key);
    const std::string err = testing::internal::GetCapturedStderr();
    EXPECT_TRUE(err.empty()) << err;
    whole += got && got->offsets.size() == 2000;
  }
  for (pid_t pid : children) {
    int status = 0;
    waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  // A writer killed between its write and its rename left a temporary file: the next store
  // removes it (its pid is gone).
  write(fs::path(dir) / (key.hex() + ".plan.tmp.999999999.0"), "half a plan");
  ASSERT_TRUE(reader.store(key, d));
  const auto last = reader.load(key);
  ASSERT_TRUE(last.has_value());
  EXPECT_EQ(last->instructions, 42u);
  EXPECT_EQ(plans_in(dir).size(), 1u) << "temporary files left behind, or an orphan kept";
  std::printf("  %d reads during the writes, every one whole or absent; %d found\n", 200, whole);
}

}  // namespace plan_cache_test
