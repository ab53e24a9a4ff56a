// studies/bptt/rows.h: the study bptt's backends, the ways back through long sequences: Revolve and
// multistage on our engine, recomputed segments on libtorch, PyTorch's checkpoint. A variant names
// its backend (variant_of), and its column follows that backend's.
#pragma once

#include "harness/runner/backends.h"
#include "studies/main/rows.h"

namespace bp {

inline constexpr const char* kRecurrent = "char_rnn,char_rnn_wide";
inline constexpr BackendSpec kBpttRows[] = {{.name = "engine_revolve",
                                             .variant_of = "engine",
                                             .program = "bench_engine",
                                             .mode_flags = "--strategy=revolve --snapshots=8",
                                             .only_workloads = kRecurrent,
                                             .measures_in_setup = true,
                                             .color = "#e6ab02"},
                                            {.name = "engine_multistage",
                                             .variant_of = "engine",
                                             .program = "bench_engine",
                                             .mode_flags = "--strategy=multistage --snapshots=8",
                                             .only_workloads = kRecurrent,
                                             .checkpoints = true,
                                             .measures_in_setup = true,
                                             .color = "#a6761d"},
                                            {.name = "libtorch_segments",
                                             .variant_of = "libtorch",
                                             .program = "bench_libtorch",
                                             .mode_flags = "--strategy=segments",
                                             .threaded = true,
                                             .only_workloads = kRecurrent,
                                             .default_sizes_up_to = kLengthsUpTo10k,
                                             .color = "#fc8d62"},
                                            {.name = "pytorch_checkpoint",
                                             .variant_of = "pytorch",
                                             .program = "baselines/pytorch/pytorch_bench.py",
                                             .mode_flags = "--mode=checkpoint",
                                             .threaded = true,
                                             .only_workloads = kRecurrent,
                                             .default_sizes_up_to = kLengthsUpTo10k,
                                             .color = "#8da0cb"}};

}  // namespace bp
