// apps/bench_ranks.cc: bench_ranks, our engine as data-parallel ranks under Open MPI's mpirun:
// each rank a shard of every batch (workloads/data.h), its gradients summed over the ranks
// (engine/distributed/data_parallel.h) under the backward as it finishes each one, rank 0
// reporting. Eager by default; --mode=compiled runs the compiled mode (its kernels by priority,
// so every rank computes with the same kernels), whose program says each gradient's end at one
// thread (at two or more its waves say them all after the backward). A binary of its own so that
// bench_engine and bench_compiled do not carry libmpi (1.3 MB of resident memory in every process,
// measured). Every rank times the same
// --iterations (each step waits for the others). --zero=1 shards the optimizer's state over the
// ranks (ZeRO stage 1, engine/distributed/data_parallel.h).
//
//   mpirun -n 2 build/bench_ranks --ranks=2 --instance=workload=char_mlp,size=1024
//   (as root: --allow-run-as-root; more ranks than cores: --oversubscribe)
#include <malloc.h>
#include <mpi.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "engine/backend.h"
#include "engine/compiled/backend.h"
#include "engine/distributed/data_parallel.h"
#include "engine/runtime/isa.h"
#include "harness/common/proc.h"
#include "harness/driver/backend_main.h"

namespace {

bool checking = false;  // --check_out: the check records the mean of the ranks' losses
bool overlap = true;    // --overlap=off: the gradients summed after the backward
bool zero = false;      // --zero=1: the optimizer's state sharded over the ranks (ZeRO stage 1)

double mean_over_ranks(double mine) {
  double sum = 0;
  MPI_Allreduce(&mine, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  return sum / bp::dist::ranks_of(MPI_COMM_WORLD);
}

// The driver over backend B (EngineBackend or CompiledBackend) as one rank of `mpi`.
template <class B>
int run_ranks(int argc, char** argv, const bp::dist::Ranks& mpi, const char* version) {
  bp::BackendHooks<B> hooks;
  hooks.version = version;
  hooks.context = {{"matmul", "own register-tiled kernels (engine/kernels/products.h), no BLAS"}};
  hooks.max_threads = 256;
  hooks.set_threads = [](int threads) {
    bp::split_thresholds();
    bp::thread_pool().resize(threads);
  };
  hooks.before_work = [] { mallopt(M_MMAP_THRESHOLD, 256 * 1024); };  // as bench_engine
  hooks.world = [&mpi] { return bp::Shard{mpi.rank(), mpi.size()}; };
  hooks.flag = [](std::string_view arg) {
    if (arg.starts_with("--mode=") || arg.starts_with("--zero=")) return true;  // main()'s
    if (!arg.starts_with("--overlap=")) return false;
    if (arg != "--overlap=on" && arg != "--overlap=off")
      bp::backend_usage_error(
          fmt::format("{}: valid: --overlap=on (the gradients summed under the backward, the "
                      "default), --overlap=off (after it)",
                      arg));
    overlap = arg == "--overlap=on";
    return true;
  };
  hooks.late_context = [] {
    // The compiled mode's program says each gradient's end at one thread; in waves, after all.
    const bool events =
        overlap && (std::is_same_v<B, bp::EngineBackend> || bp::thread_pool().size() == 1);
    return bp::ContextPairs{
        {"gradients_summed", events ? "under the backward, in buckets of 1 MB"
                                    : "after the backward, in buckets of 1 MB"},
        {"isa", bp::isa_description()},
        {"isa_baseline", bp::isa_name(bp::build_baseline())},
        {"optimizer", zero ? "sharded over the ranks (ZeRO stage 1: reduce-scatter, each rank "
                             "updates its shard, all-gather)"
                           : "every rank updates every parameter"}};
  };
  // The last reducer made, for report; weak, so that it ends with its backend (and graph).
  static std::weak_ptr<bp::dist::DataParallel<float>> reducer;
  hooks.configure = [](B& b) {
    auto dp = std::make_shared<bp::dist::DataParallel<float>>(b.graph, MPI_COMM_WORLD,
                                                              size_t(1) << 20, overlap, zero);
    reducer = dp;
    if (zero)
      b.sharded_step = [dp](const bp::AdamWConfig* adamw, double lr) {
        dp->sharded_step(adamw, lr);
      };
    // The check reads every gradient; with the optimizer sharded a rank holds its shard's alone.
    const bool gather = zero && checking;
    b.after_backward = [dp, gather] {  // the reducer lives as long as the backend
      dp->finish();
      if (gather) dp->gather_gradients();
    };
    if (checking) b.loss_over_ranks = mean_over_ranks;  // the timed steps exchange no loss
  };
  hooks.use_bf16 = [](B& b) { b.graph.set_precision(bp::Precision::bf16); };
  hooks.report = [](const B& b, benchmark::State& state) {  // every rank reports; rank 0 writes
    state.counters["arena_bytes"] = double(b.arena_bytes());
    state.counters["gradient_bytes"] = double(b.graph.flat_size() * sizeof(float));  // summed
    const int ranks = bp::dist::ranks_of(MPI_COMM_WORLD);
    double mine = double(bp::proc_peak_rss_bytes()), most = 0;
    std::vector<double> each(size_t(ranks), 0.0);
    MPI_Allgather(&mine, 1, MPI_DOUBLE, each.data(), 1, MPI_DOUBLE, MPI_COMM_WORLD);
    for (int r = 0; r < ranks; r++) {
      state.counters[fmt::format("peak_rss_bytes_rank_{}", r)] = each[size_t(r)];
      most = std::max(most, each[size_t(r)]);
    }
    state.counters["peak_rss_bytes_most_of_ranks"] = most;
    mine = bp::timed_loop_seconds() / double(std::max<int64_t>(1, state.iterations()));
    MPI_Allreduce(&mine, &most, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    state.counters["step_seconds_slowest_rank"] = most;
    // AdamW's moments on one rank (all of them unless --zero=1); 0 under SGD.
    const auto dp = reducer.lock();
    mine = dp ? double(dp->optimizer_state_bytes()) : 0;
    MPI_Allreduce(&mine, &most, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    state.counters["optimizer_state_bytes_most_of_ranks"] = most;
  };
  return bp::backend_main<B>(argc, argv, hooks);
}

// Every rank must run the same program with the same options (a step waits for every rank, and
// shards assume the same batches): the binary (its path, size and time) and the arguments,
// hashed, compared with rank 0's; a rank that differs is named by rank 0 in one line, and every
// rank exits 2.
void refuse_ranks_that_differ(int argc, char** argv, const bp::dist::Ranks& mpi) {
  const std::string mine = bp::rank_launch_identity(argc, argv);
  uint64_t hash = bp::fnv1a_hash(mine);
  std::vector<uint64_t> all(size_t(mpi.size()));
  MPI_Allgather(&hash, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, MPI_COMM_WORLD);
  int first = 0;
  for (int r = 1; r < mpi.size() && !first; r++)
    if (all[size_t(r)] != all[0]) first = r;
  if (!first) return;
  if (mpi.rank() == first) MPI_Send(mine.data(), int(mine.size()), MPI_CHAR, 0, 0, MPI_COMM_WORLD);
  if (mpi.rank() == 0) {  // it says so before any rank exits (the barrier below)
    MPI_Status status;
    int length = 0;
    MPI_Probe(first, 0, MPI_COMM_WORLD, &status);
    MPI_Get_count(&status, MPI_CHAR, &length);
    std::string theirs(size_t(length), ' ');
    MPI_Recv(theirs.data(), length, MPI_CHAR, first, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    fmt::print(stderr,
               "error: rank {} was started with another binary or options than rank 0: start "
               "every rank with one command (rank 0: {}; rank {}: {})\n",
               first, mine, first, theirs);
    std::fflush(stderr);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Finalize();
  std::exit(2);
}

}  // namespace

// The rank dies with mpirun (or its daemon on another host), asked at its start
// (harness/common/proc.h).
BP_RANK_DIES_WITH_ITS_LAUNCHER

int main(int argc, char** argv) {
  // A rank's communication thread shares the cores with its compute: Open MPI's waits yield the
  // core rather than spin on it (mini_gpt_wide 32 at 2 ranks on 2 cores: 38.9 against 35.1 ms,
  // dev/notes.md, "Data parallel on two cores"), unless the user's environment says otherwise.
  setenv("OMPI_MCA_mpi_yield_when_idle", "1", /*overwrite=*/0);
  bp::dist::Ranks mpi(&argc, &argv);
  refuse_ranks_that_differ(argc, argv, mpi);
  bp::rank_progress().answer_sigusr1(mpi.rank());  // mpirun passes the runner's on
  // Every rank meets the same mistake in its arguments (they are the same): rank 0 says it, and
  // none exits before it has.
  bp::usage_errors_wait() = [] { MPI_Barrier(MPI_COMM_WORLD); };
  bool compiled = false, bf16 = false;
  for (int i = 1; i < argc; i++) {
    const std::string_view arg = argv[i];
    checking |= arg.starts_with("--check_out=");
    bf16 |= arg == "--precision=bf16";
    if (arg.starts_with("--zero=")) {
      bp::usage_errors_quiet() = mpi.rank() > 0;
      if (arg != "--zero=0" && arg != "--zero=1")
        bp::backend_usage_error(fmt::format(
            "{}: valid: --zero=0 (every rank updates every parameter, the default), --zero=1 "
            "(the optimizer's state sharded over the ranks)",
            arg));
      zero = arg == "--zero=1";
    }
    if (!arg.starts_with("--mode=")) continue;
    if (arg != "--mode=eager" && arg != "--mode=compiled") {
      bp::usage_errors_quiet() = mpi.rank() > 0;
      bp::backend_usage_error(
          fmt::format("{}: valid: --mode=eager (the default), --mode=compiled", arg));
    }
    compiled = arg == "--mode=compiled";
  }
  if (zero && bf16) {
    bp::usage_errors_quiet() = mpi.rank() > 0;
    bp::backend_usage_error(
        "--zero=1 with --precision=bf16: the sharded optimizer gathers no bf16 copy of the "
        "weights; valid: --zero=1 in float32, or --precision=bf16 with --zero=0");
  }
  if (compiled)
    return run_ranks<bp::CompiledBackend>(
        argc, argv, mpi,
        "backprop-bench engine (this repository), compiled mode, data parallel over Open MPI: "
        "kernels by priority, gradients summed over the ranks by a ring in a fixed order");
  return run_ranks<bp::EngineBackend>(
      argc, argv, mpi,
      "backprop-bench engine (this repository), data parallel over Open MPI: tensors in float32, "
      "gradients summed over the ranks by a ring in a fixed order");
}
