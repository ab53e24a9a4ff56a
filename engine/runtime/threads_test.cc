// engine/runtime/threads_test.cc: the pool (engine/runtime/threads.h), and the kernels split over
// it bitwise the same at 1, 2, 3 and 4 threads: products on every path (rows, columns, few rows,
// transposes), and every op case, eager and compiled, with every kernel forced to split.
// (Every model workload at 1 to 4 threads: engine/compiled/compiled_test.cc.)
//   build/engine_tests --gtest_filter='Threads*'
#include "engine/runtime/threads.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#include "engine/core/at_threads_test.h"
#include "engine/core/op_cases_test.h"
#include "engine/kernels/product_jit.h"
#include "engine/kernels/products.h"

namespace threads_test {

TEST(Threads, EveryItemRunsOnceNestedJobsInlineAndSleepingWorkersWake) {
  for (int n : {1, 2, 3, 4, 7}) {
    AtThreads at(n, Forced::nothing);
    for (int64_t items : {0, 1, 5, 1000}) {
      std::vector<std::atomic<int>> hits(size_t(items) + 1);
      for (int rep = 0; rep < 50; rep++) {
        bp::parallel_for(items, 1, [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; i++) hits[size_t(i)]++;
          bp::parallel_for(4, 1,
                           [&](int64_t nb, int64_t ne) { hits[size_t(items)] += int(ne - nb); });
        });
        if (rep == 25) std::this_thread::sleep_for(std::chrono::milliseconds(20));  // workers sleep
      }
      for (int64_t i = 0; i < items; i++) ASSERT_EQ(hits[size_t(i)].load(), 50) << n << " threads";
    }
  }
}

bool same(const std::vector<float>& a, const std::vector<float>& b) {
  return std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// c (M, N) += op(a) op(b), from a fixed c and fresh, at the pool's current threads.
std::vector<float> product(int32_t M, int32_t N, int32_t K, bool ta, bool tb, bool fresh) {
  const std::vector<double> a64 = values(size_t(M) * K, -1, 1, 7),
                            b64 = values(size_t(K) * N, -1, 1, 8),
                            c64 = values(size_t(M) * N, -1, 1, 9);
  std::vector<float> a(a64.begin(), a64.end()), b(b64.begin(), b64.end()),
      c(c64.begin(), c64.end());
  std::vector<float> scratch(bp::matmul_scratch_elems(M, N, K, ta, tb) + 1);
  bp::matmul_accumulate(c.data(), a.data(), ta, b.data(), tb, M, N, K, scratch.data(), fresh);
  return c;
}

TEST(Threads, ProductsAreBitwiseAtAnyThreadCount) {
  struct Shape {
    int32_t M, N, K;
    bool ta, tb;
  };
  // rows; columns; few rows of a wide b; b^T copied; c^T; a^T
  const Shape shapes[] = {{300, 70, 50, false, false},   {20, 200, 40, false, false},
                          {64, 1024, 600, false, false}, {100, 96, 80, false, true},
                          {10, 300, 50, false, true},    {33, 65, 40, true, false}};
  for (const Shape& s : shapes)
    for (bool fresh : {false, true}) {
      const std::vector<float> one = product(s.M, s.N, s.K, s.ta, s.tb, fresh);
      for (int n : {2, 3, 4})
        for (bool split_all : {false, true}) {
          AtThreads at(n, split_all ? Forced::every_split : Forced::nothing);
          if (split_all) {
            EXPECT_GT(bp::gemm_split_of(s.M, s.K, s.N).parts, 1);
          }
          EXPECT_TRUE(same(one, product(s.M, s.N, s.K, s.ta, s.tb, fresh)))
              << s.M << "x" << s.N << "x" << s.K << (s.ta ? " a^T" : "") << (s.tb ? " b^T" : "")
              << (fresh ? " fresh" : "") << " at " << n << " threads"
              << (split_all ? ", every kernel split" : "");
        }
    }
}

// Any thread runs any part: a worker late to every job leaves its parts to the caller, one that
// holds each part it takes makes the caller wait; neither changes a bit of the products.
TEST(Threads, ProductsAreBitwiseWithAWorkerLateOrHoldingItsPart) {
  const std::vector<float> one = product(64, 1024, 600, false, false, true),
                           one_t = product(33, 65, 40, true, false, false);
  for (int n : {2, 3, 4})
    for (bool holding : {false, true})
      for (int worker = 1; worker < n; worker++) {
        AtThreads at(n, Forced::every_split);
        bp::thread_pool().delay_worker_for_tests(worker, 300, holding);
        EXPECT_TRUE(same(one, product(64, 1024, 600, false, false, true)))
            << n << " threads, worker " << worker << (holding ? " holding its part" : " late");
        EXPECT_TRUE(same(one_t, product(33, 65, 40, true, false, false)))
            << n << " threads, worker " << worker << (holding ? " holding its part" : " late");
      }
}

// A worker that is not running takes nothing from the caller: its parts are the caller's.
TEST(Threads, TheCallerTakesThePartsOfAWorkerThatIsLate) {
  AtThreads at(2, Forced::nothing);
  bp::thread_pool().delay_worker_for_tests(1, 200000, false);  // 0.2 s late to every job
  std::vector<std::atomic<int>> hits(4);
  for (int job = 0; job < 3; job++) {
    bp::thread_pool().run(2, [&](int part, int parts) { hits[size_t(part * parts)]++; });
    EXPECT_EQ(bp::thread_pool().last_parts_by_caller(), 2) << "job " << job;
  }
  EXPECT_EQ(hits[0].load(), 3);
  EXPECT_EQ(hits[2].load(), 3);
}

// Steps whose jobs wait on a worker that holds every part it takes (a machine busy with other
// work): the pool times a window of steps each way and runs the jobs alone, each part still once.
// A probe may rightly keep sharing when the worker, itself descheduled on a busy host, took no part
// in its timed window; the pool then looks again, so the test steps until a probe has sent the
// steps alone (20 s at most).
// A step of 4 jobs of 2 parts of 1 ms each, with worker 1 holding each part it takes 20 ms:
// sharing 10x slower than alone, however busy the machine running the test.
struct StepWithALateWorker {
  std::atomic<int64_t> parts_run{0};
  int64_t parts_asked = 0;
  StepWithALateWorker() { bp::thread_pool().delay_worker_for_tests(1, 20000, true); }
  void operator()() {
    for (int job = 0; job < 4; job++, parts_asked += 2)
      bp::thread_pool().run(2, [&](int, int) {
        const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(1);
        while (std::chrono::steady_clock::now() < end) {
        }
        parts_run++;
      });
    bp::thread_pool().step_done();
  }
};

TEST(Threads, StepsGoAloneWhenTheWorkersHoldThemBack) {
  AtThreads at(2, Forced::nothing);
  StepWithALateWorker step;
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  int64_t alone_after_a_probe = 0;  // jobs alone in the step right after the one that probed
  while (alone_after_a_probe == 0 && std::chrono::steady_clock::now() < give_up) {
    const int64_t probes = bp::thread_pool().stats().probes;
    step();
    if (bp::thread_pool().stats().probes == probes) continue;
    const int64_t alone = bp::thread_pool().stats().alone;
    step();
    alone_after_a_probe = bp::thread_pool().stats().alone - alone;
  }
  const bp::ThreadPool::Stats& s = bp::thread_pool().stats();
  std::printf("  a worker holding each part 20 ms: %lld jobs shared, %lld alone, %lld probes\n",
              (long long)s.shared, (long long)s.alone, (long long)s.probes);
  EXPECT_GE(s.probes, 1);
  EXPECT_GT(alone_after_a_probe, 0) << "no step after a probe ran alone in 20 s";
  EXPECT_EQ(step.parts_run.load(), step.parts_asked);
}

// A hold alone runs its length while the machine has no room for the workers, and ends at the
// first window that finds room (the machine's other work gone).
TEST(Threads, AHoldAloneEndsWhenTheMachineHasRoom) {
  for (int room : {0, 1}) {
    AtThreads at(2, Forced::nothing);
    bp::thread_pool().machine_has_room_for_tests(room);
    StepWithALateWorker step;
    // Without room: three probes (holds alone after those alone won run their length). With
    // room: steps until a hold alone is cut, the first window after a probe that alone won (on a
    // loaded test machine some probes find sharing as quick, and hold shared instead).
    const bp::ThreadPool::Stats& s = bp::thread_pool().stats();
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while ((room ? s.holds_cut < 1 : s.probes < 3) && std::chrono::steady_clock::now() < give_up)
      step();
    std::printf("  room %d: %lld probes, %lld holds alone cut short, %lld jobs alone\n", room,
                (long long)s.probes, (long long)s.holds_cut, (long long)s.alone);
    if (room == 0) {
      ASSERT_GE(s.probes, 3) << "fewer than 3 probes in 20 s";
      EXPECT_EQ(s.holds_cut, 0);
    }
    if (room == 1) EXPECT_GE(s.holds_cut, 1) << "no hold alone cut short in 20 s";
    EXPECT_EQ(step.parts_run.load(), step.parts_asked);
  }
}

TEST(Threads, EveryOpCaseIsBitwiseAtAnyThreadCountEagerAndCompiled) {
  int checked = 0;
  for (const OpCase& c : cases()) {
    const std::vector<std::vector<double>> init = init_of(c);
    G one;
    std::vector<Tensor> p1;
    const double loss1 = loss_of(c, init, &one, &p1);
    const CompiledRun compiled1 = run_compiled<double>(c, init);
    for (int n : {2, 3, 4})
      for (Forced forced : {Forced::every_split, Forced::products_side_by_side}) {
        AtThreads at(n, forced);
        if (forced == Forced::products_side_by_side) {  // the mode takes the path it names
          EXPECT_TRUE(bp::ops::products_side_by_side<bp::TiledGemm>({3, 4, 5, false, false},
                                                                    {4, 5, 3, true, false}));
        }
        G g;
        std::vector<Tensor> p;
        const double loss = loss_of(c, init, &g, &p);
        const CompiledRun compiled = run_compiled<double>(c, init);
        EXPECT_EQ(std::memcmp(&loss, &loss1, sizeof loss), 0)
            << c.what << " at " << n << forced_name(forced);
        EXPECT_EQ(std::memcmp(&compiled.loss, &compiled1.loss, sizeof loss), 0) << c.what;
        for (size_t i = 0; i < p.size(); i++) {
          const size_t elems = init[i].size();
          EXPECT_EQ(std::memcmp(g.grad(p[i]), one.grad(p1[i]), elems * sizeof(double)), 0)
              << c.what << ": eager gradient " << i << " at " << n << " threads";
          EXPECT_EQ(std::memcmp(compiled.grads[i].data(), compiled1.grads[i].data(),
                                elems * sizeof(double)),
                    0)
              << c.what << ": compiled gradient " << i << " at " << n << " threads";
        }
        checked++;
      }
  }
  std::printf(
      "  %d op cases x threads 2, 3, 4 x (every kernel split, products side by side): bitwise "
      "the 1-thread results\n",
      checked / 6);
}

// A backward's two products go side by side when that is quicker than each in turn: dX split by
// rows beside a dW of too few rows (as mini_gpt 64's), which the tiled kernel splits by columns
// where it has several panels and the generated kernels never do.
TEST(Threads, ProductsSideBySideWhenQuickerThanInTurn) {
  AtThreads at(2, Forced::nothing);
  // dW of 16 columns: one panel whatever the build's vectors (products.h, kPanel)
  const bp::ops::Product dx{512, 16, 128, false, false}, dw{128, 16, 512, true, false};
  EXPECT_TRUE(bp::ops::products_side_by_side<bp::GeneratedGemm>(dx, dw));
  EXPECT_TRUE(bp::ops::products_side_by_side<bp::TiledGemm>(dx, dw));
  const bp::ops::Product dx_wide{512, 128, 96, false, false}, dw_wide{96, 128, 512, true, false};
  EXPECT_TRUE(bp::ops::products_side_by_side<bp::GeneratedGemm>(dx_wide, dw_wide));
  EXPECT_FALSE(bp::ops::products_side_by_side<bp::TiledGemm>(dx_wide, dw_wide));  // both split
  // the split one's half larger than the other's whole: in turn
  const bp::ops::Product wide{512, 96, 96, false, false}, small{96, 24, 64, true, false};
  EXPECT_FALSE(bp::ops::products_side_by_side<bp::GeneratedGemm>(wide, small));
  EXPECT_FALSE(bp::ops::products_side_by_side<bp::GeneratedGemm>(small, wide));
  // neither splits: side by side, as before, for both
  const bp::ops::Product a{64, 24, 96, false, false}, b{96, 24, 64, true, false};
  EXPECT_TRUE(bp::ops::products_side_by_side<bp::TiledGemm>(a, b));
  EXPECT_TRUE(bp::ops::products_side_by_side<bp::GeneratedGemm>(a, b));
}

TEST(Threads, SplitThresholdsFromTheEnvironment) {
  const bp::SplitThresholds defaults;
  const bp::SplitThresholds none = bp::split_thresholds_from(nullptr);
  EXPECT_EQ(none.elems, defaults.elems);
  const bp::SplitThresholds t = bp::split_thresholds_from("elems=4096,rows=32,side=1");
  EXPECT_EQ(t.elems, 4096);
  EXPECT_EQ(t.rows, 32);
  EXPECT_EQ(t.side_by_side, 1);
  EXPECT_EQ(t.macs, defaults.macs);  // what is not named keeps its default
  EXPECT_EQ(t.pair_macs, defaults.pair_macs);
  for (const char* bad : {"elems=0", "elems=12x", "threads=2", "macs", "rows=3000000000",
                          "elems=99999999999999999999"})  // past 2^63: refused, not saturated
    EXPECT_EXIT(bp::split_thresholds_from(bad), testing::ExitedWithCode(2),
                "BP_SPLIT: .* is not NAME=N")
        << bad;
  for (const char* empty : {"elems=4096,,rows=2", ",elems=1", "elems=1,"})
    EXPECT_EXIT(bp::split_thresholds_from(empty), testing::ExitedWithCode(2),
                "BP_SPLIT=.*: an empty field")
        << empty;
}

}  // namespace threads_test
