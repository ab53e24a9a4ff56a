// apps/bench_libtorch.cc: bench_libtorch, every workload on libtorch eager (baselines/).
//
// Thread counts are fixed before any tensor exists: intra-op threads from --threads (default 1),
// inter-op threads 1, OpenBLAS's own pool to the same count, and OpenMP's idle threads waiting
// passively (see wait_passively_in_openmp). torch::set_num_threads does not reach OpenBLAS in
// Debian's build: under set_num_threads(1) its sgemm ran on two threads (dev/notes.md, "Threads:
// OpenMP must not spin on OpenBLAS's cores"). The BLAS libtorch resolved (Debian's libblas.so.3
// alternative) and its thread count are recorded: the reference BLAS instead of OpenBLAS would
// make the baseline unfairly slow.
//
// Under mpirun it runs as data-parallel ranks with --ranks=N, the peer of bench_ranks: c10d's
// ProcessGroupGloo and DDP's Reducer (baselines/libtorch/ranks.h), each rank a shard of every
// batch, rank 0 reporting.
//
//   build/bench_libtorch --benchmark_filter=tiny_graph --threads=1
//   mpirun -n 2 build/bench_libtorch --ranks=2 --instance=workload=char_mlp,size=1024
#include <ATen/Version.h>
#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <thread>

#include "baselines/libtorch/backend.h"
#include "baselines/libtorch/ranks.h"
#include "harness/common/proc.h"
#include "harness/driver/backend_main.h"

// Where the loader's libblas.so.3 symlink chain ends, e.g. .../openblas-pthread/libblas.so.3.
static std::string resolved_blas() {
  char path[PATH_MAX];
  if (realpath("/usr/lib/x86_64-linux-gnu/libblas.so.3", path)) return path;
  return "unknown";
}

// The instruction sets of ATen's kernels as its dispatcher chose them (ATEN_CPU_CAPABILITY caps
// it; Debian's libtorch does not export get_cpu_capability): the line "CPU capability usage: AVX2"
// of at::show_config(), as harness/common/isa_cap.h names the levels.
static std::string aten_isa() {
  const std::string config = at::show_config(), key = "CPU capability usage: ";
  const size_t at = config.find(key);
  if (at == std::string::npos) return "unknown";
  const std::string level = config.substr(at + key.size(), config.find('\n', at) - at - key.size());
  return level == "AVX512" ? "avx512" : level == "AVX2" ? "avx2" : "portable (" + level + ")";
}

// torch 1.13 sends autocast's bf16 products to oneDNN, which sums them in float32, where the
// processor has AVX-512 BW, VL and DQ (its mkldnn_bf16_device_check); elsewhere its own kernels
// sum them in bfloat16 (dev/notes.md, "torch's bf16 on AVX2"). Capped below avx512 (bench_run
// --isa=avx2 sets ATEN_CPU_CAPABILITY and DNNL_MAX_CPU_ISA), torch would still send them to
// oneDNN, which refuses bf16 at AVX2: so oneDNN is turned off, and torch runs as on an AVX2
// processor.
static bool onednn_takes_bf16() {
  const char* cap = std::getenv("ATEN_CPU_CAPABILITY");
  if (cap && (std::string_view(cap) == "avx2" || std::string_view(cap) == "default")) return false;
  const std::vector<std::string> flags = bp::fields(bp::proc_cpu_flags(), ' ');
  return std::ranges::all_of(std::array{"avx512bw", "avx512vl", "avx512dq"}, [&](const char* f) {
    return std::ranges::find(flags, f) != flags.end();
  });
}

// OpenBLAS is already loaded (libtorch links libblas.so.3), so its environment variable would be
// read too late; its runtime setter works. Returns the count it reports afterwards, or -1.
static int set_openblas_threads(int n) {
  auto set = reinterpret_cast<void (*)(int)>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"));
  auto get = reinterpret_cast<int (*)()>(dlsym(RTLD_DEFAULT, "openblas_get_num_threads"));
  if (set) set(n);
  return get ? get() : -1;
}

// Torch's intra-op pool is OpenMP (libgomp) and OpenBLAS has its own pthreads: after each
// parallel region libgomp's idle threads spin, taking the cores OpenBLAS's sgemm threads need
// (OpenBLAS issue #3187): two threads were slower than one. libgomp reads OMP_WAIT_POLICY once,
// when it loads, before main: so the process sets it and starts itself again.
// The restart is made before any library's initializers, in an ELF preinit function: libtorch's
// registration of its operators (0.3 s of CPU) is then paid once per process instead of twice
// (dev/notes.md). libc is not initialized here yet: nothing but the arguments, string compares
// and execve. main() restarts as before if this could not.
static void restart_before_the_libraries(int, char** argv, char** envp) {
  static constexpr char kPolicy[] = "OMP_WAIT_POLICY=";
  static char passive[] = "OMP_WAIT_POLICY=PASSIVE";
  static char* env[4096];
  size_t kept = 0;
  for (size_t i = 0; envp[i]; i++) {
    if (!std::strcmp(envp[i], passive)) return;  // restarted, or set by whoever started it
    if (kept + 2 >= std::size(env)) return;
    if (std::strncmp(envp[i], kPolicy, sizeof kPolicy - 1)) env[kept++] = envp[i];
  }
  env[kept++] = passive, env[kept] = nullptr;
  execve("/proc/self/exe", argv, env);
}
using PreinitFunction = void (*)(int, char**, char**);
[[gnu::section(".preinit_array"), gnu::used]] static PreinitFunction restart_first =
    restart_before_the_libraries;

static void wait_passively_in_openmp(char** argv) {
  if (const char* policy = std::getenv("OMP_WAIT_POLICY");
      policy && !std::strcmp(policy, "PASSIVE"))
    return;
  setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
  execv("/proc/self/exe", argv);
  std::perror("bench_libtorch: cannot restart itself with OMP_WAIT_POLICY=PASSIVE");
  std::exit(1);
}

// As bench_ranks does: every rank started with one command, or rank 0 names the first that was
// not and every rank exits 2 (their all-reduces would sum unlike steps into losses judged ok).
// Rank r's hash, 53 bits so that a double holds it exactly, summed over the ranks with the
// others' zeros.
void refuse_ranks_that_differ(int argc, char** argv, bp::GlooRanks& gloo) {
  const std::string mine = bp::rank_launch_identity(argc, argv);
  const double hash = double(bp::fnv1a_hash(mine) >> 11);
  const auto of_rank = [&](int r) { return gloo.over_ranks(gloo.rank() == r ? hash : 0.0); };
  const double first_rank = of_rank(0);
  int first = 0;
  for (int r = 1; r < gloo.size() && !first; r++)
    if (of_rank(r) != first_rank) first = r;
  if (!first) return;
  if (gloo.rank() == 0)
    std::fprintf(stderr,
                 "error: rank %d was started with another binary or options than rank 0: start "
                 "every rank with one command (rank 0: %s)\n",
                 first, mine.c_str());
  std::fflush(stderr);
  gloo.barrier();  // rank 0 has said it before any rank exits
  std::exit(2);
}

// Under mpirun, the rank dies with it, asked before libtorch's 2-3 s of start
// (harness/common/proc.h).
BP_RANK_DIES_WITH_ITS_LAUNCHER

int main(int argc, char** argv) {
  wait_passively_in_openmp(argv);
  using bp::LibtorchBackend;
  bp::BackendHooks<LibtorchBackend> hooks;
  hooks.version = "libtorch " BP_LIBTORCH_PACKAGE
                  " (Debian libtorch-dev; headers say " TORCH_VERSION "), eager";
  hooks.max_threads = 256;  // more than the CPUs runs, and says oversubscribed
  static int blas_threads = -1;
  hooks.set_threads = [](int n) {
    torch::set_num_threads(n);
    torch::set_num_interop_threads(1);
    blas_threads = set_openblas_threads(n);
  };
  hooks.context = {
      {"blas", resolved_blas()},
      {"isa", aten_isa()},
      {"bf16_products", onednn_takes_bf16() ? "onednn (sums in float32)"
                                            : "aten (sums in bfloat16: no AVX-512 BW/VL/DQ, or "
                                              "capped below avx512)"}};
  hooks.late_context = [] {
    return std::vector<std::pair<std::string, std::string>>{
        {"blas_threads", std::to_string(blas_threads)},
        {"intra_op_threads", std::to_string(torch::get_num_threads())},
        {"omp_wait_policy", std::getenv("OMP_WAIT_POLICY")}};
  };
  hooks.strategies = {std::begin(LibtorchBackend::through_time_strategies),
                      std::end(LibtorchBackend::through_time_strategies)};
  hooks.use_through_time = [](LibtorchBackend& b, const bp::ThroughTime& t) {
    b.use_through_time(t);
  };
  // --precision=bf16: torch.autocast's bf16 around each step's forward (baselines/libtorch/).
  hooks.use_bf16 = [](LibtorchBackend& b) {
    b.autocast_bf16 = true;
    static const bool onednn = onednn_takes_bf16();
    if (!onednn) at::globalContext().setUserEnabledMkldnn(false), b.bf16_sums = "bfloat16";
  };

  // Data parallel under mpirun: the ranks meet before any flag is read, as bench_ranks's do.
  const std::optional<bp::MpirunRank> launched = bp::mpirun_rank();
  static std::unique_ptr<bp::GlooRanks> gloo;
  if (launched) {
    bp::rank_progress().answer_sigusr1(launched->rank);
    gloo = std::make_unique<bp::GlooRanks>(*launched);
    refuse_ranks_that_differ(argc, argv, *gloo);
  }
  hooks.world = [] { return gloo ? bp::Shard{gloo->rank(), gloo->size()} : bp::Shard{0, 1}; };
  if (gloo) {
    bool checking = false;  // the check records the mean of the ranks' losses
    for (int i = 1; i < argc; i++)
      checking |= std::string_view(argv[i]).starts_with("--check_out=");
    hooks.configure = [checking](LibtorchBackend& b) {
      b.before_backward = [&b] { gloo->before_backward(b.params); };
      if (checking) b.loss_over_ranks = [](double x) { return gloo->over_ranks(x) / gloo->size(); };
    };
    hooks.report = [](const LibtorchBackend&, benchmark::State& state) {  // as bench_ranks's
      const double mine = double(bp::proc_peak_rss_bytes());
      double most = 0;
      for (int r = 0; r < gloo->size(); r++) {  // rank r's, the others adding 0
        const double theirs = gloo->over_ranks(r == gloo->rank() ? mine : 0.0);
        state.counters[fmt::format("peak_rss_bytes_rank_{}", r)] = theirs;
        most = std::max(most, theirs);
      }
      state.counters["peak_rss_bytes_most_of_ranks"] = most;
      state.counters["step_seconds_slowest_rank"] = gloo->over_ranks(
          bp::timed_loop_seconds() / double(std::max<int64_t>(1, state.iterations())),
          /*max=*/true);
    };
    hooks.context.push_back(
        {"gradients_summed",
         "by c10d's Reducer (DistributedDataParallel's) over ProcessGroupGloo, under the "
         "backward, in buckets of 1 MB then 25 MB"});
  }
  const int rc = bp::backend_main<LibtorchBackend>(argc, argv, hooks);
  gloo.reset();  // before the static destructors: every rank meets once more
  return rc;
}
