// harness/harness_test.cc: the runner's pieces on inputs made up to break them: the judge
// (harness/runner/judge.h), the JSON reader and writer, the protocol's --instance flag, the
// selection (harness/runner/selection.h), what counts as another benchmark running
// (harness/common/proc.h), and the reader of Google Benchmark results with the summary's ratios and
// crossovers (harness/runner/results.h). The runner end to end, on real backend processes, is
// harness/tests/.
//   ctest -R harness_test --output-on-failure
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include "harness/common/environment.h"
#include "harness/common/json.h"
#include "harness/common/names.h"
#include "harness/common/proc.h"
#include "harness/common/protocol.h"
#include "harness/runner/backends.h"
#include "harness/runner/judge.h"
#include "harness/runner/memory.h"
#include "harness/runner/process.h"
#include "harness/runner/selection.h"
#include "harness/runner/summary_text.h"
#include "studies/registry.h"  // the program's backends and studies, as bench_run has them
#include "workloads/registry.h"

namespace {

using bp::dump_json;
using bp::Json;
using bp::json_numbers;
using bp::JsonView;

const bp::WorkloadInfo& workload(const char* name) { return *bp::find_workload(name); }

Json scalar_record(double value, std::vector<double> grads, double again_value = NAN) {
  Json step = Json::object({{"value", value}, {"grads", json_numbers(grads)}});
  Json again = step;
  if (!std::isnan(again_value)) again["value"] = again_value;
  return Json::object(
      {{"name", "x"}, {"status", "ok"}, {"step", step}, {"step_after_reset", again}});
}

Json model_record(double loss, std::vector<double> norms, std::vector<double> losses) {
  Json step0 = Json::object({{"loss", loss}, {"grad_norms", json_numbers(norms)}});
  return Json::object({{"name", "x"},
                       {"status", "ok"},
                       {"step0", step0},
                       {"step0_after_reset", step0},
                       {"step0_fresh_setup", step0},
                       {"losses", json_numbers(losses)}});
}

std::vector<bp::Verdict> judge(const char* name,
                               const std::vector<std::pair<std::string, Json>>& r) {
  std::vector<bp::BackendRecord> in;
  for (const auto& [backend, record] : r) in.push_back({backend, &record, ""});
  return bp::judge_instance(workload(name), in);
}

TEST(Judge, AgreementWithinTheRegistryTolerance) {
  // scalar graphs: relative to max(1, |reference|), 1e-9
  auto v = judge("scalar_chain", {{"engine", scalar_record(0.5, {1, 2, 300})},
                                  {"libtorch", scalar_record(0.5 + 5e-10, {1, 2, 300 + 2e-7})}});
  ASSERT_EQ(v.size(), 2u);
  EXPECT_TRUE(v[0].is_reference);
  EXPECT_EQ(v[1].status, "ok") << v[1].message;
  EXPECT_EQ(v[1].reference, "engine");
  EXPECT_NEAR(v[1].max_rel_diff, 2e-7 / 300, 1e-15);
  EXPECT_EQ(v[1].worst_at, "grads[2]");
  EXPECT_EQ(v[1].tolerance, 1e-9);
}

// A wrong reference candidate does not condemn the right backends: it fails its own checks
// (here the known answer), and the next backend in the fixed order becomes the reference.
TEST(Judge, TheReferenceMustPassItsOwnChecks) {
  auto v = judge("tiny_graph", {{"engine", scalar_record(613.5, {-35, 1050})},
                                {"libtorch", scalar_record(612.5, {-35, 1050})},
                                {"pytorch", scalar_record(612.5, {-35, 1050})}});
  EXPECT_EQ(v[0].status, "wrong");
  EXPECT_NE(v[0].message.find("off the known answer by 1 at value"), std::string::npos)
      << v[0].message;
  EXPECT_TRUE(v[1].is_reference);
  EXPECT_EQ(v[2].status, "ok");
  EXPECT_EQ(v[2].reference, "libtorch");
}

TEST(Judge, TheOddOneOutIsNamedWithItsNumber) {
  auto v = judge("scalar_chain", {{"engine", scalar_record(0.5, {1, 2, 3})},
                                  {"libtorch", scalar_record(0.5, {1, 2.001, 3})},
                                  {"pytorch", scalar_record(0.5, {1, 2, 3})}});
  EXPECT_EQ(v[0].status, "ok");
  EXPECT_EQ(v[0].confirmed_by, "pytorch");
  EXPECT_EQ(v[1].status, "wrong");
  EXPECT_EQ(v[1].worst_at, "grads[1]");
  EXPECT_NE(v[1].message.find(
                "differs from engine, pytorch (who agree) by 0.0005 at grads[1] (tolerance 1e-09)"),
            std::string::npos)
      << v[1].message;
}

// Our engine is not trusted for being first: wrong where three baselines agree, it is the one
// found wrong, and they are the ones confirmed.
TEST(Judge, AWrongEngineIsOutvoted) {
  const std::vector<double> losses(10, 2.3);
  std::vector<double> off = losses;
  off[4] = 2.4;
  auto v = judge("mlp_width", {{"engine", model_record(2.3, {0.5, 0.1}, off)},
                               {"libtorch", model_record(2.3, {0.5, 0.1}, losses)},
                               {"pytorch", model_record(2.3, {0.5, 0.1}, losses)},
                               {"torchscript", model_record(2.3, {0.5, 0.1}, losses)}});
  EXPECT_EQ(v[0].status, "wrong");
  EXPECT_EQ(v[0].worst_at, "losses[4]");
  EXPECT_NE(v[0].message.find("differs from libtorch, pytorch, torchscript (who agree)"),
            std::string::npos)
      << v[0].message;
  EXPECT_TRUE(v[1].is_reference);
  for (size_t i = 1; i < 4; i++) EXPECT_EQ(v[i].status, "ok") << v[i].backend;
  EXPECT_EQ(v[3].confirmed_by, "libtorch, pytorch");
}

// Two backends that disagree on a model, or two pairs that each agree: nobody can say who is
// right, and neither side is benchmarked as if it were.
TEST(Judge, WithoutAMajorityEveryoneIsDisputed) {
  const std::vector<double> a(10, 2.3), b(10, 2.5);
  auto v = judge("mlp_width", {{"engine", model_record(2.3, {0.5, 0.1}, a)},
                               {"libtorch", model_record(2.3, {0.5, 0.1}, b)}});
  EXPECT_EQ(v[0].status, "disputed");
  EXPECT_EQ(v[1].status, "disputed");
  EXPECT_NE(v[0].message.find("differs from libtorch (0.087 at losses[0]), and no majority"),
            std::string::npos)
      << v[0].message;
  EXPECT_NE(v[1].message.find("differs from engine"), std::string::npos) << v[1].message;
  auto w = judge("mlp_width", {{"engine", model_record(2.3, {0.5, 0.1}, a)},
                               {"libtorch", model_record(2.3, {0.5, 0.1}, b)},
                               {"pytorch", model_record(2.3, {0.5, 0.1}, a)},
                               {"torchscript", model_record(2.3, {0.5, 0.1}, b)}});
  for (const bp::Verdict& x : w) EXPECT_EQ(x.status, "disputed") << x.backend;
}

// A backend compared with nothing is unverified, unless the registry's known answer or the
// runner's finite differences confirm it.
TEST(Judge, AloneIsUnverifiedUnlessAnAnswerConfirmsIt) {
  auto m = judge("mlp_width", {{"engine", model_record(2.3, {0.5, 0.1}, std::vector(10, 2.3))}});
  EXPECT_EQ(m[0].status, "unverified");
  EXPECT_NE(m[0].message.find("no other backend passed its check"), std::string::npos);
  auto t = judge("tiny_graph", {{"engine", scalar_record(612.5, {-35, 1050})}});
  EXPECT_EQ(t[0].status, "ok");
  EXPECT_EQ(t[0].confirmed_by, "the known answer");
  // the engine's check crashed: libtorch, compared with nothing, is not "ok"
  const Json fine = scalar_record(0.5, {1, 2, 3});
  std::vector<bp::BackendRecord> in = {{"engine", nullptr, "its check process crashed"},
                                       {"libtorch", &fine, ""}};
  auto c = bp::judge_instance(workload("scalar_chain"), in);
  EXPECT_EQ(c[0].status, "failed");
  EXPECT_EQ(c[1].status, "unverified") << c[1].message;
}

// Scalar graphs have an answer no backend computed: plain doubles and finite differences.
TEST(Judge, FiniteDifferencesConfirmALoneBackendAndCatchAWrongMajority) {
  const bp::WorkloadInfo& w = workload("scalar_chain");
  bp::PlainAnswer truth;
  ASSERT_TRUE(bp::plain_answer(w, 100, &truth));
  const Json right = scalar_record(truth.value, truth.grads);
  std::vector<double> bent = truth.grads;
  bent[2] *= 1.01;
  const Json wrong = scalar_record(truth.value, bent);
  std::vector<bp::BackendRecord> in = {{"engine", &right, ""}};
  auto alone = bp::judge_instance(w, in, &truth);
  EXPECT_EQ(alone[0].status, "ok");
  EXPECT_EQ(alone[0].confirmed_by, "finite differences");
  in = {{"engine", &right, ""}, {"libtorch", &wrong, ""}, {"pytorch", &wrong, ""}};
  auto outvoted = bp::judge_instance(w, in, &truth);
  EXPECT_EQ(outvoted[0].status, "ok");
  for (size_t i = 1; i < 3; i++) {
    EXPECT_EQ(outvoted[i].status, "wrong");
    EXPECT_NE(outvoted[i].message.find("off finite differences by 0.01 at grads[2]"),
              std::string::npos)
        << outvoted[i].message;
  }
  // the oracle itself holds up: the engine's own gradients are within its tolerance
  bp::PlainAnswer small;
  ASSERT_TRUE(bp::plain_answer(workload("small_graph"), 0, &small));
  EXPECT_NEAR(small.value, 24.7041, 5e-5);
  EXPECT_NEAR(small.grads[0], 138.8338, 5e-5 * 138.8338);
  EXPECT_FALSE(bp::plain_answer(workload("mlp_width"), 16, &small)) << "models have none";
}

// A GradBench eval has a gradient per input: the check holds a sample of them, labelled with the
// parameter each one is, and finite differences are taken at the same ones.
TEST(Judge, ASampleOfManyGradientsIsCheckedAtTheParametersItNames) {
  const bp::WorkloadInfo& w = workload("lse");
  bp::PlainAnswer truth;
  ASSERT_TRUE(bp::plain_answer(w, 100, &truth));
  ASSERT_EQ(truth.grads.size(), size_t(bp::kCheckedGrads));
  EXPECT_EQ(truth.grad_of.front(), 0);
  EXPECT_EQ(truth.grad_of.back(), 99);
  auto sampled = [&](std::vector<double> grads, std::vector<int64_t> of) {
    Json r = scalar_record(truth.value, grads);
    std::vector<double> at(of.begin(), of.end());
    for (const char* field : {"step", "step_after_reset"})
      r[field]["grad_of"] = json_numbers(at), r[field]["num_grads"] = 100.0;
    return r;
  };
  const Json right = sampled(truth.grads, truth.grad_of);
  std::vector<double> bent = truth.grads;
  bent[5] += 0.01;
  const Json wrong = sampled(bent, truth.grad_of);
  std::vector<bp::BackendRecord> in = {{"engine", &right, ""}, {"libtorch", &wrong, ""}};
  auto v = bp::judge_instance(w, in, &truth);
  EXPECT_EQ(v[0].status, "ok") << v[0].message;
  EXPECT_EQ(v[1].status, "wrong");
  const std::string at = fmt::format("at grads[{}] ", truth.grad_of[5]);
  EXPECT_NE(v[1].message.find(at), std::string::npos) << v[1].message << " wants " << at;
  // another parameter count samples other parameters: named, not compared number by number
  std::vector<int64_t> other = truth.grad_of;
  other[1] += 1;
  const Json shifted = sampled(truth.grads, other);
  in = {{"engine", &right, ""}, {"libtorch", &shifted, ""}};
  v = bp::judge_instance(w, in, &truth);
  EXPECT_EQ(v[1].status, "wrong");
  EXPECT_NE(v[1].message.find("reported grads[" + std::to_string(other[1])), std::string::npos)
      << v[1].message;
  // a sample of another length
  const Json short_record = sampled({1, 2, 3}, {0, 1, 2});
  in = {{"libtorch", &short_record, ""}};
  v = bp::judge_instance(w, in, &truth);
  EXPECT_NE(v[0].message.find("reported 3 gradients; lse checks 32 at this size"),
            std::string::npos)
      << v[0].message;
}

TEST(Judge, NonFiniteNumbersAreWrongWhereverTheyAre) {
  Json nan_grad = scalar_record(0.5, {1, 2, 3});
  nan_grad["step"] = Json::object({{"value", 0.5}, {"grads", Json::array({1, Json(), 3})}});
  auto v =
      judge("scalar_chain", {{"engine", scalar_record(0.5, {1, 2, 3})}, {"libtorch", nan_grad}});
  EXPECT_EQ(v[1].status, "wrong");
  EXPECT_NE(v[1].message.find("grads[1] is not a finite number"), std::string::npos)
      << v[1].message;
  // NaN in the engine: it is not trusted, and libtorch, now alone, is unverified
  auto w =
      judge("scalar_chain", {{"engine", nan_grad}, {"libtorch", scalar_record(0.5, {1, 2, 3})}});
  EXPECT_EQ(w[0].status, "wrong");
  EXPECT_EQ(w[1].status, "unverified");
  // Inf and a NaN that std::max would have dropped
  Json inf = scalar_record(INFINITY, {1, 2, 3});
  auto x = judge("scalar_chain", {{"engine", scalar_record(0.5, {1, 2, 3})}, {"libtorch", inf}});
  EXPECT_EQ(x[1].status, "wrong");
  EXPECT_NE(x[1].message.find("value is not a finite number"), std::string::npos);
}

TEST(Judge, BrokenResetIsCaught) {
  auto v = judge("tiny_graph", {{"engine", scalar_record(612.5, {-35, 1050}, 1225.0)}});
  EXPECT_EQ(v[0].status, "wrong");
  EXPECT_NE(v[0].message.find("reset is broken"), std::string::npos) << v[0].message;
  Json model = model_record(4.2, {1, 2}, std::vector<double>(10, 4.0));
  model["step0_fresh_setup"] =
      Json::object({{"loss", 4.2}, {"grad_norms", json_numbers(std::vector<double>{1, 2.5})}});
  auto m = judge("mlp_width", {{"engine", model}});
  EXPECT_EQ(m[0].status, "wrong");
  EXPECT_NE(m[0].message.find("fresh setup"), std::string::npos) << m[0].message;
}

TEST(Judge, ModelsCompareLossesAndGradientNorms) {
  const std::vector<double> losses(10, 2.3);
  std::vector<double> drifted = losses;
  drifted[9] = 2.3 * (1 + 3e-3);
  auto v =
      judge("mlp_width", {{"engine", model_record(2.3, {0.5, 0.1}, losses)},
                          {"libtorch", model_record(2.3, {0.5, 0.1}, drifted)},
                          {"pytorch", model_record(2.3, {0.5, 0.1}, std::vector<double>(9, 2.3))},
                          {"torchscript", model_record(2.3, {0.5, 0.1}, losses)}});
  EXPECT_EQ(v[1].status, "wrong");
  EXPECT_EQ(v[1].worst_at, "losses[9]");
  EXPECT_EQ(v[2].status, "wrong");
  EXPECT_NE(v[2].message.find("reported 9 training losses; the check asks for 10"),
            std::string::npos)
      << v[2].message;
}

TEST(Judge, FailedSkippedAndMissingRecordsSayWhy) {
  const Json failed = Json::object({{"name", "x"}, {"status", "failed"}, {"message", "boom"}});
  const Json skipped =
      Json::object({{"name", "x"}, {"status", "skipped"}, {"message", "no tensors"}});
  std::vector<bp::BackendRecord> in = {{"engine", &failed, ""},
                                       {"libtorch", &skipped, ""},
                                       {"pytorch", nullptr, "its check process was killed"}};
  auto v = bp::judge_instance(workload("tiny_graph"), in);
  EXPECT_EQ(v[0].status, "failed");
  EXPECT_EQ(v[0].message, "boom");
  EXPECT_EQ(v[1].status, "skipped");
  EXPECT_EQ(v[2].status, "failed");
  EXPECT_EQ(v[2].message, "its check process was killed");
}

TEST(Json, StrictNumbersAndNullForNonFinite) {
  EXPECT_THROW(bp::parse_json("[NaN]"), std::runtime_error);
  EXPECT_THROW(bp::parse_json("{\"a\": Infinity}"), std::runtime_error);
  EXPECT_THROW(bp::parse_json("[+1]"), std::runtime_error);
  EXPECT_THROW(bp::parse_json("[-]"), std::runtime_error);
  // Google Benchmark writes the cv of an all-zero counter as a bare NaN: its files' reader takes it
  // as null (and null as NaN through num_or), only outside strings
  const Json gb_json =
      bp::parse_benchmark_json(R"([NaN, -NaN, Infinity, -Infinity, 2, {"NaN": "-Infinity"}])");
  const JsonView gb = gb_json;
  EXPECT_TRUE(gb[0].is_null() && gb[1].is_null());
  EXPECT_TRUE(std::isnan(gb[0].num_or(NAN)));
  EXPECT_TRUE(gb[2].is_null() && gb[3].is_null());
  EXPECT_EQ(gb[4].num_or(0), 2);
  EXPECT_EQ(gb[5]["NaN"].str_or(""), "-Infinity");
  EXPECT_THROW(bp::parse_benchmark_json("[NaNa]"), std::runtime_error);
  EXPECT_EQ(bp::parse_json("[-1.5e3]")[0].get<double>(), -1500);
  EXPECT_THROW(bp::parse_json("[1e999]"), std::runtime_error);  // past double's range
  EXPECT_EQ(dump_json(json_numbers(std::vector<double>{1, NAN, INFINITY})), "[1.0, null, null]");
  const Json j_json = bp::parse_json(R"({"z": 1, "a": [true, null, "x\"y"]})");
  const JsonView j = j_json;
  EXPECT_EQ(dump_json(j), R"({"z": 1, "a": [true, null, "x\"y"]})");  // order kept
  EXPECT_TRUE(j["missing"].is_null());
}

// Strings are UTF-8 both ways: \\u escapes beyond ASCII (a surrogate pair joined) are read as
// their characters, and bytes that are not UTF-8 are written as U+FFFD, so a dump is JSON.
TEST(Json, UnicodeEscapesAreReadAndInvalidUtf8IsNeverWritten) {
  EXPECT_EQ(bp::parse_json(R"(["\u00e9\u4e2d\ud83d\ude00"])")[0].get<std::string>(),
            "\xc3\xa9\xe4\xb8\xad\xf0\x9f\x98\x80");                   // é, 中, an emoji
  EXPECT_THROW(bp::parse_json(R"(["\ud83dx"])"), std::runtime_error);  // an unpaired surrogate
  EXPECT_THROW(bp::parse_json(R"(["\u12"])"), std::runtime_error);
  EXPECT_EQ(dump_json(Json("caf\xc3\xa9")), "\"caf\xc3\xa9\"");  // valid: as it is
  // a stray byte, a cut sequence, an overlong '/', a surrogate: U+FFFD for each bad sequence, the
  // rest kept
  const std::string fffd = "\xef\xbf\xbd";
  const std::string bad =
      dump_json(Json::object({{"k\xff", "a\xff b\xe4\xb8 c\xc0\xaf d\xed\xa0\x80"}}));
  EXPECT_EQ(bad, "{\"k" + fffd + "\": \"a" + fffd + " b" + fffd + " c" + fffd + fffd + " d" + fffd +
                     fffd + fffd + "\"}");
  EXPECT_EQ(JsonView(bp::parse_json(bad))["k" + fffd].str_or(""),
            "a" + fffd + " b" + fffd + " c" + fffd + fffd + " d" + fffd + fffd + fffd);
  EXPECT_THROW(bp::parse_json("[\"\xff\"]"), std::runtime_error);  // and none is read
}

// A syntax error names the byte, and quotes at most 40 bytes of what it read.
TEST(Json, ASyntaxErrorIsOneShortLine) {
  try {
    bp::parse_json("{\"kind\": \"" + std::string(1 << 20, 'x'));
    FAIL() << "parsed";
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    EXPECT_LT(what.size(), 200u) << what.substr(0, 300);
    EXPECT_NE(what.find("at byte 10485"), std::string::npos) << what.substr(0, 300);
    EXPECT_EQ(what.find('\n'), std::string::npos);
  }
}

// A document nested past 256 levels is refused, not recursed into.
TEST(Json, DeepNestingIsRefused) {
  EXPECT_NO_THROW(bp::parse_json(std::string(256, '[') + std::string(256, ']')));
  EXPECT_THROW(bp::parse_json(std::string(257, '[') + std::string(257, ']')), std::runtime_error);
  EXPECT_THROW(bp::parse_json(std::string(1 << 20, '[')), std::runtime_error);
}

// A const read of a missing key through ordered_json itself is not undefined behaviour: it stops.
TEST(JsonDeathTest, AConstReadOfAMissingKeyStops) {
  const Json j = Json::object({{"a", 1}});
  EXPECT_DEATH((void)j["b"], "does not hold");
  EXPECT_TRUE(JsonView(j)["b"].is_null());  // the view reads it as null
  EXPECT_TRUE(JsonView(j)["a"]["c"][3].is_null());
}

TEST(Protocol, InstanceFlagRoundTrips) {
  const bp::InstanceSpec s{.workload = "scalar_chain",
                           .size = 1000,
                           .name = "grad/scalar_chain/engine/nodes:1000/threads:1"};
  const std::string flag = bp::instance_flag(s);
  EXPECT_EQ(flag,
            "--instance=workload=scalar_chain,size=1000,"
            "name=grad/scalar_chain/engine/nodes:1000/threads:1");
  std::string error;
  auto back = bp::parse_instance_spec(flag.substr(11), &error);
  ASSERT_TRUE(back) << error;
  EXPECT_EQ(back->workload, s.workload);
  EXPECT_EQ(back->size, 1000);
  EXPECT_EQ(back->name, s.name);
  EXPECT_FALSE(bp::parse_instance_spec("workload=a,size=1x", &error));
  EXPECT_NE(error.find("size '1x' is not a whole number"), std::string::npos) << error;
  EXPECT_FALSE(bp::parse_instance_spec("size=3", &error));
  EXPECT_NE(error.find("name the workload"), std::string::npos) << error;
  EXPECT_FALSE(bp::parse_instance_spec("workload=a,colour=red", &error));
}

TEST(Names, InstancesAndBenchmarks) {
  EXPECT_EQ(bp::instance_id(workload("scalar_chain"), 1000), "grad/scalar_chain/nodes:1000");
  EXPECT_EQ(bp::instance_id(workload("tiny_graph"), 0), "grad/tiny_graph");
  EXPECT_EQ(bp::bench_name(workload("mini_gpt"), 8, "libtorch", 2),
            "step/mini_gpt/libtorch/batch:8/threads:2");
}

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
  ASSERT_EQ(k["shapes"].elements().size(), 2u);
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

// A child of this test that runs sleep under the name `program` (its argv[0], what
// /proc/<pid>/cmdline shows), returned once it has exec'd (at most 5 s: a loaded machine).
pid_t start_named(const std::string& program) {
  const pid_t pid = fork();
  if (pid == 0) {
    execl("/bin/sleep", program.c_str(), "30", static_cast<char*>(nullptr));
    _exit(127);
  }
  for (int tries = 0; tries < 500; tries++) {
    std::ifstream cmdline("/proc/" + std::to_string(pid) + "/cmdline");
    std::string first;
    std::getline(cmdline, first, '\0');
    if (first == program) break;
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

// A backend's peak RSS is its own: not the copy of the runner that fork() made, however large
// the runner has grown (exec records the copy's high-water mark, which wait4 reports).
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
