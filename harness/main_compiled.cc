// harness/main_compiled.cc: bench_compiled, every workload on our engine's compiled mode
// (engine/compiled.h): the first step captured and planned, every later step a replay of that
// program. Does not link libtorch, like bench_engine, so its peak RSS is its own.
//
//   build/bench_compiled --benchmark_filter=mini_gpt     # more in harness/backend_main.h
//   build/bench_compiled --kernel_rows --instance=workload=char_mlp,size=1024   # kernel_rows.h
#include <malloc.h>

#include <string>

#include "engine/compiled.h"
#include "harness/backend_main.h"
#include "harness/kernel_rows.h"

int main(int argc, char** argv) {
  bp::BackendInfo info;
  info.version =
      "backprop-bench engine, compiled mode (this repository): the step captured once, planned "
      "into one arena and replayed; scalars in double, tensors in float32, single-threaded";
  std::string in_build;
  for (const std::string& name : bp::dialects_of<float>(bp::OpFamily::matmul))
    if (bp::dialect_in_build<float>(bp::OpFamily::matmul, name))
      in_build += (in_build.empty() ? "" : ", ") + name;
  info.context = {{"matmul", "per op and shape from the dialects " + in_build +
                                 " (engine/dialects.h; each result's label names the choice)"}};
  // The libraries' own thread pools get the run's threads, as every backend does.
  info.set_threads = [](int threads) { bp::set_library_threads(threads); };
  // As bench_engine (harness/main_engine.cc says why): freed large blocks go back to the system.
  info.before_work = [] { mallopt(M_MMAP_THRESHOLD, 256 * 1024); };
  info.kernel_rows = [](const std::vector<bp::InstanceSpec>& instances) {
    bp::register_kernel_rows(instances, bp::loaded_corpus());
  };
  return bp::backend_main<bp::CompiledBackend>(argc, argv, info);
}
