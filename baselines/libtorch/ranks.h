// baselines/libtorch/ranks.h: libtorch as data-parallel ranks, the peer of bench_ranks: c10d's
// ProcessGroupGloo for the collectives and c10d's Reducer, the C++ engine inside PyTorch's
// DistributedDataParallel, for the gradients. The Reducer is set up as DDP sets it up
// (torch/nn/parallel/distributed.py, 1.13): buckets from compute_bucket_assignment_by_size with a
// first bucket of 1 MB and 25 MB after it, in reverse order (the last parameters' gradients are
// ready first), autograd hooks that start each bucket's all-reduce as soon as its gradients are
// accumulated, the sum divided by the ranks, and prepare_for_backward before every backward.
//
// Launched by Open MPI's mpirun like bench_ranks (it reads OMPI_COMM_WORLD_RANK and _SIZE; it
// does not link MPI): the ranks meet in a c10d::FileStore under /tmp named by mpirun's job id
// (BP_RENDEZVOUS_FILE overrides it; every host of a run must see the file). Gloo talks over TCP:
// on the interface GLOO_SOCKET_IFNAME names (PyTorch's variable), else over the loopback.
#pragma once

#include <torch/types.h>  // Tensor and its factories: the umbrella torch/torch.h cost 6 s a unit

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/reducer.hpp>
#include <tuple>
#include <vector>

namespace bp {

// This process's place among the ranks mpirun started; nullopt when not started by mpirun.
struct MpirunRank {
  int rank, size;
  std::string job;
};
inline std::optional<MpirunRank> mpirun_rank() {
  const char *rank = std::getenv("OMPI_COMM_WORLD_RANK"),
             *size = std::getenv("OMPI_COMM_WORLD_SIZE");
  if (!rank || !size) return std::nullopt;
  const char* job = std::getenv("OMPI_MCA_ess_base_jobid");
  return MpirunRank{std::atoi(rank), std::atoi(size), job ? job : "0"};
}

class GlooRanks {
 public:
  static constexpr size_t kFirstBucketBytes = size_t(1) << 20;  // DDP's defaults
  static constexpr size_t kBucketBytes = size_t(25) << 20;

  explicit GlooRanks(const MpirunRank& me) : me_(me) {
    const char* file = std::getenv("BP_RENDEZVOUS_FILE");
    path_ = file ? file : "/tmp/backprop-bench-gloo-" + me.job;
    auto store = c10::make_intrusive<c10d::FileStore>(path_, me.size);
    auto options = c10d::ProcessGroupGloo::Options::create();
    const char* interface = std::getenv("GLOO_SOCKET_IFNAME");
    options->devices.push_back(
        interface ? c10d::ProcessGroupGloo::createDeviceForInterface(interface)
                  : c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
    group_ = c10::make_intrusive<c10d::ProcessGroupGloo>(store, me.rank, me.size, options);
  }
  ~GlooRanks() {
    reducer_.reset();
    barrier();  // every rank is past the store before rank 0 removes its file
    if (me_.rank == 0) std::remove(path_.c_str());
  }
  GlooRanks(const GlooRanks&) = delete;
  GlooRanks& operator=(const GlooRanks&) = delete;

  // Before each backward: the reducer made at the first (the parameters exist by then), then
  // told a backward comes, as DDP's forward tells it.
  void before_backward(const std::vector<torch::Tensor>& params) {
    // Another backend's parameters: a reducer of their own (the old one holds the old tensors,
    // so no new tensor can have an old one's address while it lives).
    if (!reducer_ || !(ParamsSeen::of(params) == seen_)) make_reducer(params);
    reducer_->prepare_for_backward({});
  }
  // x summed (max: the largest) over the ranks.
  double over_ranks(double x, bool max = false) {
    std::vector<torch::Tensor> t{torch::tensor({x}, torch::kFloat64)};
    c10d::AllreduceOptions o;
    o.reduceOp = max ? c10d::ReduceOp::MAX : c10d::ReduceOp::SUM;
    group_->allreduce(t, o)->wait();
    return t[0].item<double>();
  }
  void barrier() { group_->barrier()->wait(); }
  int rank() const { return me_.rank; }
  int size() const { return me_.size; }

 private:
  void make_reducer(const std::vector<torch::Tensor>& params) {
    reducer_.reset();
    auto [buckets, limits] =
        c10d::compute_bucket_assignment_by_size(params, {kFirstBucketBytes, kBucketBytes});
    std::reverse(buckets.begin(), buckets.end());
    std::reverse(limits.begin(), limits.end());
    reducer_ = std::make_unique<c10d::Reducer>(
        params, std::move(buckets), std::move(limits), group_,
        std::vector<bool>(params.size(), false), int64_t(kBucketBytes),
        /*find_unused_parameters=*/false, /*gradient_as_bucket_view=*/false,
        std::unordered_map<size_t, std::string>{}, int64_t(kFirstBucketBytes));
    seen_ = ParamsSeen::of(params);
  }

  MpirunRank me_;
  std::string path_;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> group_;
  std::unique_ptr<c10d::Reducer> reducer_;
  struct ParamsSeen {  // which parameters the reducer was made for
    size_t count = 0;
    const void *first = nullptr, *last = nullptr;
    static ParamsSeen of(const std::vector<torch::Tensor>& p) {
      return {p.size(), p.front().unsafeGetTensorImpl(), p.back().unsafeGetTensorImpl()};
    }
    bool operator==(const ParamsSeen&) const = default;
  } seen_;
};

}  // namespace bp
