// harness/common/protocol_test.cc: the runner-to-backend protocol's --instance flag
// (harness/common/protocol.h) and the names of instances and benchmarks (harness/common/names.h).
//   build/harness_test --gtest_filter='Protocol.*:Names.*'
#include "harness/common/protocol.h"

#include <gtest/gtest.h>

#include <string>

#include "harness/common/names.h"
#include "harness/harness_test.h"

namespace {

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

}  // namespace
