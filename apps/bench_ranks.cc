// apps/bench_ranks.cc: bench_ranks, our engine (eager) as data-parallel ranks under Open MPI's
// mpirun: each rank a shard of every batch (workloads/data.h), its gradients summed over the
// ranks under the backward (engine/distributed/data_parallel.h), rank 0 reporting. A binary of
// its own so that bench_engine does not carry libmpi (1.3 MB of resident memory in every
// process, measured). Every rank times the same --iterations (each step waits for the others).
//
//   mpirun -n 2 build/bench_ranks --ranks=2 --instance=workload=char_mlp,size=1024
//   (as root: --allow-run-as-root; more ranks than cores: --oversubscribe)
#include <malloc.h>
#include <mpi.h>

#include <cstdlib>
#include <memory>
#include <string_view>

#include "engine/backend.h"
#include "engine/distributed/data_parallel.h"
#include "harness/common/proc.h"
#include "harness/driver/backend_main.h"

int main(int argc, char** argv) {
  using bp::EngineBackend;
  // A rank's communication thread shares the cores with its compute: Open MPI's waits yield the
  // core rather than spin on it (mini_gpt_wide 32 at 2 ranks on 2 cores: 38.9 against 35.1 ms,
  // dev/notes.md, "Data parallel on two cores"), unless the user's environment says otherwise.
  setenv("OMPI_MCA_mpi_yield_when_idle", "1", /*overwrite=*/0);
  bp::dist::Ranks mpi(&argc, &argv);
  bp::BackendHooks<EngineBackend> hooks;
  hooks.version =
      "backprop-bench engine (this repository), data parallel over Open MPI: tensors in float32, "
      "gradients summed over the ranks by a ring in a fixed order";
  hooks.context = {{"matmul", "own register-tiled kernels (engine/kernels/products.h), no BLAS"}};
  hooks.max_threads = 256;
  hooks.set_threads = [](int threads) {
    bp::split_thresholds();
    bp::thread_pool().resize(threads);
  };
  hooks.before_work = [] { mallopt(M_MMAP_THRESHOLD, 256 * 1024); };  // as bench_engine
  hooks.world = [&mpi] { return bp::Shard{mpi.rank(), mpi.size()}; };
  // The check (--check_out) records the global batch's loss, the mean of the ranks' (equal
  // shards); the timed steps exchange no loss, as a DDP step does not.
  static bool checking = false;
  for (int i = 1; i < argc; i++) checking |= std::string_view(argv[i]).starts_with("--check_out=");
  // --overlap=off: the gradients summed after the backward, not under it (what overlap saves).
  static bool overlap = true;
  hooks.flag = [](std::string_view arg) {
    if (!arg.starts_with("--overlap=")) return false;
    if (arg != "--overlap=on" && arg != "--overlap=off")
      bp::backend_usage_error(
          fmt::format("{}: valid: --overlap=on (the gradients summed under the "
                      "backward, the default), --overlap=off (after it)",
                      arg));
    overlap = arg == "--overlap=on";
    return true;
  };
  hooks.late_context = [] {
    return bp::ContextPairs{{"gradients_summed", overlap ? "under the backward, in buckets of 1 MB"
                                                         : "after the backward"}};
  };
  hooks.configure = [](EngineBackend& b) {
    auto dp = std::make_shared<bp::dist::DataParallel<float>>(b.graph, MPI_COMM_WORLD,
                                                              size_t(1) << 20, overlap);
    b.after_backward = [dp] { dp->finish(); };  // the reducer lives as long as the backend
    if (checking)
      b.loss_over_ranks = [](double mine) {
        double sum = 0;
        int ranks = 1;
        MPI_Allreduce(&mine, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        MPI_Comm_size(MPI_COMM_WORLD, &ranks);
        return sum / ranks;
      };
  };
  hooks.use_bf16 = [](EngineBackend& b) { b.graph.set_precision(bp::Precision::bf16); };
  hooks.report = [](const EngineBackend& b, benchmark::State& state) {
    state.counters["arena_bytes"] = double(b.arena_bytes());
    double mine = double(bp::proc_peak_rss_bytes()), most = 0;
    MPI_Allreduce(&mine, &most, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);  // every rank reports
    state.counters["peak_rss_bytes_most_of_ranks"] = most;
  };
  return bp::backend_main<EngineBackend>(argc, argv, hooks);
}
