// harness/runner/results_test.cc: the reader of Google Benchmark results
// (harness/runner/results.h), the kernel rows, the summary's ratios, crossovers and columns
// (harness/runner/summary_text.h), and the environment differences that decide whether two runs
// compare (harness/common/environment.h).
//   build/harness_test --gtest_filter='Results.*:Environment.*'
#include "harness/runner/results.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "harness/common/environment.h"
#include "harness/common/isa_cap.h"
#include "harness/common/json.h"
#include "harness/common/names.h"
#include "harness/harness_test.h"
#include "harness/runner/summary.h"
#include "harness/runner/summary_text.h"
#include "studies/registry.h"  // the program's backends and studies, as bench_run has them

namespace {

Json gb_run(const char* type, double real_time, const char* unit, const char* aggregate = "") {
  Json r = Json::object(
      {{"run_type", type}, {"real_time", real_time}, {"time_unit", unit}, {"peak_rss_bytes", 5e6}});
  if (*aggregate) r["aggregate_name"] = aggregate;
  return r;
}

TEST(Results, MedianInSecondsWhateverTheUnit) {
  Json file = Json::object(
      {{"benchmarks", Json::array({gb_run("iteration", 10, "us"), gb_run("iteration", 30, "us"),
                                   gb_run("aggregate", 20, "us", "median"),
                                   gb_run("aggregate", 20, "us", "mean")})}});
  bp::BenchmarkResult r = bp::read_benchmark_result(file);
  EXPECT_EQ(r.status, "ok");
  EXPECT_DOUBLE_EQ(r.median_seconds, 20e-6);
  ASSERT_EQ(r.repetition_seconds.size(), 2u);
  EXPECT_DOUBLE_EQ(r.repetition_seconds[0], 10e-6);
  EXPECT_DOUBLE_EQ(r.repetition_seconds[1], 30e-6);
  EXPECT_EQ(r.peak_rss_bytes, 5e6);
  Json single = Json::object({{"benchmarks", Json::array({gb_run("iteration", 3, "ms")})}});
  EXPECT_DOUBLE_EQ(bp::read_benchmark_result(single).median_seconds, 3e-3);
  Json skipped = Json::object(
      {{"benchmarks", Json::array({Json::object({{"error_occurred", true},
                                                 {"error_message", "skipped: no tensors"}})})}});
  EXPECT_EQ(bp::read_benchmark_result(skipped).status, "skipped");
  Json empty = Json::object({{"benchmarks", Json::array()}});
  EXPECT_EQ(bp::read_benchmark_result(empty).status, "failed");
}

// The kernel rows run interleaved, so kernels.json lists them in the order their last repetition
// ended: the summary puts them back in registration order (family_index), takes each dialect's
// median, and judges auto's choice against the fastest.
TEST(Results, KernelRowsInRegistrationOrderWhateverTheFileSays) {
  auto row = [](const std::string& name, int family, double us, int chosen, double flops) {
    return Json::object({{"name", name},
                         {"run_name", name},
                         {"run_type", "iteration"},
                         {"family_index", family},
                         {"time_unit", "us"},
                         {"real_time", us},
                         {"auto", chosen},
                         {"flops", flops}});
  };
  const std::string big = "kernel/step/w/n:1/linear[64x8,8x8,1x8]/",
                    small = "kernel/step/w/n:1/linear[64x8,2x8,1x2]/";
  Json rows = Json::array();
  for (const Json& r :  // listed out of order; engine first and big first when registered
       {row(small + "blis", 4, 3, 0, 2e3), row(big + "openblas", 1, 12, 0, 8e3),
        row("peak/fma_f32/threads:1", 5, 1, 0, 1e5), row(big + "engine", 0, 10, 1, 8e3),
        row(small + "engine", 3, 4, 1, 2e3), row(big + "openblas", 1, 14, 0, 8e3),
        row(big + "engine", 0, 11, 1, 8e3), row(big + "blis", 2, 20, 0, 8e3)})
    rows.push_back(r);
  const Json summary = bp::kernel_summary(Json::object({{"benchmarks", rows}}));
  const JsonView k = summary;
  EXPECT_DOUBLE_EQ(k["peak_gflops"].num_or(0), 1e5 / 1e-6 * 1e-9);
  ASSERT_EQ(k["shapes"].size(), 2u);
  const JsonView first = k["shapes"][0];
  EXPECT_EQ(first["shape"].str_or(""), "step/w/n:1/linear[64x8,8x8,1x8]");
  std::vector<std::string> dialects;
  for (const auto& [d, v] : first["median_seconds"].members()) dialects.push_back(d);
  EXPECT_EQ(dialects, (std::vector<std::string>{"engine", "openblas", "blis"}));
  EXPECT_DOUBLE_EQ(first["median_seconds"]["engine"].num_or(0), 10.5e-6);
  EXPECT_EQ(first["auto"].str_or(""), "engine");
  EXPECT_EQ(first["best"].str_or(""), "engine");
  const JsonView second = k["shapes"][1];
  EXPECT_EQ(second["auto"].str_or(""), "engine");
  EXPECT_EQ(second["best"].str_or(""), "blis");
  EXPECT_DOUBLE_EQ(second["auto_over_best"].num_or(0), 4.0 / 3.0);
}

// A process's peak is the larger of wait4's and every repetition's own high-water mark: each
// repetition resets the mark (and with it the kernel's ru_maxrss), so a setup run once before
// them (--warm_once) peaks only in the first repetition's counter.
TEST(Results, AProcesssPeakIsTheLargestOfWait4AndEveryRepetition) {
  Json first = gb_run("iteration", 10, "ms");
  first["peak_rss_bytes"] = 224e6;  // the compile, then two steps' peaks
  Json later = gb_run("iteration", 10, "ms"), last = gb_run("iteration", 10, "ms");
  later["peak_rss_bytes"] = last["peak_rss_bytes"] = 162e6;
  Json file = Json::object(
      {{"benchmarks", Json::array({first, later, last, gb_run("aggregate", 10, "ms", "median")})}});
  const bp::BenchmarkResult r = bp::read_benchmark_result(file);
  EXPECT_EQ(r.largest_peak_rss_bytes, 224e6);
  bp::Cell c;
  c.max_rss_bytes = 162e6;  // wait4
  c.take(r);
  EXPECT_EQ(c.max_rss_bytes, 224e6);
  c.max_rss_bytes = 300e6;  // a peak the counters did not see (before the first reset)
  c.take(r);
  EXPECT_EQ(c.max_rss_bytes, 300e6);
}

// The median's interval from order statistics: exact levels, and the widest 95% one when the
// repetitions allow it.
TEST(Results, MedianIntervalFromOrderStatistics) {
  const bp::MedianInterval five = bp::median_interval({5, 1, 4, 2, 3});
  EXPECT_EQ(five.lo, 1);
  EXPECT_EQ(five.hi, 5);
  EXPECT_DOUBLE_EQ(five.level, 1 - 2.0 / 32);  // 93.75%: below 6 repetitions nothing reaches 95%
  std::vector<double> ten;
  for (int i = 10; i >= 1; i--) ten.push_back(i);
  const bp::MedianInterval t = bp::median_interval(ten);
  EXPECT_EQ(t.lo, 2);  // 2nd smallest to 2nd largest: 1 - 2 (1 + 10) / 1024 = 97.9%
  EXPECT_EQ(t.hi, 9);
  EXPECT_NEAR(t.level, 1 - 22.0 / 1024, 1e-12);
  EXPECT_TRUE(std::isnan(bp::median_interval({7}).level)) << "one repetition has no interval";
  Json file = Json::object(
      {{"benchmarks",
        Json::array({gb_run("iteration", 10, "us"), gb_run("iteration", 30, "us"),
                     gb_run("iteration", 20, "us"), gb_run("aggregate", 20, "us", "median")})}});
  const bp::BenchmarkResult r = bp::read_benchmark_result(file);
  EXPECT_DOUBLE_EQ(r.interval.lo, 10e-6);
  EXPECT_DOUBLE_EQ(r.interval.hi, 30e-6);
  EXPECT_DOUBLE_EQ(r.interval.level, 0.75);
}

// Ratios divide by the run's reference; a ratio under 1 keeps two significant digits.
TEST(Results, RatiosCrossoversAndTheirText) {
  bp::Summary s;
  s.reference = "engine";
  s.backends = {"engine", "libtorch"};
  s.threads = {{"engine", 1}, {"libtorch", 1}};
  const bp::WorkloadInfo& w = workload("mlp_width");
  const double engine[] = {1, 2, 9, 3, 20}, torch[] = {5, 5, 5, 4, 10};  // at 16, 32, ... 256
  for (int i = 0; i < 5; i++) {
    bp::SummaryRow row{bp::instance_id(w, 16 << i), &w, 16 << i, {}};
    row.cells["engine"].status = row.cells["libtorch"].status = "ok";
    row.cells["engine"].median_seconds = engine[i];
    row.cells["libtorch"].median_seconds = torch[i];
    row.cells["engine"].interval = {engine[i] * 0.99, engine[i] * 1.01, 0.9375};
    row.cells["libtorch"].interval = {torch[i] * 0.99, torch[i] * 1.01, 0.9375};
    s.rows.push_back(row);
  }
  EXPECT_DOUBLE_EQ(s.ratio(s.rows[0], "libtorch"), 5.0);
  auto c = s.crossovers();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].from, 256);  // width 64 was a blip: at 128 the engine is ahead again
  // a 1.3% difference inside the noise is no crossover (a run once claimed one on that)
  bp::Summary noisy = s;
  noisy.rows[4].cells["libtorch"].median_seconds = 20 / 1.013;
  noisy.rows[4].cells["libtorch"].interval = {19.0, 21.0, 0.9375};
  EXPECT_EQ(noisy.crossovers()[0].from, 0);
  const bp::Summary::Ratio unpaired = noisy.ratio_of(noisy.rows[4], "libtorch");
  EXPECT_FALSE(unpaired.paired) << "no repetition times: the medians' intervals";
  EXPECT_NEAR(unpaired.lo, 19.0 / 20.2, 1e-12);
  EXPECT_NEAR(unpaired.hi, 21.0 / 19.8, 1e-12);
  EXPECT_EQ(bp::human_ratio(0.04), "0.04x");
  EXPECT_EQ(bp::human_ratio(0.5), "0.5x");
  EXPECT_EQ(bp::human_ratio(0.997), "0.997x");
  EXPECT_EQ(bp::human_ratio(2.25), "2.2x");
  EXPECT_EQ(bp::human_ratio(346.3), "346x");
  const std::string text = bp::summary_text(s);
  EXPECT_NE(text.find("its time over engine's"), std::string::npos) << text;
  EXPECT_NE(text.find("0.5x"), std::string::npos) << text;
  EXPECT_NE(text.find("libtorch faster from width=256"), std::string::npos) << text;
  EXPECT_EQ(text.find("~"), std::string::npos) << "no interval, nothing flagged wide";
  s.rows[0].cells["engine"].interval = {0.8, 1.3, 0.9375};  // 50% of the median of 1 s
  s.rows[1].cells["engine"].interval = {1.95, 2.05, 0.9375};
  const std::string flagged = bp::summary_text(s);
  EXPECT_NE(flagged.find("1.00 s~"), std::string::npos) << flagged;
  EXPECT_EQ(flagged.find("2.00 s~"), std::string::npos) << flagged;
  EXPECT_NE(flagged.find("~ wide: the 93.8% interval of the median"), std::string::npos) << flagged;
}

// Under --precision bf16 the summary says which bf16 path each backend took on this processor.
TEST(Results, ABf16SummarySaysEachBackendsPath) {
  bp::Summary s;
  s.run_id = "r1", s.reference = "engine";
  s.backends = {"engine", "compiled", "libtorch"};
  s.threads = {{"engine", 1}, {"compiled", 1}, {"libtorch", 1}};
  s.options = bp::Json::object({{"precision", "bf16"}, {"isa", "avx2"}});
  s.contexts = bp::Json::object(
      {{"engine", bp::Json::object({{"bf16_products", "widened"}})},
       {"compiled", bp::Json::object({{"bf16_products", "widened"}})},
       {"libtorch", bp::Json::object({{"bf16_products", "aten (sums in bfloat16)"}})}});
  std::string text = bp::machine_lines(s);
  for (size_t at; (at = text.find("\n  ")) != std::string::npos;) text.replace(at, 3, " ");
  EXPECT_NE(text.find("bf16 products: aten (sums in bfloat16) (libtorch); widened (engine, "
                      "compiled)"),
            std::string::npos)
      << text;
}

// Other benchmarks seen during a run: named by program and counted, not listed by process id.
TEST(Results, OtherBenchmarksAreCountedByProgram) {
  EXPECT_EQ(bp::others_counted({"4242 bench_run"}), "4242 bench_run");
  std::vector<std::string> many = {"1 bench_run", "2 pytorch_bench.py"};
  for (int i = 3; i < 40; i++) many.push_back(std::to_string(i) + " bench_libtorch");
  EXPECT_EQ(bp::others_counted(many),
            "39 processes: bench_libtorch 37, bench_run 1, pytorch_bench.py 1");
}

// summary.csv: a line per benchmark in the run's backend order, a skipped one with its reason;
// a field with a comma, a quote or a line break quoted (RFC 4180), a missing number empty.
TEST(Results, SummaryCsvHasALinePerBenchmarkAndQuotesWhatItMust) {
  bp::Summary s;
  s.run_id = "r1", s.reference = "engine";
  s.backends = {"engine", "libtorch"};
  s.threads = {{"engine", 1}, {"libtorch", 1}};
  s.options = bp::Json::object({{"precision", "bf16"}, {"isa", "avx2"}});
  const bp::WorkloadInfo& w = workload("mlp_width");
  bp::SummaryRow row{bp::instance_id(w, 16), &w, 16, {}};
  row.cells["engine"].status = "ok";
  row.cells["engine"].median_seconds = 0.25;
  row.cells["libtorch"].status = "skipped";
  row.cells["libtorch"].message = "needs \"torch\", a bf16\nCPU";
  s.rows.push_back(row);
  const std::string csv = bp::summary_csv(s);
  const std::vector<std::string> lines = bp::fields(csv, '\n');
  ASSERT_EQ(lines.size(), 4u) << csv;  // the header, engine, libtorch over two lines
  EXPECT_EQ(lines[0].rfind("run_id,instance,phase,workload,", 0), 0u) << lines[0];
  EXPECT_EQ(lines[1],
            "r1,step/mlp_width/width:16,step,mlp_width,width,16,engine,ok,yes,1,bf16,"
            "avx2,0.25,,,,0,1,,,,,\r")
      << csv;
  EXPECT_NE(
      csv.find(",skipped,yes,1,bf16,avx2,,,,,0,,,,,,\"needs \"\"torch\"\", a bf16\nCPU\"\r\n"),
      std::string::npos)
      << csv;
}

// However many backends a run has, the summary stays within 120 columns: backends that do not
// fit go to a further block of columns, each time block starting again with the reference.
TEST(Results, SummaryFitsIn120ColumnsWithEveryBackend) {
  bp::Summary s;
  s.reference = "engine";
  s.machine = Json::object({{"cpu_model", "AMD EPYC"}});
  for (const bp::BackendSpec& b : bp::kBackendRegistry)
    s.backends.push_back(b.name), s.threads[b.name] = 1;
  const bp::WorkloadInfo& w = workload("scalar_chain");
  for (int64_t n : {10, 100000}) {
    bp::SummaryRow row{bp::instance_id(w, n), &w, n, {}};
    for (const std::string& b : s.backends) {
      bp::Cell& c = row.cells[b];
      c.status = "ok", c.median_seconds = 1.23456e-3 * double(n), c.max_rss_bytes = 4.5e9;
      c.interval = {c.median_seconds * 0.8, c.median_seconds * 1.3, 0.979};
    }
    s.rows.push_back(row);
  }
  const std::string text = bp::summary_text(s);
  for (const std::string& line : bp::split(text, '\n'))
    EXPECT_LE(line.size(), bp::kSummaryColumns) << line;
  for (const std::string& b : s.backends)
    EXPECT_TRUE(text.find(" " + b + " ") != std::string::npos ||
                text.find(" " + b + "\n") != std::string::npos)
        << b << " missing:\n"
        << text;
  std::printf(
      "  %zu lines, the longest %zu columns, for %zu backends\n", bp::split(text, '\n').size(),
      std::ranges::max(bp::split(text, '\n'), {}, &std::string::size).size(), s.backends.size());
}

// Repetitions that took turns are paired: a drift of the machine that slows both backends alike
// (here 10% a repetition) leaves every pair's ratio at 2, so the ratio's interval is [2, 2],
// where the unpaired medians' intervals would span more than a factor of 3.
TEST(Results, PairedRatiosCancelDrift) {
  bp::Summary s;
  s.reference = "engine";
  s.backends = {"engine", "libtorch"};
  const bp::WorkloadInfo& w = workload("tiny_graph");
  bp::SummaryRow row{bp::instance_id(w, 0), &w, 0, {}};
  std::vector<double> engine, torch;
  for (int i = 0; i < 10; i++) engine.push_back(std::pow(1.1, i)), torch.push_back(2 * engine[i]);
  torch[3] *= 1.5;  // one disturbed repetition moves one pair only
  for (const auto& [b, given] : {std::pair{"engine", engine}, std::pair{"libtorch", torch}}) {
    bp::Cell& c = row.cells[b];
    c.status = "ok";
    c.repetition_seconds = given;
    c.interval = bp::median_interval(given);
    std::vector<double> times = given;
    std::sort(times.begin(), times.end());
    c.median_seconds = (times[4] + times[5]) / 2;
  }
  s.rows.push_back(row);
  const bp::Summary::Ratio r = s.ratio_of(s.rows[0], "libtorch");
  EXPECT_TRUE(r.paired);
  EXPECT_DOUBLE_EQ(r.value, 2);
  EXPECT_DOUBLE_EQ(r.lo, 2);
  EXPECT_DOUBLE_EQ(r.hi, 2);  // [2nd, 9th] of ten pairs: the disturbed one is the 10th
  row.cells["libtorch"].repetition_seconds.pop_back();  // unequal counts: no pairs
  s.rows[0] = row;
  const bp::Summary::Ratio u = s.ratio_of(s.rows[0], "libtorch");
  EXPECT_FALSE(u.paired);
  EXPECT_GT(u.hi / u.lo, 3);
}

// Differences that change a step's cost are named and decisive; the microcode, a CPU flag that is
// no instruction set, the kernel's release are said but decide nothing; the memory size and the
// kernel's build date are no difference at all.
TEST(Environment, PerformanceDifferencesNamed) {
  const Json zen5 = Json::object({{"cpu_vendor", "AuthenticAMD"},
                                  {"cpu_family", "26"},
                                  {"cpu_flags", "fpu avx2 avx512f"},
                                  {"kernel", "6.18.44 #1 SMP Mon"},
                                  {"memory_total_bytes", "24000000000"}});
  Json zen4 = zen5;
  zen4.update(Json::object({{"cpu_family", "25"},
                            {"cpu_flags", "fpu avx2 avx512_bf16"},
                            {"kernel", "6.18.44 #1 SMP Tue"}}));
  zen4["memory_total_bytes"] = "16000000000";
  EXPECT_TRUE(bp::performance_differences(zen5, zen5).empty());
  const std::vector<std::string> d = bp::performance_differences(zen5, zen4);
  ASSERT_EQ(d.size(), 2u) << fmt::format("{}", fmt::join(d, "\n"));
  EXPECT_EQ(d[0], "cpu_family: 26 vs 25");
  EXPECT_EQ(d[1], "instruction sets: only in the first: avx512f; only in the second: avx512_bf16");
  // The same processor model on another host: a hypervisor's flag and a kernel release apart.
  Json other_host = zen5;
  other_host.update(Json::object(
      {{"cpu_flags", "fpu avx2 avx512f hypervisor"}, {"kernel", "6.18.50 #1 SMP Mon"}}));
  const bp::EnvironmentDifferences e = bp::environment_differences(zen5, other_host);
  EXPECT_TRUE(e.decisive.empty()) << fmt::format("{}", fmt::join(e.decisive, "\n"));
  ASSERT_EQ(e.informative.size(), 2u) << fmt::format("{}", fmt::join(e.informative, "\n"));
  EXPECT_EQ(e.informative[0], "cpu_flags: only in the first: -; only in the second: hypervisor");
  EXPECT_EQ(e.informative[1], "kernel: 6.18.44 vs 6.18.50");
}

// bench_run --isa: a level's features by /proc/cpuinfo's names, and the variable each library
// is capped by; native sets nothing.
TEST(IsaCap, LevelsNeedTheirFeaturesAndSetEveryLibrarysVariable) {
  const std::string zen3 = "fpu sse4_2 avx avx2 fma bmi2";
  const std::string zen5 = zen3 + " avx512f avx512bw avx512vl avx512dq avx512cd avx512_bf16";
  EXPECT_EQ(bp::isa_level_missing("avx2", zen3), "");
  EXPECT_EQ(bp::isa_level_missing("avx512", zen3), "avx512f avx512bw avx512vl avx512dq avx512cd");
  EXPECT_EQ(bp::isa_level_missing("avx2", "fpu sse4_2 avx"), "avx2 fma");
  EXPECT_EQ(bp::isa_level_missing("native", "fpu"), "");
  EXPECT_EQ(bp::isa_level_missing("avx512", zen5), "");
  EXPECT_TRUE(bp::is_isa_level("avx512") && !bp::is_isa_level("avx512f"));
  EXPECT_EQ(bp::default_isa_level(zen5), "avx512");
  EXPECT_EQ(bp::default_isa_level(zen3), "avx2");
  EXPECT_EQ(bp::default_isa_level("fpu sse4_2"), "native");
  EXPECT_TRUE(bp::isa_cap_environment("native", zen5).empty());
  const std::vector<std::string> avx2 = bp::isa_cap_environment("avx2", zen5);
  ASSERT_EQ(avx2.size(), std::size(bp::kIsaCapVariables));
  for (size_t i = 0; i < avx2.size(); i++)  // every variable, in the order results record them
    EXPECT_EQ(avx2[i].substr(0, avx2[i].find('=')), bp::kIsaCapVariables[i]);
  EXPECT_EQ(avx2[3], "OPENBLAS_CORETYPE=Haswell");
  const std::vector<std::string> with_bf16 = bp::isa_cap_environment("avx512", zen5);
  EXPECT_EQ(with_bf16[3], "OPENBLAS_CORETYPE=Cooperlake");
  EXPECT_EQ(with_bf16[4], "LIBXSMM_TARGET=cpx");
  const std::vector<std::string> skylake =
      bp::isa_cap_environment("avx512", zen3 + " avx512f avx512bw avx512vl avx512dq avx512cd");
  EXPECT_EQ(skylake[3], "OPENBLAS_CORETYPE=SkylakeX");
  EXPECT_EQ(skylake[4], "LIBXSMM_TARGET=skx");
}

// The variables a run records and a resume compares: ours and the libraries' (not PATH, not the
// harness's own test hooks), sorted; a difference named with both values.
TEST(Environment, VariablesThatChangeResultsAreRecordedAndCompared) {
  char a[] = "PATH=/bin", b[] = "OMP_NUM_THREADS=2", c[] = "BP_SPLIT=elems=4096",
       d[] = "BACKPROP_BENCH_FAULT=crash:x", e[] = "OPENBLAS_CORETYPE=Haswell";
  char* env[] = {a, b, c, d, e, nullptr};
  const std::vector<std::string> then = bp::result_variables(env);
  EXPECT_EQ(then, (std::vector<std::string>{"BP_SPLIT=elems=4096", "OMP_NUM_THREADS=2",
                                            "OPENBLAS_CORETYPE=Haswell"}));
  EXPECT_TRUE(bp::variable_differences(then, then).empty());
  const std::vector<std::string> now = {"BP_ISA=avx2", "OMP_NUM_THREADS=2",
                                        "OPENBLAS_CORETYPE=SkylakeX"};
  EXPECT_EQ(bp::variable_differences(then, now),
            (std::vector<std::string>{"BP_ISA: unset then, avx2 now",
                                      "BP_SPLIT: elems=4096 then, unset now",
                                      "OPENBLAS_CORETYPE: Haswell then, SkylakeX now"}));
}

}  // namespace
