// engine/runtime/isa_test.cc: the ISA policy (engine/runtime/isa.h): levels from features, the cap
// BP_ISA and its refusals, and that the op tables, both code generators and the bf16 products
// follow the level the process runs.
#include "engine/runtime/isa.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "engine/compiled/scalar_jit.h"
#include "engine/core/ops.h"
#include "engine/kernels/bf16.h"
#include "engine/kernels/product_jit.h"

namespace {

bp::CpuFeatures avx2_machine() {  // Zen 3: AVX2 and FMA, no AVX-512
  bp::CpuFeatures f;
  f.avx = f.avx2 = f.fma = true;
  return f;
}
bp::CpuFeatures avx512_machine() {  // Zen 5
  bp::CpuFeatures f = avx2_machine();
  f.avx512f = f.avx512bw = f.avx512vl = f.avx512dq = f.avx512cd = f.avx512bf16 = true;
  return f;
}

TEST(Isa, LevelsFromFeatures) {
  EXPECT_EQ(bp::CpuFeatures{}.best(), bp::Isa::portable);
  EXPECT_EQ(avx2_machine().best(), bp::Isa::avx2);
  EXPECT_EQ(avx512_machine().best(), bp::Isa::avx512);
  bp::CpuFeatures no_fma = avx2_machine();
  no_fma.fma = false;  // an AVX2 processor without FMA is not x86-64-v3
  EXPECT_EQ(no_fma.best(), bp::Isa::portable);
  bp::CpuFeatures knights = avx512_machine();
  knights.avx512bw = knights.avx512vl = false;  // AVX-512F alone is not the level avx512
  EXPECT_EQ(knights.best(), bp::Isa::avx2);
  EXPECT_EQ(knights.missing(bp::Isa::avx512), "avx512bw avx512vl");
}

TEST(Isa, CapTakesALevelTheProcessorHas) {
  bp::Isa level = bp::Isa::portable;
  std::string error;
  ASSERT_TRUE(bp::isa_from(nullptr, avx512_machine(), &level, &error, bp::Isa::avx512));
  EXPECT_EQ(level, bp::Isa::avx512);
  ASSERT_TRUE(bp::isa_from("native", avx2_machine(), &level, &error, bp::Isa::avx512));
  EXPECT_EQ(level, bp::Isa::avx2);
  ASSERT_TRUE(bp::isa_from("avx2", avx512_machine(), &level, &error, bp::Isa::avx512));
  EXPECT_EQ(level, bp::Isa::avx2);
  ASSERT_TRUE(bp::isa_from("avx512", avx512_machine(), &level, &error, bp::Isa::avx512));
  EXPECT_EQ(level, bp::Isa::avx512);
}

// A build without the AVX-512 unit (x86-64-v2) runs portable code on any processor: native is
// then portable, and a level above it is refused, saying the build is why.
TEST(Isa, NoLevelAboveWhatTheBuildHolds) {
  bp::Isa level = bp::Isa::avx512;
  std::string error;
  ASSERT_TRUE(bp::isa_from(nullptr, avx512_machine(), &level, &error, bp::Isa::portable));
  EXPECT_EQ(level, bp::Isa::portable);
  EXPECT_FALSE(bp::isa_from("avx2", avx512_machine(), &level, &error, bp::Isa::portable));
  EXPECT_EQ(error,
            "avx2: this build holds no kernels above portable (CMakeLists.txt: BP_ARCH; "
            "valid here: native)");
  EXPECT_GE(bp::build_best(), bp::build_baseline());
}

TEST(Isa, CapRefusesWhatTheProcessorLacksInOneLine) {
  bp::Isa level = bp::Isa::portable;
  std::string error;
  EXPECT_FALSE(bp::isa_from("avx512", avx2_machine(), &level, &error, bp::Isa::avx512));
  std::printf("  BP_ISA=avx512 on Zen 3: %s\n", error.c_str());
  EXPECT_EQ(error,
            "avx512 needs what this processor lacks: avx512f avx512bw avx512vl avx512dq avx512cd "
            "(valid here: avx2, native)");
  EXPECT_FALSE(bp::isa_from("avx9", avx512_machine(), &level, &error, bp::Isa::avx512));
  EXPECT_EQ(error, "'avx9' is not a level (valid here: avx2, avx512, native)");
  EXPECT_FALSE(bp::isa_from("AVX2", avx512_machine(), &level, &error,
                            bp::Isa::avx512));  // names are lower case
  EXPECT_EQ(error.find('\n'), std::string::npos);
}

TEST(IsaDeathTest, ABadCapStopsTheProcessWithExitTwo) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");  // a new process: isa() decides afresh
  const char* before = std::getenv("BP_ISA");
  const std::string saved = before ? before : "";
  setenv("BP_ISA", "avx9", 1);
  EXPECT_EXIT(bp::isa(), testing::ExitedWithCode(2), "^BP_ISA: 'avx9' is not a level");
  before ? setenv("BP_ISA", saved.c_str(), 1) : unsetenv("BP_ISA");
}

// Every family follows the one level: the op tables, the product generator, the scalar generator
// and the bf16 products. Run under BP_ISA=avx2 on an AVX-512 machine by ctest as well.
TEST(Isa, EveryFamilyFollowsTheLevel) {
  const bp::Isa level = bp::isa();
  std::printf("  process runs %s (processor's best %s, build baseline %s); op tables %s\n",
              bp::isa_description().c_str(), bp::isa_name(bp::cpu_features().best()),
              bp::isa_name(bp::build_baseline()), bp::op_tables().isa);
  EXPECT_STREQ(bp::op_tables().isa,
               level == bp::Isa::avx512 ? "avx512" : bp::isa_name(bp::build_baseline()));
  const auto generated = bp::product_jit::processor_isa();
  EXPECT_EQ(generated, level == bp::Isa::avx512 ? bp::product_jit::Isa::avx512
                       : level == bp::Isa::avx2 ? bp::product_jit::Isa::avx2
                                                : bp::product_jit::Isa::none);
  EXPECT_EQ(bp::scalar_jit_runs(), bp::kScalarJitBuilt && level >= bp::Isa::avx2);
  EXPECT_EQ(bp::bf16::has_dot_bf16(), level == bp::Isa::avx512 && bp::cpu_features().avx512bf16);
}

}  // namespace
