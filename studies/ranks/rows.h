// studies/ranks/rows.h: the study ranks's backends, data parallel: each row runs as bench_run
// --ranks processes (default 2) under its launcher, each rank a shard of every batch and --threads
// threads. A variant names its backend (variant_of), and its column follows that backend's.
#pragma once

#include "harness/runner/backends.h"

namespace bp {

inline constexpr const char* kShardedModels = "char_mlp,mini_gpt,mini_gpt_wide,mlp_width";
inline constexpr BackendSpec kRanksRows[] = {
    // our engine, eager: gradients summed under the backward as it finishes them
    {.name = "engine_ranks",
     .variant_of = "engine",
     .program = "bench_ranks",
     .threaded = true,
     .only_workloads = kShardedModels,
     .color = "#1b9e77",
     .marker = "D",
     .launcher = "mpirun"},
    // the compiled mode, its kernels by priority (every rank the same kernels)
    {.name = "compiled_ranks",
     .variant_of = "compiled",
     .program = "bench_ranks",
     .mode_flags = "--mode=compiled",
     .threaded = true,
     .only_workloads = kShardedModels,
     .color = "#4d9221",
     .marker = "D",
     .launcher = "mpirun"},
    // the same with AdamW's moments sharded over the ranks (ZeRO stage 1)
    {.name = "compiled_zero",
     .variant_of = "compiled",
     .program = "bench_ranks",
     .mode_flags = "--mode=compiled --zero=1",
     .threaded = true,
     .only_workloads = "mini_gpt,mini_gpt_wide",
     .fp32_only = "the sharded optimizer gathers no bf16 copy of the weights (--zero=1 is float32)",
     .color = "#7fbc41",
     .marker = "P",
     .launcher = "mpirun"},
    // libtorch over c10d's ProcessGroupGloo, DDP's reducer (baselines/libtorch/ranks.h)
    {.name = "libtorch_ranks",
     .variant_of = "libtorch",
     .program = "bench_libtorch",
     .threaded = true,
     .only_workloads = kShardedModels,
     .color = "#d95f02",
     .marker = "D",
     .launcher = "mpirun"},
    // PyTorch's DistributedDataParallel over Gloo under torchrun
    {.name = "pytorch_ranks",
     .variant_of = "pytorch",
     .program = "baselines/pytorch/pytorch_bench.py",
     .mode_flags = "--mode=pytorch",
     .threaded = true,
     .only_workloads = kShardedModels,
     .color = "#7570b3",
     .marker = "D",
     .launcher = "torchrun"}};

}  // namespace bp
