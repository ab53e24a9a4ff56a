// apps/bench_compiled.cc: bench_compiled, every workload on our engine's compiled mode
// (engine/compiled/backend.h), through the generic driver (harness/driver/backend_main.h): the
// first step captured and planned, every later step a replay of that program. Does not link
// libtorch, like bench_engine, so its peak RSS is its own.
//
// Its own flags:
//   --dialect=SPEC        how kernels are chosen (engine/dialects/dialects.h): auto (default),
//                         priority, or FAMILY:NAME forced, e.g. matmul:blis
//   --memory_budget=X     the planned arena's budget: bytes (a whole number above 1) or a fraction
//                         of the unbudgeted plan's peak in (0, 1] (engine/compiled/program.h)
//   --cache-dir=DIR       where compiled plans are kept (engine/compiled/plan_cache.h); default
//                         $XDG_CACHE_HOME/backprop-bench, else ~/.cache/backprop-bench
//   --no-cache            compile every plan from scratch (bench_run passes it unless a study
//                         measures the cache)
//   --library-memory=M    saving (default): auto keeps a library only while its resident memory
//                         fits in what the plan saves over the eager tape; any: whenever faster
//   --generated-code=M    within-tape (default): a scalar step runs generated x86-64 code only
//                         while the program stays within the eager tape's memory, else threaded
//                         code; any: wherever it can be built (engine/compiled/compiled_scalar.h)
//   --fusion=on|off       on (default): chains of elementwise and row-wise ops run as tiled
//                         groups (engine/compiled/fusion.h); off: one kernel call each
// and the driver's --time_first_step (cold starts), --verdicts=FILE (a run's shared kernel
// verdicts) and --kernel_rows (studies/kernels/kernel_rows.h).
//   build/bench_compiled --instance=workload=mini_gpt_wide,size=32 --memory_budget=0.5
//   build/bench_compiled --instance=workload=char_mlp,size=1024 --dialect=matmul:blis
//   build/bench_compiled --kernel_rows --instance=workload=char_mlp,size=1024
#include <malloc.h>

#include <cmath>
#include <cstdlib>
#include <string>
#include <string_view>

#include "engine/compiled/backend.h"
#include "engine/runtime/isa.h"
#include "harness/common/proc.h"
#include "harness/driver/backend_main.h"
#include "studies/kernels/kernel_rows.h"

namespace {

// What the flags set, applied to every backend object the process makes.
struct CompiledOptions {
  size_t budget_bytes = 0;
  double budget_fraction = 0;
  bp::DialectSpec dialects = auto_dialects();
  std::string cache_dir = bp::PlanCache::default_dir();  // "": no cache
  bool libraries_within_saving = true;                   // --library-memory=saving
  bool code_within_tape = true;                          // --generated-code=within-tape
  bool fuse = true;                                      // --fusion=on
  static bp::DialectSpec auto_dialects() {
    std::string unused;
    return *bp::parse_dialect_spec("auto", &unused);
  }
};

// --memory_budget=X: bytes, a whole number from 2 to 2^50, or a fraction in (0, 1] of at least
// 1e-9 (below that no plan is smaller than a byte); anything else is refused, never cast.
void parse_memory_budget(std::string_view v, CompiledOptions& o) {
  const std::string text(v);
  char* end = nullptr;
  const double x = std::strtod(text.c_str(), &end);
  const bool fraction = x >= 1e-9 && x <= 1;
  const bool bytes = x > 1 && x <= 0x1p50 && x == std::floor(x);
  if (text.empty() || *end || !(fraction || bytes))
    bp::backend_usage_error(fmt::format(
        "--memory_budget={}: expected bytes (a whole number from 2 to 2^50) or a fraction of "
        "the unbudgeted plan's peak from 1e-9 to 1",
        text));
  if (bytes)
    o.budget_bytes = size_t(x);
  else
    o.budget_fraction = x;
}

}  // namespace

int main(int argc, char** argv) {
  // oneDNN's OpenMP threads and OpenBLAS's own spin after each call unless told to sleep, and
  // then hold the cores our pool and the next dialect timed need (at two threads auto chose
  // oneDNN at 5x the fastest, and timed our kernel at 30x its time right after OpenBLAS:
  // dev/notes.md, "Kernel efficiency against an FMA loop timed in turn"). Both libraries read
  // these when they load, and they are opened on first use, after these lines. (4: OpenBLAS's
  // least wait, 2^4 cycles.)
  setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
  setenv("OPENBLAS_THREAD_TIMEOUT", "4", 1);
  // Auto measures each library's resident memory, and times library candidates in a child, so
  // that an unchosen library never adds to this process's peak memory (engine/dialects/dialects.h).
  bp::process_hooks() = {bp::proc_resident_bytes, bp::run_in_child};
  using bp::CompiledBackend;
  static CompiledOptions options;
  bp::BackendHooks<CompiledBackend> hooks;
  hooks.version =
      "backprop-bench engine, compiled mode (this repository): the step captured once, planned "
      "into one arena and replayed; scalars in double, tensors in float32, one pool of --threads "
      "threads";
  std::string in_build;
  for (const std::string& name : bp::dialects_of<float>(bp::OpFamily::matmul))
    if (bp::dialect_in_build<float>(bp::OpFamily::matmul, name))
      in_build += (in_build.empty() ? "" : ", ") + name;
  hooks.context = {{"matmul", "per op and shape from the dialects " + in_build +
                                  " (engine/dialects/dialects.h; each result's label names the "
                                  "choice)"},
                   {"omp_wait_policy", "PASSIVE"},
                   {"openblas_thread_timeout", "4"}};
  // Our pool and the libraries' own get the run's threads, as every backend does.
  hooks.max_threads = 256;
  hooks.set_threads = [](int threads) {
    bp::split_thresholds();  // BP_SPLIT read (or refused) before any work
    bp::thread_pool().resize(threads);
    bp::set_library_threads(threads);
  };
  // As bench_engine (apps/bench_engine.cc says why): freed large blocks go back to the system.
  hooks.before_work = [] { mallopt(M_MMAP_THRESHOLD, 256 * 1024); };
  hooks.flag = [](std::string_view arg) {
    auto value_of = [&](std::string_view flag) {
      return arg.substr(0, flag.size()) == flag ? std::optional(arg.substr(flag.size()))
                                                : std::nullopt;
    };
    if (auto v = value_of("--memory_budget=")) {
      parse_memory_budget(*v, options);
    } else if (auto v = value_of("--dialect=")) {
      std::string error;
      std::optional<bp::DialectSpec> spec = bp::parse_dialect_spec(*v, &error);
      if (!spec) bp::backend_usage_error(fmt::format("--dialect={}: {}", *v, error));
      options.dialects = *spec;
    } else if (auto v = value_of("--cache-dir=")) {
      if (v->empty()) bp::backend_usage_error("--cache-dir=: name a directory (or --no-cache)");
      options.cache_dir = std::string(*v);
    } else if (auto v = value_of("--library-memory=")) {
      if (*v != "saving" && *v != "any")
        bp::backend_usage_error(fmt::format(
            "--library-memory={}: expected saving (a library only where the plan's saving over "
            "eager holds it) or any",
            *v));
      options.libraries_within_saving = *v == "saving";
    } else if (auto v = value_of("--generated-code=")) {
      if (*v != "within-tape" && *v != "any")
        bp::backend_usage_error(fmt::format(
            "--generated-code={}: expected within-tape (a scalar step's generated code only "
            "while the program holds no more than the eager tape) or any",
            *v));
      options.code_within_tape = *v == "within-tape";
    } else if (auto v = value_of("--fusion=")) {
      if (*v != "on" && *v != "off")
        bp::backend_usage_error(fmt::format(
            "--fusion={}: expected on (elementwise and row-wise chains as tiled groups) or off",
            *v));
      options.fuse = *v == "on";
    } else if (arg == "--no-cache") {
      options.cache_dir.clear();
    } else {
      return false;
    }
    return true;
  };
  hooks.configure = [](CompiledBackend& b) {
    b.budget_bytes = options.budget_bytes;
    b.budget_fraction = options.budget_fraction;
    b.dialects = options.dialects;
    b.plan_cache_dir = options.cache_dir;
    b.libraries_within_saving = options.libraries_within_saving;
    b.scalars.set_code_within_tape(options.code_within_tape);
    b.fuse = options.fuse;
  };
  hooks.use_bf16 = [](CompiledBackend& b) { b.graph.set_precision(bp::Precision::bf16); };
  hooks.late_context =
      [] {  // BP_BF16_PATH and BP_ISA read here: a bad one stops the run before any row
        return bp::ContextPairs{
            {"plan_cache", options.cache_dir.empty() ? "off" : options.cache_dir},
            {"bf16_products", bp::bf16::path_name(bp::bf16::best_path())},
            {"isa", bp::isa_description()},
            {"isa_baseline", bp::isa_name(bp::build_baseline())}};
      };
  // the wait for a turn is no step's: the pool's timing of its steps leaves it out
  hooks.after_wait = [](double seconds) { bp::thread_pool().leave_out_of_window(seconds); };
  hooks.report = [](const CompiledBackend& b, benchmark::State& state) {
    state.counters["arena_bytes"] = double(b.arena_bytes());
    for (const auto& [name, value] : b.extra_counters()) state.counters[name] = value;
    // jobs the pool's caller ran alone, the machine too busy to share them (threads.h, step_done)
    if (bp::thread_pool().size() > 1)
      state.counters["pool_jobs_alone"] = bp::thread_pool().alone_share();
    state.SetLabel(b.kernel_report());
  };
  hooks.forget_warm_state = [] { bp::DialectSelector<float>::forget_verdicts(); };
  hooks.share_verdicts = [](const bp::SharedLines& file) {
    bp::DialectSelector<float>::exchange_verdicts(
        [file](size_t& offset) { return file.read_after(offset); },
        [file](const std::string& line) { file.append(line); });
  };
  hooks.kernel_rows = [](const std::vector<bp::InstanceSpec>& instances, const bp::Corpus& corpus) {
    bp::register_kernel_rows(instances, corpus);
  };
  return bp::backend_main<CompiledBackend>(argc, argv, hooks);
}
