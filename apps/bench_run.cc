// apps/bench_run.cc: bench_run, the runner over every backend (harness/runner/run.cc; its
// options: `build/bench_run --help`), with this program's studies (studies/registry.h).
//   build/bench_run --filter small_graph --repetitions 3
#include "harness/runner/run_state.h"
#include "studies/registry.h"

int main(int argc, char** argv) {
  bp::study_registry() = bp::kStudyRegistry;
  bp::backend_registry() = bp::kBackendRegistry;
  return bp::bench_run_main(argc, argv);
}
