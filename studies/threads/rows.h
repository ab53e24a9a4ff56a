// studies/threads/rows.h: the study threads's backends, every main backend at two threads, and
// TorchScript with its CPU fuser. A variant names its backend (variant_of), and its column follows
// that backend's.
#pragma once

#include "harness/runner/backends.h"
#include "studies/main/rows.h"

namespace bp {

inline constexpr const char* kModels = "char_mlp,mini_gpt,mini_gpt_wide,mlp_width";
inline constexpr BackendSpec kThreadsRows[] = {{.name = "engine_2t",
                                                .variant_of = "engine",
                                                .program = "bench_engine",
                                                .threaded = true,
                                                .only_workloads = kModels,
                                                .fixed_threads = 2,
                                                .color = "#66c2a5"},
                                               {.name = "compiled_2t",
                                                .variant_of = "compiled",
                                                .program = "bench_compiled",
                                                .threaded = true,
                                                .only_workloads = kModels,
                                                .shares_verdicts = true,
                                                .fixed_threads = 2,
                                                .measures_in_setup = true,
                                                .color = "#b3de69",
                                                .plan_cache = true},
                                               {.name = "libtorch_2t",
                                                .variant_of = "libtorch",
                                                .program = "bench_libtorch",
                                                .threaded = true,
                                                .only_workloads = kModels,
                                                .fixed_threads = 2,
                                                .color = "#fc8d62"},
                                               {.name = "pytorch_2t",
                                                .variant_of = "pytorch",
                                                .program = "baselines/pytorch/pytorch_bench.py",
                                                .mode_flags = "--mode=pytorch",
                                                .threaded = true,
                                                .only_workloads = kModels,
                                                .fixed_threads = 2,
                                                .color = "#8da0cb"},
                                               {.name = "torchscript_2t",
                                                .variant_of = "torchscript",
                                                .program = "baselines/pytorch/pytorch_bench.py",
                                                .mode_flags = "--mode=torchscript",
                                                .threaded = true,
                                                .only_workloads = kModels,
                                                .fixed_threads = 2,
                                                .color = "#f4a6c8"},
                                               // TorchScript with its CPU fuser on (the study
                                               // fusion's torchscript_fused) at two threads
                                               {.name = "torchscript_fused_2t",
                                                .variant_of = "torchscript",
                                                .program = "baselines/pytorch/pytorch_bench.py",
                                                .mode_flags = "--mode=torchscript_fused",
                                                .threaded = true,
                                                .only_workloads = kModels,
                                                .fixed_threads = 2,
                                                .color = "#de77ae",
                                                .marker = "v"}};

}  // namespace bp
