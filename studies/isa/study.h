// studies/isa/study.h: the study isa, the main model rows with every backend capped at avx2 and
// at avx512 (bench_run --isa, harness/common/isa_cap.h), ours and libtorch. Its page is README.md
// beside this file; its figure, figure.py.
#pragma once

#include "harness/runner/studies.h"
#include "studies/isa/rows.h"
#include "studies/isa/table.h"

namespace bp {

inline constexpr Study kIsaStudy{
    .name = "isa",
    .question =
        "how do ours and libtorch fare at each instruction-set level, AVX2 as on most laptops "
        "and AVX-512 as on servers?",
    .backends =
        "engine_avx2,engine_avx512,compiled_avx2,compiled_avx512,libtorch_avx2,libtorch_avx512",
    .workloads = kIsaModels,
    .sizes = "hidden=1024 batch=32 width=2048",
    .table = isa_table,
    .rows = kIsaRows};

}  // namespace bp
