"""baselines/pytorch/pytorch_context.py: what every result of pytorch_bench.py says about where its
numbers come from (the context of Google Benchmark's JSON and of the check's file: the backend,
its threads, precision and instruction sets, the machine as bench_run read it), and the two
facts of this processor the driver acts on: /proc/cpuinfo's fields, and where torch sends
autocast's bf16 products.
"""
import datetime
import json
import os
import platform
import resource
import socket
import sys

import torch

import pytorch_models as models


def cpuinfo(field):
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith(field):
                return line.split(":", 1)[1].strip()
    return "unknown"


# The variables bench_run --isa sets (harness/common/isa_cap.h, kIsaCapVariables), as the C++
# backends record them.
ISA_CAP_VARIABLES = ("BP_ISA", "ATEN_CPU_CAPABILITY", "DNNL_MAX_CPU_ISA", "OPENBLAS_CORETYPE",
                     "LIBXSMM_TARGET")


def isa_cap_in_effect():
    caps = [f"{name}={os.environ[name]}" for name in ISA_CAP_VARIABLES if os.environ.get(name)]
    return " ".join(caps) or "none (each library's own choice)"


def aten_isa():
    """ATen's kernels as its dispatcher chose them: "CPU capability usage: AVX2" in its config."""
    for line in torch.__config__.show().splitlines():
        if "CPU capability usage:" in line:
            level = line.split(":", 1)[1].strip()
            return {"AVX512": "avx512", "AVX2": "avx2"}.get(level, f"portable ({level})")
    return "unknown"


def address_space_limit():
    """This process's cap on its address space (bench_run's --memory-limit, a data-parallel row's
    share of it per rank): bytes, or "none"."""
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    return "none" if soft == resource.RLIM_INFINITY else str(soft)


def context(flags, corpus):
    mode = {"pytorch": "eager",
            "torchscript": "torch.jit.script (scalar graphs, recurrent models) / torch.jit.trace "
                           "(other models)",
            "torchscript_fused": "torchscript, its CPU fuser (NNC) on",
            "checkpoint": "eager, torch.utils.checkpoint over segments of about sqrt(n) steps "
                          "(recurrent models)"}[flags["mode"]]
    ctx = {
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "host_name": socket.gethostname(), "executable": os.path.abspath(sys.argv[0]),
        "num_cpus": os.cpu_count(), "mhz_per_cpu": int(float(cpuinfo("cpu MHz") or 0)),
        "cpu_scaling_enabled": False, "caches": [], "load_avg": list(os.getloadavg()),
        "library_build_type": "release",
        "backend": flags["backend_name"] or (
            "pytorch_checkpoint" if flags["mode"] == "checkpoint" else flags["mode"]),
        "backend_version": f"PyTorch {torch.__version__} (Debian python3-torch), {mode}",
        "threads": str(flags["threads"]),
        "precision": "bf16" if flags["bf16"] else "fp32",
        "isa": aten_isa(), "isa_cap": isa_cap_in_effect(),
        "cpus": str(len(os.sched_getaffinity(0))),
        # every rank on this host (torchrun's LOCAL_WORLD_SIZE) runs the threads
        "oversubscribed": "yes" if flags["threads"] * int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
        > len(os.sched_getaffinity(0)) else "no",
        "warmup_steps": str(flags["warmup_steps"]),
        "address_space_limit": address_space_limit(),
        "bf16_products": "onednn (sums in float32)" if onednn_takes_bf16() else
        "aten (sums in bfloat16: no AVX-512 BW/VL/DQ, or capped below avx512)",
        "compiler": f"CPython {platform.python_version()} (/usr/bin/python3)",
        "cxx_flags": "n/a (Python; PyTorch as Debian built it)", "cpu_model": cpuinfo("model name"),
        "git_sha": os.environ.get("BACKPROP_BENCH_GIT_SHA", "unknown (not run by bench_run)"),
        "blas": os.path.realpath("/usr/lib/x86_64-linux-gnu/libblas.so.3"),
        "blas_threads": os.environ.get("OPENBLAS_NUM_THREADS", "?"),
        "intra_op_threads": str(torch.get_num_threads()),
        "omp_wait_policy": os.environ["OMP_WAIT_POLICY"],
    }
    if flags["ranks"] > 1:  # data parallel: every rank runs the threads above
        ctx.update(ranks=str(flags["ranks"]), scaling="weak" if flags["weak"] else "strong",
                   gradients_summed="by DistributedDataParallel over Gloo, under the backward, "
                                    "in its default buckets (1 MB first, then 25 MB)")
    # The machine as bench_run read it (harness/common/proc.h): the same fields as the C++ backends'.
    ctx.update(json.loads(os.environ.get("BACKPROP_BENCH_ENVIRONMENT",
                                         '{"environment": "unknown (not run by bench_run)"}')))
    if isinstance(corpus, models.Corpus):
        ctx["data"] = f"{corpus.path} ({len(corpus.tokens)} bytes, vocabulary {corpus.vocab_size})"
    return ctx


def onednn_takes_bf16():
    """Whether torch 1.13 sends autocast's bf16 products to oneDNN, which sums them in float32:
    where the processor has AVX-512 BW, VL and DQ, unless ATen is capped below avx512 (bench_run
    --isa=avx2), where oneDNN, capped too, would refuse them (apps/bench_libtorch.cc says why)."""
    if os.environ.get("ATEN_CPU_CAPABILITY") in ("avx2", "default"):
        return False
    flags = cpuinfo("flags").split()
    return all(f in flags for f in ("avx512bw", "avx512vl", "avx512dq"))
