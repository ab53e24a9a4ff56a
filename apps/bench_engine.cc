// apps/bench_engine.cc: bench_engine, every workload on our engine (engine/backend.h), eager,
// through the generic driver (harness/driver/backend_main.h). Does not link libtorch, so its peak
// RSS is the engine's own (a few MB) and not libtorch's ~170 MB floor.
//
//   build/bench_engine --benchmark_filter=tiny_graph
//   build/bench_engine --instance=workload=char_rnn,size=1000 --strategy=multistage --snapshots=8
#include <malloc.h>

#include <iterator>

#include "engine/backend.h"
#include "engine/runtime/isa.h"
#include "harness/driver/backend_main.h"

int main(int argc, char** argv) {
  using bp::EngineBackend;
  bp::BackendHooks<EngineBackend> hooks;
  hooks.version =
      "backprop-bench engine (this repository): scalars in double, tensors in float32, one pool of "
      "--threads threads";
  hooks.context = {{"matmul", "own register-tiled kernels (engine/kernels/products.h), no BLAS"}};
  // More threads than CPUs run (the results say oversubscribed); the pool refuses above 256.
  hooks.max_threads = 256;
  hooks.set_threads = [](int threads) {
    bp::split_thresholds();  // BP_SPLIT read (or refused) before any work
    bp::thread_pool().resize(threads);
  };
  // glibc raises its mmap threshold each time a large mmapped block is freed, after which large
  // blocks come from the heap and are kept when freed: Google Benchmark's repeated setups then
  // piled freed arenas up in RSS. A fixed threshold returns them. Only here and in
  // bench_compiled: the baselines run with the allocator as their users get it (libtorch's CPU
  // allocator does not cache; under this setting it paid an mmap for every large tensor).
  hooks.before_work = [] { mallopt(M_MMAP_THRESHOLD, 256 * 1024); };
  hooks.strategies = {std::begin(EngineBackend::through_time_strategies),
                      std::end(EngineBackend::through_time_strategies)};
  hooks.use_through_time = [](EngineBackend& b, const bp::ThroughTime& t) {
    b.use_through_time(t);
  };
  // --optimizer=stream: the memory-bandwidth bound of an update (workloads/optimizer.h).
  static bool stream = false;
  hooks.flag = [](std::string_view arg) {
    if (arg.rfind("--optimizer=", 0) != 0) return false;
    if (arg != "--optimizer=stream")
      bp::backend_usage_error(fmt::format(
          "{}: valid: --optimizer=stream (an AdamW step's bytes without its arithmetic)", arg));
    return stream = true;
  };
  hooks.configure = [](EngineBackend& b) { b.stream_instead = stream; };
  hooks.use_bf16 = [](EngineBackend& b) { b.graph.set_precision(bp::Precision::bf16); };
  hooks.late_context =
      [] {  // BP_BF16_PATH and BP_ISA read here: a bad one stops the run before any row
        return bp::ContextPairs{{"bf16_products", bp::bf16::path_name(bp::bf16::best_path())},
                                {"isa", bp::isa_description()},
                                {"isa_baseline", bp::isa_name(bp::build_baseline())}};
      };
  // the wait for a turn is no step's: the pool's timing of its steps leaves it out
  hooks.after_wait = [](double seconds) { bp::thread_pool().leave_out_of_window(seconds); };
  hooks.report = [](const EngineBackend& b, benchmark::State& state) {
    state.counters["arena_bytes"] = double(b.arena_bytes());
    for (const auto& [name, value] : b.extra_counters()) state.counters[name] = value;
    // jobs the pool's caller ran alone, the machine too busy to share them (threads.h, step_done)
    if (bp::thread_pool().size() > 1)
      state.counters["pool_jobs_alone"] = bp::thread_pool().alone_share();
  };
  return bp::backend_main<EngineBackend>(argc, argv, hooks);
}
