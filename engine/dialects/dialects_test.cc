// engine/dialects/dialects_test.cc: every kernel of every dialect (engine/dialects/dialects.h)
// proven like the engine's own, and the choice among them.
//
// Each op case of engine/core/op_cases_test.h runs compiled with each dialect of each op family it
// uses forced: in double against central finite differences of the eager loss (the same function,
// whatever the kernel), and in float against the eager engine in double (so oneDNN, float only, is
// checked too). Then: priority is the eager engine's kernels; auto picks a timed candidate and
// records its measurements; a forced dialect that cannot run a shape, an unknown or absent one,
// each refused with one line. Which dialects this build lacks is printed, not failed: a build
// without the optional libraries passes (make sanitize builds so).
//   build/engine_tests --gtest_filter='Dialects*'    (or ctest -R Dialects)
#include "engine/dialects/dialects.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "engine/compiled/program.h"
#include "engine/core/op_cases_test.h"

// The process hooks bench_compiled uses (resident memory from /proc, timing in a child), which
// this binary's main() makes (apps/engine_tests.cc): the engine itself has none.
extern bp::ProcessHooks g_program_process_hooks;

namespace {

using bp::DialectSelector;
using bp::DialectSpec;
using bp::Kernel;
using bp::OpFamily;

DialectSpec forced(OpFamily f, const std::string& name) {
  std::string error;
  const std::string text = std::string(bp::op_family_names[size_t(f)]) + ":" + name;
  std::optional<DialectSpec> spec = bp::parse_dialect_spec<double>(text, &error);
  EXPECT_TRUE(spec) << error;
  return spec.value_or(DialectSpec{});
}

// What other processes of a run shared, as a reader hands it over: the lines after the cursor
// (here a count of lines).
DialectSelector<float>::ReadShared reading(std::vector<std::string> lines) {
  return [lines = std::move(lines)](size_t& cursor) {
    std::vector<std::string> fresh(lines.begin() + std::min(cursor, lines.size()), lines.end());
    cursor = lines.size();
    return fresh;
  };
}

// The families a case's ops use.
std::set<OpFamily> families_of(const CompiledRun& run) {
  std::set<OpFamily> fams;
  for (bp::TensorOp op : run.ops)
    if (bp::family_of(op) != OpFamily::count) fams.insert(bp::family_of(op));
  return fams;
}

TEST(Dialects, PrintWhatThisBuildHas) {
  for (size_t f = 0; f < size_t(OpFamily::count); f++) {
    std::string line;
    for (const std::string& name : bp::dialects_of<float>(OpFamily(f)))
      line += name + (bp::dialect_in_build<float>(OpFamily(f), name) ? "" : " (absent)") + ", ";
    std::printf("  %-13s %s\n", bp::op_family_names[f], line.c_str());
    EXPECT_GE(bp::dialects_of<float>(OpFamily(f)).size(), 2u) << "every hot op has two kernels";
  }
}

// In double, every dialect that runs double: the gradients against finite differences of the
// eager loss, at the engine's own tolerance.
TEST(Dialects, EveryKernelMatchesFiniteDifferencesInDouble) {
  const double h = 1e-6, tolerance = 1e-8;  // as engine/core/tensor_test.cc
  int checked = 0;
  for (const OpCase& c : cases()) {
    const std::vector<std::vector<double>> init = init_of(c);
    std::vector<std::vector<double>> fd(init.size());
    for (size_t i = 0; i < init.size(); i++)
      for (size_t j = 0; j < init[i].size(); j++) {
        auto plus = init, minus = init;
        plus[i][j] += h, minus[i][j] -= h;
        fd[i].push_back((loss_of(c, plus) - loss_of(c, minus)) / (2 * h));
      }
    const double eager_loss = loss_of(c, init);
    for (OpFamily f : families_of(run_compiled<double>(c, init)))
      for (const std::string& name : bp::dialects_of<double>(f)) {
        if (!bp::dialect_in_build<double>(f, name)) continue;
        DialectSelector<double> dialects(forced(f, name));
        CompiledRun run;
        try {
          run = run_compiled<double>(c, init, &dialects);
        } catch (const bp::DialectError& e) {  // e.g. oneDNN in double: checked in float below
          std::printf("  %-17s %s:%s skipped in double: %s\n", c.what,
                      bp::op_family_names[size_t(f)], name.c_str(), e.message.c_str());
          continue;
        }
        double worst = std::fabs(run.loss - eager_loss) / std::max(1.0, std::fabs(eager_loss));
        for (size_t i = 0; i < init.size(); i++)
          for (size_t j = 0; j < init[i].size(); j++)
            worst = worse(
                worst, std::fabs(run.grads[i][j] - fd[i][j]) / std::max(1.0, std::fabs(fd[i][j])));
        std::printf("  %-17s %s:%-9s max rel diff %.2e (tolerance %.0e)\n", c.what,
                    bp::op_family_names[size_t(f)], name.c_str(), worst, tolerance);
        EXPECT_LE(worst, tolerance) << c.what << " with " << name << ": " << run.kernels;
        EXPECT_NE(run.kernels.find(":" + name + " "), std::string::npos)
            << c.what << ": the forced dialect served no op: " << run.kernels;
        checked++;
      }
  }
  EXPECT_GT(checked, 50);
}

// In float, every dialect in the build against the eager engine in double: float's rounding over
// sums of a few terms, 1e-5 relative to max(1, |value|).
TEST(Dialects, EveryKernelMatchesTheEngineInFloat) {
  const double tolerance = 1e-5;
  for (const OpCase& c : cases()) {
    const std::vector<std::vector<double>> init = init_of(c);
    G eager;
    std::vector<Tensor> pe;
    const double want = loss_of(c, init, &eager, &pe);
    for (OpFamily f : families_of(run_compiled<double>(c, init)))
      for (const std::string& name : bp::dialects_of<float>(f)) {
        if (!bp::dialect_in_build<float>(f, name)) continue;
        // in the build, but no code for it on this level (a portable one: x86-64-v2)
        if (name == "generated" && bp::product_jit::isa() == bp::product_jit::Isa::none) continue;
        std::string error;
        DialectSelector<float> dialects(*bp::parse_dialect_spec<float>(
            std::string(bp::op_family_names[size_t(f)]) + ":" + name, &error));
        CompiledRun run;
        try {
          run = run_compiled<float>(c, init, &dialects);
        } catch (const bp::DialectError& e) {
          ADD_FAILURE() << c.what << ": " << e.message;  // every library runs float
          continue;
        }
        double worst = std::fabs(run.loss - want) / std::max(1.0, std::fabs(want));
        for (size_t i = 0; i < pe.size(); i++)
          for (size_t j = 0; j < init[i].size(); j++) {
            const double g = eager.grad(pe[i])[j];
            worst = worse(worst, std::fabs(run.grads[i][j] - g) / std::max(1.0, std::fabs(g)));
          }
        if (name != "engine" && name != "reference")  // the others: printed, the rest above
          std::printf("  %-17s %s:%-9s float max rel diff %.2e (tolerance %.0e)\n", c.what,
                      bp::op_family_names[size_t(f)], name.c_str(), worst, tolerance);
        EXPECT_LE(worst, tolerance) << c.what << " with " << name << ": " << run.kernels;
      }
  }
}

// Priority is the eager engine's arithmetic: every node served by the engine's kernel, or for a
// product, where this processor has the instructions, by the code generated for its shape (the
// same bits: engine/kernels/product_jit_test.cc).
TEST(Dialects, PriorityChoosesTheEnginesOwnKernels) {
  const bool generated = bp::product_jit::isa() != bp::product_jit::Isa::none;
  for (const OpCase& c : cases()) {
    DialectSelector<float> dialects;  // priority
    const CompiledRun run = run_compiled<float>(c, init_of(c), &dialects);
    std::istringstream words(run.kernels);
    for (std::string w; words >> w;) {
      const bool product = w.rfind("matmul:", 0) == 0 || w.rfind("linear:", 0) == 0;
      const std::string want = product && generated ? ":generated" : ":engine";
      EXPECT_EQ(w.substr(w.find(':')), want) << c.what << ": " << run.kernels;
    }
  }
}

// Auto times the candidates of a shape once and picks the fastest, unless a kernel of higher
// priority is within 10% of it; it never times the reference, and with one candidate left (a
// build without libraries) it times nothing.
TEST(Dialects, AutoPicksTheFastestOrANearTieOfHigherPriority) {
  std::string error;
  DialectSelector<float> dialects(*bp::parse_dialect_spec<float>("auto", &error));
  bp::OpArgs<float> a;
  a.rows = 32, a.cols = 48, a.in_rows[0] = 32, a.in_cols[0] = 40, a.in_rows[1] = 40;
  a.in_cols[1] = 48;
  const bp::KernelChoice<float> c = dialects.choose(bp::TensorOp::matmul, a);
  if (c.seconds.empty()) {  // a build without the libraries: the engine's alone, nothing to time
    EXPECT_STREQ(c.kernel->dialect, "engine");
    for (const std::string& name : bp::dialects_of<float>(OpFamily::matmul))
      EXPECT_TRUE(name == "engine" || name == "reference" ||
                  !bp::dialect_in_build<float>(OpFamily::matmul, name))
          << name << " is in the build, so auto should have timed it";
    return;
  }
  double best = 1e300;
  for (const auto& [name, s] : c.seconds) {
    EXPECT_STRNE(name, "reference");
    EXPECT_GT(s, 0);
    best = std::min(best, s);
    std::printf("  matmul (32, 40) (40, 48): %-9s %.2f us\n", name, s * 1e6);
  }
  // The choice: the first in priority order (the order of `seconds`) within 10% of the fastest.
  const char* want = nullptr;
  for (const auto& [name, s] : c.seconds)
    if (!want && s <= best * 1.10) want = name;
  EXPECT_STREQ(c.kernel->dialect, want);
  // Cached: the same shape again is the same verdict, not a new measurement.
  const bp::KernelChoice<float> again = dialects.choose(bp::TensorOp::matmul, a);
  EXPECT_EQ(again.kernel, c.kernel);
  EXPECT_EQ(again.seconds, c.seconds);
}

// Told to leave libraries out (a program under a memory budget), auto and priority choose among
// the kernels that run no library's code, even where the process's verdict for the shape names a
// library; a forced library kernel is still taken.
TEST(Dialects, WithoutLibrariesNoLibraryIsChosenUnlessForced) {
  std::string error;
  bp::OpArgs<float> a;
  a.rows = 24, a.cols = 72, a.in_rows[0] = 24, a.in_cols[0] = 56, a.in_rows[1] = 56;
  a.in_cols[1] = 72;
  DialectSelector<float> with(*bp::parse_dialect_spec<float>("auto", &error));
  const bp::KernelChoice<float> verdict = with.choose(bp::TensorOp::matmul, a);
  std::printf("  matmul (24, 56) (56, 72), auto with libraries: %s\n", verdict.kernel->dialect);
  // The kernels that run no library's code: the engine's, and the generated one where this
  // processor has its instructions.
  const bool generated = bp::product_jit::isa() != bp::product_jit::Isa::none;
  for (const char* spec : {"auto", "priority"}) {
    DialectSelector<float> without(*bp::parse_dialect_spec<float>(spec, &error), false);
    const bp::KernelChoice<float> c = without.choose(bp::TensorOp::matmul, a);
    EXPECT_FALSE(c.kernel->library) << spec << " chose " << c.kernel->dialect;
    if (std::string_view(spec) == "priority") {
      EXPECT_STREQ(c.kernel->dialect, generated ? "generated" : "engine");
      EXPECT_TRUE(c.seconds.empty()) << spec << ": priority times nothing";
    } else if (!verdict.kernel->library) {  // the process's verdict, timings and all
      EXPECT_EQ(c.kernel, verdict.kernel);
      EXPECT_EQ(c.seconds, verdict.seconds) << spec;
    } else {  // timed anew among what is left, or nothing to time where one is left
      EXPECT_EQ(c.seconds.empty(), !generated) << spec;
    }
  }
  for (const std::string& name : bp::dialects_of<float>(OpFamily::matmul)) {
    const Kernel<float>* k = nullptr;
    for (const Kernel<float>& each : bp::kernels_of<float>(bp::TensorOp::matmul))
      if (each.dialect == name) k = &each;
    ASSERT_TRUE(k);
    EXPECT_EQ(k->library, name != "engine" && name != "reference" && name != "generated") << name;
    if (!k->library || !k->in_build || !k->available(a)) continue;
    DialectSelector<float> forced_one(forced(OpFamily::matmul, name), false);
    EXPECT_EQ(forced_one.choose(bp::TensorOp::matmul, a).kernel, k) << name;
  }
}

// Auto weighs each library over the whole program (weigh_libraries): from verdicts written as a
// run shares them, LIBXSMM saving 0.1 of 50.9 ms is left out and its op takes the engine's
// kernel; saving 9 of 21 ms it is kept. Shapes no other test uses, as verdicts last the process.
TEST(Dialects, ALibraryServesAProgramOnlyIfItGainsTwoPercentOfIt) {
  if (!bp::dialect_in_build<float>(OpFamily::matmul, "libxsmm")) GTEST_SKIP() << "no LIBXSMM";
  std::string error;
  auto shape = [](int32_t m) {
    bp::OpArgs<float> a;
    a.rows = m, a.cols = 40, a.in_rows[0] = m, a.in_cols[0] = 24, a.in_rows[1] = 24;
    a.in_cols[1] = 40;
    return a;
  };
  for (const auto& [small, large, kept] :
       {std::tuple{1.0e-3, 0.9e-3, false}, std::tuple{10e-3, 1e-3, true}}) {
    const int32_t m = kept ? 13 : 11;  // each case its own shapes
    std::ostringstream shared;         // what other processes of a run measured
    shared << "2 " << m << " 40 " << m << " 24 24 40 0 0 0 0 0 libxsmm engine=" << small
           << " libxsmm=" << large << "\n";
    shared << "2 " << m + 1 << " 40 " << m + 1
           << " 24 24 40 0 0 0 0 0 engine engine=" << (kept ? 20e-3 : 50e-3) << " libxsmm=1\n";
    std::vector<std::string> lines;
    std::istringstream in(shared.str());
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    DialectSelector<float>::exchange_verdicts(reading(lines), nullptr);
    DialectSelector<float> dialects(*bp::parse_dialect_spec<float>("auto", &error));
    dialects.weigh_libraries(
        {{bp::TensorOp::matmul, shape(m)}, {bp::TensorOp::matmul, shape(m + 1)}});
    const bp::KernelChoice<float> c = dialects.choose(bp::TensorOp::matmul, shape(m));
    EXPECT_STREQ(c.kernel->dialect, kept ? "libxsmm" : "engine");
    EXPECT_EQ(dialects.libraries_left_out().count("libxsmm"), kept ? 0u : 1u);
    std::printf("  LIBXSMM saving %.1f of %.1f ms: %s\n", (small - large) * 1e3,
                (large + (kept ? 20e-3 : 50e-3)) * 1e3, c.kernel->dialect);
    DialectSelector<float>::exchange_verdicts(nullptr, nullptr);
  }
}

// The compiled mode never holds more than eager. Told so, auto leaves out a library whose
// resident memory exceeds the whole eager tape before choosing, or, once the program is planned,
// the plan's saving over that tape (the program is then made again), saying so; a library that
// fits is kept and opened; one whose memory nobody measured is left out.
TEST(Dialects, ALibraryIsKeptOnlyWhileItsResidentMemoryFitsThePlansSaving) {
  if (!bp::dialect_in_build<float>(OpFamily::matmul, "libxsmm")) GTEST_SKIP() << "no LIBXSMM";
  std::string error;
  bp::OpArgs<float> a;  // its eager tape: 17 x 40 floats, value and gradient, 5.5 kB
  a.rows = 17, a.cols = 40, a.in_rows[0] = 17, a.in_cols[0] = 24, a.in_rows[1] = 24;
  a.in_cols[1] = 40;
  struct Case {
    const char* resident;  // the library's, as a run shares it
    size_t saving;         // what the plan saves over the eager tape
    bool kept;
    const char* why;
  };
  for (const Case& c :
       {Case{"2000", 1500, false,
             "2.0 kB resident, more than the plan saves over the eager tape (1.5 kB)"},
        Case{"2000", 2500, true, ""},
        Case{"9000", 1 << 30, false, "9.0 kB resident, more than the whole eager tape (5.5 kB)"},
        Case{nullptr, 1 << 30, false, "resident memory not measured"}}) {
    std::vector<std::string> lines = {
        "2 17 40 17 24 24 40 0 0 0 0 0 libxsmm engine=10e-3 "
        "libxsmm=1e-3"};
    if (c.resident) lines.push_back(std::string("resident libxsmm ") + c.resident);
    DialectSelector<float>::forget_resident_memory();
    DialectSelector<float>::exchange_verdicts(reading(lines), nullptr);
    DialectSelector<float> dialects(*bp::parse_dialect_spec<float>("auto", &error));
    dialects.keep_libraries_within_saving();
    dialects.weigh_libraries({{bp::TensorOp::matmul, a}});
    const bp::KernelChoice<float> first = dialects.choose(bp::TensorOp::matmul, a);
    const bool again = dialects.keep_what_fits({{bp::TensorOp::matmul, a, first.kernel}}, c.saving);
    EXPECT_EQ(again, std::string_view(first.kernel->dialect) == "libxsmm" && !c.kept);
    EXPECT_STREQ(dialects.choose(bp::TensorOp::matmul, a).kernel->dialect,
                 c.kept ? "libxsmm" : "engine");
    const auto& out = dialects.libraries_left_out();
    const std::string why = out.count("libxsmm") ? out.at("libxsmm") : "";
    EXPECT_EQ(why, c.why) << c.saving;
    std::printf("  LIBXSMM %s B, saving %zu B: %s\n", c.resident ? c.resident : "unmeasured",
                c.saving, why.empty() ? "kept" : why.c_str());
    DialectSelector<float>::exchange_verdicts(nullptr, nullptr);
  }
  DialectSelector<float>::forget_resident_memory();
}

// Timed in a child process (as bench_compiled times), every library is measured there and none
// enters this process; exits 0 if so, saying what each library holds.
[[noreturn]] void time_apart_and_exit() {
  if (bp::libraries_entered()) std::_Exit(3);
  std::string error;
  bp::OpArgs<float> a;
  a.rows = 48, a.cols = 96, a.in_rows[0] = 48, a.in_cols[0] = 64, a.in_rows[1] = 64;
  a.in_cols[1] = 96;
  bp::process_hooks().run_apart = g_program_process_hooks.run_apart;  // as bench_compiled sets it
  DialectSelector<float> dialects(*bp::parse_dialect_spec<float>("auto", &error));
  dialects.weigh_libraries({{bp::TensorOp::matmul, a}});
  bool ok = !bp::libraries_entered();
  std::string libraries;
  for (const bp::Kernel<float>& k : bp::kernels_of<float>(bp::TensorOp::matmul)) {
    if (!k.library || !k.in_build) continue;
    const std::string name = k.dialect;
    const std::optional<size_t> r = DialectSelector<float>::resident_bytes(name);
    ok = ok && r.has_value();
    libraries += " " + name + " " + (r ? std::to_string(*r / 1000) + " kB" : "unmeasured");
  }
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);)
    for (const char* lib : {"libdnnl", "libblis", "libopenblas"})
      if (line.find(lib) != std::string::npos) ok = false, libraries += " (here: " + line + ")";
  std::fprintf(stderr, "resident:%s\n", libraries.c_str());
  std::_Exit(ok ? 0 : 1);
}
// In a fresh process (gtest's threadsafe death test runs the binary again), since the other tests
// open libraries in this one.
TEST(Dialects, TimedInAChildNoLibraryEntersThisProcess) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(time_apart_and_exit(), testing::ExitedWithCode(0), "resident:");
}

TEST(Dialects, BadSpecsAreRefusedWithOneLine) {
  std::string error;
  EXPECT_FALSE(bp::parse_dialect_spec("matmul", &error));
  EXPECT_NE(error.find("expected auto, priority or FAMILY:NAME"), std::string::npos) << error;
  EXPECT_FALSE(bp::parse_dialect_spec("conv:blis", &error));
  EXPECT_NE(error.find("FAMILY one of matmul, attention"), std::string::npos) << error;
  EXPECT_FALSE(bp::parse_dialect_spec("auto,matmul:mkl", &error));
  EXPECT_NE(error.find("no dialect mkl for matmul; its dialects are engine, generated, blis"),
            std::string::npos)
      << error;
  EXPECT_FALSE(bp::parse_dialect_spec("layernorm:blis", &error));
  const std::optional<DialectSpec> ok = bp::parse_dialect_spec("auto,matmul:reference", &error);
  ASSERT_TRUE(ok);
  EXPECT_TRUE(ok->timed);
  EXPECT_EQ(ok->forced[size_t(OpFamily::matmul)], "reference");
  // A library this build lacks: refused, naming the package to install.
  for (const std::string& name : bp::dialects_of<float>(OpFamily::matmul))
    if (!bp::dialect_in_build<float>(OpFamily::matmul, name)) {
      EXPECT_FALSE(bp::parse_dialect_spec("matmul:" + name, &error));
      EXPECT_NE(error.find("was not found when this binary was built"), std::string::npos) << error;
      std::printf("  matmul:%s refused: %s\n", name.c_str(), error.c_str());
    }
}

// Forced where it cannot run (oneDNN in double): DialectError naming the op and its shapes, and
// no program.
TEST(Dialects, AForcedDialectThatCannotRunIsAnError) {
  if (!bp::dialect_in_build<double>(OpFamily::matmul, "onednn")) GTEST_SKIP() << "no oneDNN";
  DialectSelector<double> dialects(forced(OpFamily::matmul, "onednn"));
  const OpCase c = cases()[0];
  try {
    run_compiled<double>(c, init_of(c), &dialects);
    ADD_FAILURE() << "oneDNN ran a double matmul";
  } catch (const bp::DialectError& e) {
    EXPECT_EQ(e.message,
              "dialect matmul:onednn cannot run matmul (3, 4) (5, 4) -> (3, 5) (no kernel for this "
              "shape and type); force another or use auto");
  }
}

}  // namespace
