// apps/engine_tests.cc: the main() of engine_tests, the engine's and the workloads' unit tests.
// It gives the engine the process hooks bench_compiled gives it (harness/common/proc.h: resident
// memory from /proc), as the engine reads no /proc itself; a test that times kernels in a child
// takes run_apart from g_program_process_hooks.
//   build/engine_tests --gtest_filter='Dialects*'
#include <gtest/gtest.h>

#include "engine/dialects/dialects.h"
#include "harness/common/proc.h"

bp::ProcessHooks g_program_process_hooks{bp::proc_resident_bytes, bp::run_in_child};

int main(int argc, char** argv) {
  bp::process_hooks().resident_bytes = g_program_process_hooks.resident_bytes;
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
