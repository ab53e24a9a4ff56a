// studies/amp/rows.h: the study amp's backends, each main backend under mixed precision
// (--precision=bf16): our engine's bf16 products, eager and compiled, and torch.autocast's bf16
// in libtorch, PyTorch and TorchScript. A variant names its backend (variant_of), and its column
// follows that backend's.
#pragma once

#include "harness/runner/backends.h"
#include "studies/main/rows.h"

namespace bp {

inline constexpr const char* kAmpModels = "char_mlp,mini_gpt,mini_gpt_wide,mlp_width,char_rnn_wide";
inline constexpr BackendSpec kAmpRows[] = {{.name = "engine_bf16",
                                            .variant_of = "engine",
                                            .program = "bench_engine",
                                            .mode_flags = "--precision=bf16",
                                            .threaded = true,
                                            .only_workloads = kAmpModels,
                                            .color = "#5ab4ac",
                                            .marker = "o"},
                                           {.name = "compiled_bf16",
                                            .variant_of = "compiled",
                                            .program = "bench_compiled",
                                            .mode_flags = "--precision=bf16",
                                            .threaded = true,
                                            .only_workloads = kAmpModels,
                                            .default_sizes_up_to = kLengthsUpTo10k,
                                            .shares_verdicts = true,
                                            .measures_in_setup = true,
                                            .color = "#a6d854",
                                            .marker = "D",
                                            .plan_cache = true},
                                           {.name = "libtorch_bf16",
                                            .variant_of = "libtorch",
                                            .program = "bench_libtorch",
                                            .mode_flags = "--precision=bf16",
                                            .threaded = true,
                                            .only_workloads = kAmpModels,
                                            .default_sizes_up_to = kLibtorchUpTo,
                                            .color = "#fdae61",
                                            .marker = "s"},
                                           {.name = "pytorch_bf16",
                                            .variant_of = "pytorch",
                                            .program = "baselines/pytorch/pytorch_bench.py",
                                            .mode_flags = "--mode=pytorch --precision=bf16",
                                            .threaded = true,
                                            .only_workloads = kAmpModels,
                                            .default_sizes_up_to = kPythonUpTo,
                                            .color = "#bcbddc",
                                            .marker = "^"},
                                           {.name = "torchscript_bf16",
                                            .variant_of = "torchscript",
                                            .program = "baselines/pytorch/pytorch_bench.py",
                                            .mode_flags = "--mode=torchscript --precision=bf16",
                                            .threaded = true,
                                            .only_workloads = kAmpModels,
                                            .default_sizes_up_to = kPythonUpTo,
                                            .color = "#f1b6da",
                                            .marker = "v"}};

}  // namespace bp
