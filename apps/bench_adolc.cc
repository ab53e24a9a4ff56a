// apps/bench_adolc.cc: bench_adolc, the scalar graphs on ADOL-C (baselines/adolc/backend.h)
// through the generic driver (harness/driver/backend_main.h). Links neither libtorch nor our
// engine, so its peak RSS is ADOL-C's own.
//
//   build/bench_adolc --instance=workload=lstm,size=1024                  tape once, replay
//   build/bench_adolc --instance=workload=lstm,size=1024 --taping=every_step
#include <string_view>

#include "baselines/adolc/backend.h"
#include "harness/driver/backend_main.h"

#ifndef BP_ADOLC_PACKAGE
#define BP_ADOLC_PACKAGE "unknown"
#endif

int main(int argc, char** argv) {
  using bp::AdolcBackend;
  bp::BackendHooks<AdolcBackend> hooks;
  static bool every_step = false;
  hooks.version = "ADOL-C " BP_ADOLC_PACKAGE " (Debian libadolc-dev), tape once and replay";
  hooks.flag = [](std::string_view arg) {
    if (arg.rfind("--taping=", 0) != 0) return false;
    if (arg != "--taping=once" && arg != "--taping=every_step")
      bp::backend_usage_error(
          fmt::format("{}: valid: --taping=once (tape the first step, replay it: the default) or "
                      "--taping=every_step",
                      arg));
    every_step = arg == "--taping=every_step";
    return true;
  };
  hooks.configure = [](AdolcBackend& b) { b.tape_every_step = every_step; };
  hooks.late_context = [] {
    return bp::ContextPairs{{"taping", every_step ? "every step" : "once, then replayed"}};
  };
  hooks.report = [](const AdolcBackend& b, benchmark::State& state) {
    state.counters["tape_operations"] = double(b.tape_operations());
  };
  return bp::backend_main<AdolcBackend>(argc, argv, hooks);
}
