// studies/bptt/study.h: the study bptt, backpropagation through long sequences: store-all, Revolve,
// multistage and recomputed segments; and multistage against its checkpoint interval (phase.cc).
// Its page is README.md beside this file; its figure, figure.py (plots/plot.py draws it).
#pragma once

#include "harness/runner/studies.h"
#include "studies/bptt/phase.h"
#include "studies/bptt/rows.h"
#include "studies/bptt/table.h"

namespace bp {

inline constexpr Study kBpttStudy{
    .name = "bptt",
    .question =
        "what does each way back through a long sequence cost in time and memory (store-all, "
        "Revolve, multistage, recomputed segments)?",
    .backends =
        "engine,engine_revolve,engine_multistage,compiled,libtorch,libtorch_segments,pytorch,"
        "pytorch_checkpoint,torchscript",
    .workloads = "char_rnn,char_rnn_wide",
    .sizes = "",
    .phase = interval_sweep_phase,
    .table = bptt_table,
    .rows = kBpttRows};

}  // namespace bp
