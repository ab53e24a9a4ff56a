// harness/gradbench/tool_test.cc: bp_gradbench's protocol session on hand-written transcripts:
// each module's answers against our engine's own step and finite differences, the tensor forms'
// against the scalar graphs by GradBench's judge, the shapes of
// GradBench's manual tool, the min_runs/min_seconds rule and the timings apart, and every bad
// message answered with one error while the session goes on.
//   build/gradbench_test   (or ctest -R GradbenchTool)
#include "harness/gradbench/tool.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "apps/gradbench_engine.h"

namespace {

using bp::Json;
using bp::json_numbers;
using bp::JsonView;
// bp_gradbench's own backends (apps/gradbench_backends.h), libtorch aside.
using Session = bp::gradbench::Session<bp::gradbench::OurEngineBackends>;

// A reply, kept, and read as the harness reads JSON (a missing field reads as null).
struct Reply {
  Json json;
  JsonView operator[](std::string_view key) const { return JsonView(json)[key]; }
};
std::string dump_json(const Reply& r) { return bp::dump_json(r.json); }

Reply ask(Session& s, const std::string& line) { return {bp::parse_json(s.reply(line))}; }

std::string evaluate(const std::string& module, const std::string& function, const Json& input,
                     int id = 2) {
  Json m =
      Json::object({{"id", id}, {"kind", "evaluate"}, {"module", module}, {"function", function}});
  m["input"] = input;
  return bp::dump_json(m);
}

Json with(Json j, const char* key, Json value) {
  j[key] = std::move(value);
  return j;
}

// Our own seeded input of a workload, with GradBench's Runs.
template <class W>
Json input_of(int64_t size, int min_runs = 1) {
  return with(with(bp::gradbench::input_json(W::input(size)), "min_runs", min_runs), "min_seconds",
              0);
}

std::vector<double> flat(JsonView v) {
  std::vector<double> out;
  if (v.is_number()) out.push_back(v.num_or(NAN));
  for (JsonView e : v.elements()) {
    const std::vector<double> inner = flat(e);
    out.insert(out.end(), inner.begin(), inner.end());
  }
  return out;
}

TEST(GradbenchTool, EachModuleAnswersAsOurEngineInGradbenchsShapes) {
  for (const char* backend : {"scalar", "compiled"}) {
    Session s(backend);
    EXPECT_EQ(ask(s, R"({"id": 0, "kind": "start", "eval": "lse"})")["tool"].str_or(""),
              "backprop-bench");
    auto check = [&]<class W>(const std::string& module, const std::string& function,
                              int64_t size) {
      ASSERT_TRUE(
          ask(s, R"({"id": 1, "kind": "define", "module": ")" + module + "\"}")["success"].bool_or(
              false));
      const Reply r = ask(s, evaluate(module, function, input_of<W>(size)));
      ASSERT_TRUE(r["success"].bool_or(false)) << dump_json(r);
      std::vector<double> got = flat(r["output"]);
      if (module == "gmm") {  // {"alpha", "mu", "q", "l"}, each row of mu, q and l a list
        got.clear();
        for (const char* part : {"alpha", "mu", "q", "l"}) {
          ASSERT_FALSE(r["output"][part].is_null()) << part;
          const std::vector<double> p = flat(r["output"][part]);
          got.insert(got.end(), p.begin(), p.end());
        }
        EXPECT_EQ(r["output"]["mu"].size(), size_t(size)) << "one row per component";
      }
      const std::vector<double> want = bp::eval_gradient<W, bp::EngineBackend>(size);
      ASSERT_EQ(got.size(), want.size()) << module;
      double worst = 0;
      for (size_t i = 0; i < want.size(); i++) worst = std::max(worst, std::fabs(got[i] - want[i]));
      std::printf("  %s %s %s size %lld: %zu numbers, max |tool - engine step| %.1e (bitwise)\n",
                  backend, module.c_str(), function.c_str(), (long long)size, got.size(), worst);
      EXPECT_EQ(worst, 0.0) << module;
      // the primal: a number, our graph's value on plain doubles
      const bool objective = module == "lstm" || module == "gmm";  // others call it primal
      const Reply p =
          ask(s, evaluate(module, objective ? "objective" : "primal", input_of<W>(size)));
      ASSERT_TRUE(p["success"].bool_or(false)) << dump_json(p);
      EXPECT_TRUE(p["output"].is_number());
      EXPECT_NEAR(p["output"].num_or(NAN), bp::plain_answer<W>(size).value, 0.0);
    };
    check.template operator()<bp::Lse>("lse", "gradient", 40);
    check.template operator()<bp::Llsq>("llsq", "gradient", 20);
    check.template operator()<bp::Lstm>("lstm", "jacobian", 6);
    check.template operator()<bp::GmmD10>("gmm", "jacobian", 3);
    check.template operator()<bp::Det>("det", "gradient", 4);
  }
}

// GradBench's judge: |x - y| / max(1, |x| + |y|) of every number, the largest.
double gradbench_error(const std::vector<double>& x, const std::vector<double>& y) {
  double worst = 0;
  for (size_t i = 0; i < x.size(); i++)
    worst =
        std::max(worst, std::fabs(x[i] - y[i]) / std::max(1.0, std::fabs(x[i]) + std::fabs(y[i])));
  return worst;
}
std::vector<double> gmm_flat(JsonView out) {
  std::vector<double> got;
  for (const char* part : {"alpha", "mu", "q", "l"}) {
    const std::vector<double> p = flat(out[part]);
    got.insert(got.end(), p.begin(), p.end());
  }
  return got;
}

// The tensor forms against the scalar graphs (double) by GradBench's own measure of error. In
// float64, bp_gradbench's default, they agree to rounding (the two sum in other orders). In
// float32 lstm is far inside GradBench's tolerance (1e-4); gmm's gradients are sums over 1000
// points and land near it (5e-5 here, up to 1e-4 at d=10, k=25: docs/gradbench.md), so the test
// holds gmm to 2e-4 there. A module without a tensor form is refused at define with the reason.
TEST(GradbenchTool, TensorFormsAgreeWithTheScalarGraphsByGradbenchsMeasure) {
  using bp::gradbench::Precision;
  struct Case {
    const char* backend;
    Precision precision;
    double lstm_tolerance, gmm_tolerance;
  };
  for (const Case& c : {Case{"engine", Precision::float64, 1e-11, 1e-11},
                        Case{"compiled_tensor", Precision::float64, 1e-11, 1e-11},
                        Case{"engine", Precision::float32, 1e-4, 2e-4},
                        Case{"compiled_tensor", Precision::float32, 1e-4, 2e-4}}) {
    Session s(c.backend, c.precision);
    const Reply lstm = ask(s, evaluate("lstm", "jacobian", input_of<bp::Lstm>(40, 2)));
    ASSERT_TRUE(lstm["success"].bool_or(false)) << dump_json(lstm);
    const double lstm_error =
        gradbench_error(flat(lstm["output"]), bp::eval_gradient<bp::Lstm, bp::EngineBackend>(40));
    const Reply gmm = ask(s, evaluate("gmm", "jacobian", input_of<bp::GmmD10>(7, 2)));
    ASSERT_TRUE(gmm["success"].bool_or(false)) << dump_json(gmm);
    const double gmm_error = gradbench_error(gmm_flat(gmm["output"]),
                                             bp::eval_gradient<bp::GmmD10, bp::EngineBackend>(7));
    const std::string name =
        std::string(c.backend) + " " + std::string(bp::gradbench::precision_name(c.precision));
    std::printf("  %s: lstm 40 chars error %.1e (tolerance %.0e), gmm d=10 k=7 %.1e (%.0e)\n",
                name.c_str(), lstm_error, c.lstm_tolerance, gmm_error, c.gmm_tolerance);
    EXPECT_LE(lstm_error, c.lstm_tolerance) << name;
    EXPECT_LE(gmm_error, c.gmm_tolerance) << name;
    std::vector<std::string> names;
    for (JsonView t : gmm["timings"].elements()) names.push_back(t["name"].str_or(""));
    const std::vector<std::string> want =
        std::string(c.backend) == "engine"
            ? std::vector<std::string>{"prepare", "evaluate", "evaluate"}
            : std::vector<std::string>{"prepare", "compile", "evaluate", "evaluate"};
    EXPECT_EQ(names, want);
    const Reply lse = ask(s, R"({"id": 1, "kind": "define", "module": "lse"})");
    EXPECT_FALSE(lse["success"].bool_or(false));
    EXPECT_NE(lse["error"].str_or("").find("no tensor form"), std::string::npos) << dump_json(lse);
  }
  Session compiled("compiled_tensor", Precision::float64);
  const Reply start = ask(compiled, R"({"id": 0, "kind": "start"})");
  EXPECT_EQ(start["config"]["precision"].str_or(""), "float64") << dump_json(start);
}

// At GradBench's own gmm dimensions (its default run is d = 2, 10, 20, 32 and 64), where the
// float32 tensor form is judged invalid (about 1e-3: docs/gradbench.md), the float64 one agrees
// with the scalar graph to rounding.
TEST(GradbenchTool, Float64TensorFormsPassAtGradbenchsGmmDimensions) {
  using bp::GmmEval;
  using bp::gradbench::Precision;
  Session s("engine", Precision::float64), f("engine", Precision::float32);
  const Json input = input_of<GmmEval<20>>(5);
  const std::vector<double> want = bp::eval_gradient<GmmEval<20>, bp::EngineBackend>(5);
  const Reply r = ask(s, evaluate("gmm", "jacobian", input));
  const Reply r32 = ask(f, evaluate("gmm", "jacobian", input));
  ASSERT_TRUE(r["success"].bool_or(false)) << dump_json(r);
  ASSERT_TRUE(r32["success"].bool_or(false)) << dump_json(r32);
  const double error = gradbench_error(gmm_flat(r["output"]), want);
  std::printf("  gmm d=20 k=5 n=1000: float64 error %.1e (tolerance 1e-11), float32 %.1e\n", error,
              gradbench_error(gmm_flat(r32["output"]), want));
  EXPECT_LE(error, 1e-11);
}

// GradBench's smoke test, hello, as its eval runs it: x = 1, squared, then the square's gradient
// ("double") of that, four times; on the tape and the compiled program. The tensor backends say
// why not at define, and an input that is no number is one error.
TEST(GradbenchTool, HelloPassesGradbenchsSmokeTest) {
  for (const char* backend : {"scalar", "compiled"}) {
    Session s(backend);
    ASSERT_TRUE(
        ask(s, R"({"id": 1, "kind": "define", "module": "hello"})")["success"].bool_or(false))
        << backend;
    double x = 1;
    for (int i = 0; i < 4; i++) {
      const Reply y = ask(s, evaluate("hello", "square", x));
      ASSERT_TRUE(y["success"].bool_or(false)) << dump_json(y);
      EXPECT_EQ(y["output"].num_or(NAN), x * x);
      const Reply g = ask(s, evaluate("hello", "double", y["output"].json()));
      ASSERT_TRUE(g["success"].bool_or(false)) << dump_json(g);
      EXPECT_EQ(g["output"].num_or(NAN), 2 * x * x);
      x = g["output"].num_or(NAN);
    }
    EXPECT_EQ(x, 32768.0) << backend;
    for (const Json& bad : {Json("seven"), Json::object({{"x", 1}}), Json()}) {
      const Reply r = ask(s, evaluate("hello", "double", bad));
      EXPECT_FALSE(r["success"].bool_or(true)) << dump_json(r);
      EXPECT_NE(r["error"].str_or("").find(bad.is_null() ? "no \"input\"" : "expected a finite"),
                std::string::npos)
          << dump_json(r);
    }
  }
  Session tensor("engine");
  EXPECT_NE(
      ask(tensor, R"({"id": 1, "kind": "define", "module": "hello"})")["error"].str_or("").find(
          "no tensor form"),
      std::string::npos);
}

// ode's primal is GradBench's vector (y at t = 2), its gradient that of y's last element.
TEST(GradbenchTool, OdesPrimalIsTheWholeSolution) {
  Session s("compiled");
  const Reply y = ask(s, evaluate("ode", "primal", input_of<bp::Ode>(5)));
  ASSERT_TRUE(y["success"].bool_or(false)) << dump_json(y);
  ASSERT_EQ(y["output"].size(), size_t(5));
  EXPECT_EQ(y["output"][4].num_or(NAN), bp::plain_answer<bp::Ode>(5).value);
  const Reply g = ask(s, evaluate("ode", "gradient", input_of<bp::Ode>(5)));
  const std::vector<double> want = bp::eval_gradient<bp::Ode, bp::EngineBackend>(5);
  EXPECT_EQ(flat(g["output"]), want);
}

// Each run its "evaluate" timing; what is done once is timed apart.
TEST(GradbenchTool, RunsAtLeastMinRunsAndMinSecondsWithSetupTimedApart) {
  Session scalar("scalar"), compiled("compiled");
  Reply r = ask(scalar, evaluate("lse", "gradient", input_of<bp::Lse>(100, 3)));
  std::vector<std::string> names;
  for (JsonView t : r["timings"].elements()) names.push_back(t["name"].str_or(""));
  EXPECT_EQ(names, (std::vector<std::string>{"prepare", "evaluate", "evaluate", "evaluate"}));
  r = ask(compiled, evaluate("lse", "gradient", input_of<bp::Lse>(100, 2)));
  names.clear();
  for (JsonView t : r["timings"].elements()) names.push_back(t["name"].str_or(""));
  EXPECT_EQ(names, (std::vector<std::string>{"prepare", "compile", "evaluate", "evaluate"}));
  Json timed = input_of<bp::Lse>(100);
  timed["min_seconds"] = 0.02;
  r = ask(scalar, evaluate("lse", "gradient", timed));
  double seconds = 0;
  for (JsonView t : r["timings"].elements())
    if (t["name"].str_or("") == "evaluate") seconds += t["nanoseconds"].num_or(NAN) * 1e-9;
  EXPECT_GE(seconds, 0.02);
}

// A bad message gets one error response naming what is wrong, and the next message is answered.
TEST(GradbenchTool, EveryBadMessageGetsOneErrorAndTheSessionGoesOn) {
  Session s("scalar");
  const Json good = input_of<bp::Lse>(4);
  Json lstm = input_of<bp::Lstm>(5);
  lstm["state"] = Json::array({json_numbers(std::vector<double>{1, 2})});
  Json gmm = input_of<bp::GmmD2>(3);
  gmm["alpha"] = json_numbers(std::vector<double>{1, 2});
  std::string deep(100000, '[');
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{\"id\": 3, \"kind\": \"evaluate\", \"module\": \"lse\"", "not JSON"},
      {"[1, 2]", "not a JSON object"},
      {R"({"kind": "define", "module": "lse"})", "no numeric \"id\""},
      {R"({"id": "seven", "kind": "start"})", "no numeric \"id\""},
      {R"({"id": 4, "kind": "shutdown"})", "unknown kind 'shutdown'"},
      {R"({"id": 5, "kind": "define", "module": "ba"})", "unknown module 'ba'"},
      {evaluate("kmeans", "cost", good), "unknown module 'kmeans'"},
      {evaluate("lse", "hessian", good), "unknown function 'hessian' of lse; valid: primal"},
      {R"({"id": 6, "kind": "evaluate", "module": "lse", "function": "gradient"})", "no \"input\""},
      {evaluate("lse", "gradient", Json::object({{"y", 1}})), "no field 'x'"},
      {evaluate("lse", "gradient", Json::object({{"x", Json::array({1, "two"})}})),
       "x[1]: expected a finite number"},
      {evaluate("llsq", "gradient", Json::object({{"x", Json::array({1})}, {"n", 1.5}})),
       "n: expected a whole number"},
      {evaluate("lstm", "jacobian", lstm), "state: 1 rows, expected 4"},
      {evaluate("gmm", "jacobian", gmm), "alpha: 2 numbers, expected k = 3"},
      {evaluate("lse", "gradient", with(good, "min_runs", 0)), "min_runs: expected a whole"},
      {deep, "nested deeper than 256 levels"},
  };
  for (const auto& [line, says] : cases) {
    const std::string reply = s.reply(line);
    const Reply r{bp::parse_json(reply)};
    EXPECT_FALSE(r["success"].bool_or(false)) << reply;
    EXPECT_NE(r["error"].str_or("").find(says), std::string::npos)
        << line.substr(0, 120) << "\n  -> " << reply << "\n  wants: " << says;
    EXPECT_EQ(reply.find('\n'), std::string::npos) << "one line";
    // and the session is still there
    EXPECT_TRUE(ask(s, evaluate("lse", "gradient", good, 9))["success"].bool_or(false)) << line;
  }
  // Work and memory are bounded before anything runs: sizes past 2^27 operations on a tape, 2^33
  // without (ell = 16 ran for hours; n = 2^40 and s = 2^30 came in 1 kB messages), runs past 10^5.
  const std::vector<std::pair<std::string, std::string>> too_much = {
      {evaluate("det", "gradient",
                Json::object({{"A", json_numbers(std::vector<double>(256, 0.5))}, {"ell", 16}})),
       "ell = 16: about 6.28e+13 operations, past this tool's limit of 2^27 on a tape"},
      {evaluate("det", "primal",
                Json::object({{"A", json_numbers(std::vector<double>(256, 0.5))}, {"ell", 16}})),
       "ell = 16: about 6.28e+13 operations, past this tool's limit of 2^33 ("},
      {evaluate("llsq", "gradient",
                Json::object({{"x", Json::array({1, 2})}, {"n", double(int64_t(1) << 40)}})),
       "n = 1099511627776 points of 2 coefficients: about 8.8e+12 operations"},
      {evaluate("ode", "primal",
                Json::object({{"x", Json::array({1, 2})}, {"s", double(1 << 30)}})),
       "s = 1073741824 steps of 2 equations"},
      {evaluate("llsq", "gradient", Json::object({{"x", Json::array({1})}, {"n", 1e300}})),
       "n: expected a whole number from 2 to 1099511627776"},
      {evaluate("lse", "gradient", with(good, "min_runs", 1e9)),
       "min_runs: expected a whole number from 1 to 10^5"},
      {evaluate("lse", "gradient", with(good, "min_seconds", 1e6)),
       "min_seconds: expected a number of seconds from 0 to 600"},
  };
  for (const auto& [line, says] : too_much) {
    const Reply r = ask(s, line);
    EXPECT_FALSE(r["success"].bool_or(false)) << dump_json(r);
    EXPECT_NE(r["error"].str_or("").find(says), std::string::npos)
        << dump_json(r) << "\n  wants: " << says;
  }
  // A name sent back in an error is cut to 40 bytes, and invalid UTF-8 in it is U+FFFD: the
  // reply stays short and is JSON.
  const std::string long_kind(10000000, 'k');
  const std::string reply = s.reply(R"({"id": 11, "kind": ")" + long_kind + "\"}");
  EXPECT_LT(reply.size(), 300u) << reply.substr(0, 300);
  EXPECT_NE(JsonView(bp::parse_json(reply))["error"].str_or("").find("(10000000 bytes)"),
            std::string::npos);
  // A message that is not UTF-8 is not JSON (RFC 8259): said so, in a reply that is.
  const std::string bad_utf8 = s.reply("{\"id\": 12, \"kind\": \"\xff\xfe\"}");
  EXPECT_NE(bad_utf8.find("not JSON"), std::string::npos) << bad_utf8;
  EXPECT_NE(bad_utf8.find("ill-formed UTF-8"), std::string::npos) << bad_utf8;
  EXPECT_NO_THROW(bp::parse_json(bad_utf8)) << bad_utf8;
  // a huge input: 10^6 numbers in one line
  const std::string huge = evaluate("lse", "gradient", input_of<bp::Lse>(1000000));
  std::printf("  a message of %.1f MB\n", double(huge.size()) / 1e6);
  const Reply r = ask(s, huge);
  ASSERT_TRUE(r["success"].bool_or(false));
  EXPECT_EQ(r["output"].size(), size_t(1000000));
  // analysis and unknown backends
  EXPECT_EQ(s.reply(R"({"id": 10, "kind": "analysis", "of": 9, "valid": true})"), R"({"id": 10})");
  Session unknown("tensorflow");
  EXPECT_NE(
      ask(unknown, R"({"id": 1, "kind": "define", "module": "lse"})")["error"].str_or("").find(
          "unknown backend 'tensorflow'"),
      std::string::npos);
}

}  // namespace
