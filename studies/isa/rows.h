// studies/isa/rows.h: the study isa's backends, ours (eager and compiled) and libtorch each at
// two instruction-set levels of their own, whatever --isa says (harness/common/isa_cap.h): avx2
// (x86-64-v3) and avx512 (x86-64-v4). A row at a level the processor lacks is reported skipped.
#pragma once

#include "harness/runner/backends.h"
#include "studies/main/rows.h"

namespace bp {

inline constexpr const char* kIsaModels = "char_mlp,mini_gpt,mini_gpt_wide,mlp_width";
inline constexpr BackendSpec kIsaRows[] = {{.name = "engine_avx2",
                                            .variant_of = "engine",
                                            .program = "bench_engine",
                                            .threaded = true,
                                            .only_workloads = kIsaModels,
                                            .isa = "avx2",
                                            .color = "#1b9e77",
                                            .marker = "<"},
                                           {.name = "engine_avx512",
                                            .variant_of = "engine",
                                            .program = "bench_engine",
                                            .threaded = true,
                                            .only_workloads = kIsaModels,
                                            .isa = "avx512",
                                            .color = "#1b9e77",
                                            .marker = ">"},
                                           {.name = "compiled_avx2",
                                            .variant_of = "compiled",
                                            .program = "bench_compiled",
                                            .threaded = true,
                                            .only_workloads = kIsaModels,
                                            .shares_verdicts = true,
                                            .isa = "avx2",
                                            .measures_in_setup = true,
                                            .color = "#66a61e",
                                            .marker = "<",
                                            .plan_cache = true},
                                           {.name = "compiled_avx512",
                                            .variant_of = "compiled",
                                            .program = "bench_compiled",
                                            .threaded = true,
                                            .only_workloads = kIsaModels,
                                            .shares_verdicts = true,
                                            .isa = "avx512",
                                            .measures_in_setup = true,
                                            .color = "#66a61e",
                                            .marker = ">",
                                            .plan_cache = true},
                                           {.name = "libtorch_avx2",
                                            .variant_of = "libtorch",
                                            .program = "bench_libtorch",
                                            .threaded = true,
                                            .only_workloads = kIsaModels,
                                            .isa = "avx2",
                                            .color = "#d95f02",
                                            .marker = "<"},
                                           {.name = "libtorch_avx512",
                                            .variant_of = "libtorch",
                                            .program = "bench_libtorch",
                                            .threaded = true,
                                            .only_workloads = kIsaModels,
                                            .isa = "avx512",
                                            .color = "#d95f02",
                                            .marker = ">"}};

}  // namespace bp
