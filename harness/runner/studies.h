// harness/runner/studies.h: what a run measures by default, and the named studies.
//
// The default run (`make bench`) answers the headline question: every workload on the five main
// backends, at the sizes that show where each one wins, with intervals and the check. Each of the
// seed papers' experiments is a study of its own (`make study NAME=...`, `bench_run --study NAME`):
// its backends, workloads and sizes, the extra measurements it needs (the kernel rows, the
// interval sweep), and its own table (harness/runner/summary_text.h) and figure (plots/plot.py).
// `all` (`make bench-all`) runs everything: every backend and size, both extra measurements.
// A run's own --backends, --workloads and --sizes replace a study's.
#pragma once

#include <string_view>

#include "harness/runner/backends.h"

namespace bp {

struct Study {
  std::string_view name;
  std::string_view question;   // what it answers, one line
  std::string_view backends;   // its backends ("": every one but the two-thread variants)
  std::string_view workloads;  // its workloads ("": every one)
  std::string_view sizes;      // its sizes, as --sizes values separated by spaces ("": defaults)
  bool kernel_rows = false;  // the matmul dialects kernel by kernel (studies/kernels/kernel_rows.h)
  bool interval_sweep = false;  // multistage against its checkpoint interval (arXiv 1806.01117)
};

inline constexpr Study kStudies[] = {
    {"main", "how much faster and smaller is our engine than the torch backends, per workload?",
     kMainBackends, "",
     "nodes=10,1000,100000 hidden=64,1024 batch=1,32 width=16,256,2048 length=100 "
     "params=1000000"},
    {"bptt",
     "what does each way back through a long sequence cost in time and memory (store-all, "
     "Revolve, multistage, recomputed segments)?",
     "engine,engine_revolve,engine_multistage,compiled,libtorch,libtorch_segments,pytorch,"
     "pytorch_checkpoint,torchscript",
     "char_rnn,char_rnn_wide", "", false, true},
    {"budget", "what does planning under half its memory cost the compiled mode?",
     "engine,compiled,compiled_budget", "mini_gpt_wide", ""},
    {"first_step",
     "how long from a cold start to the first step, with and without a cached plan, against a "
     "step and TorchScript's?",
     "engine,compiled,compiled_first_step,compiled_warm_start,torchscript,torchscript_first_step",
     "", "length=100,1000 params=100000"},
    {"kernels", "which matmul kernel is fastest on each op shape, and how near the FMA peak?",
     "engine,compiled", "char_mlp,mlp_width", "hidden=1024 width=2048", true},
    {"threads", "what do two threads buy each backend on the large model rows?",
     "engine,engine_2t,compiled,compiled_2t,libtorch,libtorch_2t,pytorch,pytorch_2t,torchscript,"
     "torchscript_2t",
     "char_mlp,mini_gpt,mini_gpt_wide,mlp_width", "hidden=1024 batch=8,32,64 width=1024,2048"},
    {"optim", "what does the optimizer alone cost against the memory bandwidth its bytes need?",
     "engine,compiled,libtorch,pytorch,bound", "adamw", "params=100000,1000000,10000000"},
    {"gradbench",
     "GradBench's evals at its sizes: how does our engine fare against ADOL-C on another "
     "suite's workloads?",
     "engine,compiled,adolc,adolc_retape",
     "tiny_graph,small_graph,scalar_chain,lse,llsq,lstm,gmm_d2,gmm_d10,ode,det",
     "nodes=10,1000,100000 elements=2500,20000,160000,1280000 points=16,128,1024,16392 "
     "chars=1024,4096,8192 k=5,10,25,50,100 equations=100,1000,10000 ell=5,6,7,8,9,10"},
    {"gradbench_tensor",
     "GradBench's lstm and gmm as tensor code: is our tensor engine ahead of the torch backends?",
     "engine,compiled,libtorch,pytorch,torchscript", "lstm_tensor,gmm_d2_tensor,gmm_d10_tensor",
     "chars=1024,4096,8192 k=5,10,25,50,100,200"},
    {"all", "everything: every backend and size, the kernel rows and the interval sweep", "", "",
     "", true, true},
};

inline const Study* find_study(std::string_view name) {
  for (const Study& s : kStudies)
    if (s.name == name) return &s;
  return nullptr;
}

}  // namespace bp
