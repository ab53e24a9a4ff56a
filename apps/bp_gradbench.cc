// apps/bp_gradbench.cc: bp_gradbench, our engine as a GradBench tool: GradBench's protocol on
// stdin and stdout, or one input file as GradBench's C++ tools run (harness/gradbench/cli.h;
// `build/bp_gradbench --help`). Links no libtorch: --backend libtorch execs
// bp_gradbench_libtorch, beside it, with the same arguments.
//   echo '{"id": 0, "kind": "start"}' | build/bp_gradbench --backend compiled
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <string_view>

#include "apps/gradbench_engine.h"
#include "harness/common/proc.h"
#include "harness/gradbench/cli.h"

namespace {

[[noreturn]] void run_libtorch_binary(char** argv) {
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  std::string path = n > 0 ? std::string(self, size_t(n)) : std::string(argv[0]);
  path = path.substr(0, path.rfind('/') + 1) + "bp_gradbench_libtorch";
  execv(path.c_str(), argv);  // argv[0] unchanged: run as bin/<module>, it names the module
  bp::gradbench::usage("--backend libtorch: cannot run " + path + ": " + std::strerror(errno));
}

}  // namespace

int main(int argc, char** argv) {
  // The compiled mode weighs a library's resident memory against what its plan saves; the
  // candidates are timed here (a session is one process, as GradBench runs tools).
  bp::process_hooks().resident_bytes = bp::proc_resident_bytes;
  return bp::gradbench::tool_main<bp::gradbench::OurEngineBackends>(
      argc, argv, [](std::string_view b) { return b == "libtorch"; }, run_libtorch_binary);
}
