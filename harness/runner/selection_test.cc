// harness/runner/selection_test.cc: what a run selects (harness/runner/selection.h) from the
// registries, with its bad input, and the memory estimates that decide what runs
// (harness/runner/memory.h).
//   build/harness_test --gtest_filter='Selection.*:Memory.*'
#include "harness/runner/selection.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "harness/harness_test.h"
#include "harness/runner/backends.h"
#include "harness/runner/memory.h"
#include "studies/registry.h"  // the program's backends and studies, as bench_run has them

namespace {

std::optional<std::vector<bp::Selected>> select(std::string workloads,
                                                std::vector<std::string> sizes, std::string filter,
                                                std::string* error) {
  return bp::select_instances(
      {.backends = {"engine", "libtorch"},
       .workloads = workloads,
       .sizes = sizes,
       .filter = filter,
       .threads_of = [](const std::string& b) { return b == "engine" ? 1 : 2; },
       .runs = nullptr,
       .default_skip = nullptr},
      error);
}

// The selection is expanded from the registry, in its order, and named once per backend.
TEST(Selection, ExpandsTheRegistryAndNamesEveryBenchmark) {
  std::string error;
  auto all = select("", {}, "", &error);
  ASSERT_TRUE(all) << error;
  size_t expected = 0;
  for (const bp::WorkloadInfo& w : bp::kWorkloads) expected += w.sizes.defaults().size();
  EXPECT_EQ(all->size(), expected);
  EXPECT_EQ(all->front().id, "grad/empty");
  auto some = select("mini_gpt,tiny_graph", {"batch=2,4"}, "libtorch|tiny", &error);
  ASSERT_TRUE(some) << error;
  ASSERT_EQ(some->size(), 3u);  // tiny_graph first: registry order, not the order asked
  EXPECT_EQ((*some)[0].id, "grad/tiny_graph");
  EXPECT_EQ((*some)[0].names.size(), 2u);
  EXPECT_EQ((*some)[1].id, "step/mini_gpt/batch:2");
  EXPECT_EQ((*some)[1].names.count("engine"), 0u);  // the filter kept libtorch only
  EXPECT_EQ((*some)[1].names.at("libtorch"), "step/mini_gpt/libtorch/batch:2/threads:2");
}

// A backend's default_skip is asked about default sizes only: a size given with --sizes runs.
TEST(Selection, DefaultSkipsApplyToDefaultSizesOnly) {
  std::string error;
  auto with_skip = [&](std::vector<std::string> sizes) {
    return bp::select_instances({.backends = {"engine", "libtorch"},
                                 .workloads = "char_rnn",
                                 .sizes = sizes,
                                 .filter = "",
                                 .threads_of = [](const std::string&) { return 1; },
                                 .runs = nullptr,
                                 .default_skip =
                                     [](const std::string& b, const bp::WorkloadInfo&, int64_t n) {
                                       return b == "libtorch" && n > 1000 ? std::string("too long")
                                                                          : std::string();
                                     }},
                                &error);
  };
  auto defaults = with_skip({});
  ASSERT_TRUE(defaults) << error;
  for (const bp::Selected& s : *defaults) {
    EXPECT_EQ(s.names.size(), 2u) << s.id;  // named on both: a skipped one is in every table
    EXPECT_EQ(s.skipped.count("engine"), 0u) << s.id;
    EXPECT_EQ(s.skipped.count("libtorch") ? s.skipped.at("libtorch") : "",
              s.size > 1000 ? "too long" : "")
        << s.id;
  }
  auto given = with_skip({"length=100000"});
  ASSERT_TRUE(given) << error;
  ASSERT_EQ(given->size(), 1u);
  EXPECT_TRUE((*given)[0].skipped.empty());
}

// A size key that no selected workload has is valid (another workload has it) but changes
// nothing: one line says so (the README's own example once passed nodes=10 to mini_gpt alone).
TEST(Selection, ASizeKeyNoSelectedWorkloadHasIsSaid) {
  std::string error;
  std::vector<std::string> unused;
  auto selected = bp::select_instances({.backends = {"engine"},
                                        .workloads = "tiny_graph,mini_gpt",
                                        .sizes = {"nodes=10", "batch=2"},
                                        .filter = "",
                                        .threads_of = [](const std::string&) { return 1; },
                                        .runs = nullptr,
                                        .default_skip = nullptr,
                                        .unused_sizes = &unused,
                                        .given_sizes = {"nodes=10", "batch=2"}},
                                       &error);
  ASSERT_TRUE(selected) << error;
  ASSERT_EQ(unused.size(), 1u);
  EXPECT_EQ(unused[0].rfind("--sizes nodes=10: no selected workload is sized by 'nodes' "
                            "(scalar_chain",
                            0),
            0u)
      << unused[0];
}

TEST(Selection, BadSelectionsSayWhatIsValid) {
  std::string error;
  EXPECT_FALSE(select("resnet", {}, "", &error));
  EXPECT_NE(error.find("unknown workload 'resnet'; valid: empty, tiny_graph"), std::string::npos);
  EXPECT_FALSE(select("", {"nodes=10,x"}, "", &error));
  EXPECT_EQ(error, "--sizes nodes=10,x: 'x' is not a whole number");
  EXPECT_FALSE(select("tiny_graph", {"batch=5000"}, "", &error));  // checked unselected too
  EXPECT_EQ(error, "--sizes: batch=5000 is out of range for mini_gpt (1 to 4096)");
  EXPECT_FALSE(select("", {"depth=3"}, "", &error));
  // the keys in registry order (a workload added later may add one at the end)
  EXPECT_EQ(
      error.rfind(
          "--sizes: no workload is sized by 'depth'; size keys: nodes, hidden, batch, width", 0),
      0u)
      << error;
  EXPECT_FALSE(select("", {}, "tiny((", &error));
  EXPECT_EQ(error, "--filter 'tiny((' is not a valid regular expression");
  EXPECT_FALSE(select("", {}, "nothing/at/all", &error));
  EXPECT_NE(error.find("matches no benchmark; names look like:\n  grad/empty/engine/threads:1"),
            std::string::npos)
      << error;
  EXPECT_TRUE(select("", {}, "-engine", &error)) << "a leading '-' negates";
}

// Memory estimates: a floor plus growth as size^p, p in [1, 2] from the three samples.
TEST(Memory, EstimatesFromThreeSmallerSizes) {
  const bp::WorkloadInfo& gpt = workload("mini_gpt_wide");  // defaults 1, 8, 32
  EXPECT_EQ(bp::probe_sizes(gpt, 32), std::vector<int64_t>{}) << "the defaults need no estimate";
  EXPECT_EQ(bp::probe_sizes(gpt, 4096), (std::vector<int64_t>{8, 16, 32}));
  EXPECT_EQ(bp::probe_sizes(workload("tiny_graph"), 0), std::vector<int64_t>{});
  // linear (a batch): 50 MB floor + 1 MB per unit
  const std::vector<bp::MemorySample> linear = {{8, 58e6}, {16, 66e6}, {32, 82e6}};
  EXPECT_NEAR(bp::extrapolate_bytes(linear, 4096), 50e6 + 4096e6, 1e3);
  // quadratic (a width): 50 MB + 10 bytes * width^2
  auto quad = [](double w) { return 50e6 + 10 * w * w; };
  const std::vector<bp::MemorySample> square = {
      {512, quad(512)}, {1024, quad(1024)}, {2048, quad(2048)}};
  EXPECT_NEAR(bp::extrapolate_bytes(square, 8192), quad(8192), 1e3);
  // noise that would bend a parabola: the middle sample 2 MB low stays near linear (~17 GB at
  // 4096, not the 262 GB a parabola through these three gives)
  const std::vector<bp::MemorySample> noisy = {{8, 56e6}, {16, 88e6}, {32, 158e6}};
  const double estimate = bp::extrapolate_bytes(noisy, 4096);
  EXPECT_GT(estimate, 17e9);
  EXPECT_LT(estimate, 40e9);
  // no growth measured: the largest sample
  EXPECT_EQ(bp::extrapolate_bytes({{8, 5e6}, {16, 5e6}, {32, 4.9e6}}, 4096), 4.9e6);
}

}  // namespace
