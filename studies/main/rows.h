// studies/main/rows.h: the study main's backends, the main backends: our engine eager and compiled,
// libtorch, PyTorch and TorchScript. A variant names its backend (variant_of), and its column
// follows that backend's.
#pragma once

#include <string_view>

#include "harness/runner/backends.h"

namespace bp {

inline constexpr std::string_view kMainBackends = "engine,compiled,libtorch,pytorch,torchscript";

inline constexpr const char* kLengthsUpTo10k = "length=10000";
inline constexpr const char* kPythonUpTo = "length=10000 lstm_tensor=256";
inline constexpr const char* kLibtorchUpTo =
    "length=10000 elements=2500 points=64 lstm=0 gmm_d2=0 gmm_d10=0 equations=100 ell=7 "
    "lstm_tensor=256";
inline constexpr BackendSpec kMainRows[] = {{.name = "engine",
                                             .program = "bench_engine",
                                             .threaded = true,
                                             .color = "#1b9e77",
                                             .marker = "o",
                                             .main = true},
                                            {.name = "compiled",
                                             .program = "bench_compiled",
                                             .threaded = true,
                                             .default_sizes_up_to = kLengthsUpTo10k,
                                             .shares_verdicts = true,
                                             .measures_in_setup = true,
                                             .color = "#66a61e",
                                             .marker = "D",
                                             .main = true,
                                             .plan_cache = true},
                                            {.name = "libtorch",
                                             .program = "bench_libtorch",
                                             .threaded = true,
                                             .default_sizes_up_to = kLibtorchUpTo,
                                             .color = "#d95f02",
                                             .marker = "s",
                                             .main = true},
                                            {.name = "pytorch",
                                             .program = "baselines/pytorch/pytorch_bench.py",
                                             .mode_flags = "--mode=pytorch",
                                             .threaded = true,
                                             .default_sizes_up_to = kPythonUpTo,
                                             .color = "#7570b3",
                                             .marker = "^",
                                             .main = true},
                                            {.name = "torchscript",
                                             .program = "baselines/pytorch/pytorch_bench.py",
                                             .mode_flags = "--mode=torchscript",
                                             .threaded = true,
                                             .default_sizes_up_to = kPythonUpTo,
                                             .color = "#e7298a",
                                             .marker = "v",
                                             .main = true}};

}  // namespace bp
