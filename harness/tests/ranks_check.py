#!/usr/bin/python3
"""harness/tests/ranks_check.py: bench_ranks (our engine as data-parallel ranks under mpirun)
against bench_engine in one process, through their checks: mini_gpt 12 at 2, 3 and 4 ranks
(strong scaling), char_mlp at 2, mini_gpt 12 at 3 in the compiled mode against bench_compiled
(kernels by priority), bench_libtorch's ranks (Gloo, DDP's reducer) at 3 against one process of
it, PyTorch's DDP under torchrun (char_mlp at 2, and mini_gpt 6 at 2 ranks of weak scaling as
mini_gpt 12) against one PyTorch process, bench_ranks and bench_libtorch across two hosts made of
network namespaces (dev/two_hosts.sh; where root may make them), mini_gpt 12 with the optimizer sharded (--zero=1) at 3 ranks, eager, and
at 2, compiled, and mini_gpt 6 at 2 ranks of weak scaling against mini_gpt 12, each rank
a shard of every batch; the losses of every check step and the first step's gradient norms
within 1e-5 of the one process's (a sum over ranks is another order than a sum over rows); one
file of results from 3 ranks, rank 0's. Then the refusals: each one line and exit 2.
    /usr/bin/python3 harness/tests/ranks_check.py BUILD_DIR      (ctest -R ranks_check)
"""
import json
import os
import subprocess
import sys
import tempfile

BUILD = sys.argv[1] if len(sys.argv) > 1 else "build"
MPIRUN = ["mpirun", "--oversubscribe"]
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_btl_vader_single_copy_mechanism="none")
TOLERANCE = 1e-5
SOURCE = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PYTHON, PYTORCH = "/usr/bin/python3", os.path.join(SOURCE, "baselines", "pytorch", "pytorch_bench.py")
# Debian's torchrun (torch 1.13 on Python 3.11) fails on its default --redirects 0 and --tee 0
# (its Std flag of 0 is not found); any other value works.
TORCHRUN = ["torchrun", "--standalone", "--redirects", "1", "--tee", "1"]


def check(argv, out, instance, env=None):
    r = subprocess.run(argv + [f"--instance={instance}", f"--check_out={out}"], env=env or ENV,
                       capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        sys.exit(f"FAIL: {' '.join(argv)}: exit {r.returncode}\n{r.stderr[-2000:]}")
    with open(out) as f:
        return json.load(f)["records"][0]


def relative(a, b):
    return abs(a - b) / max(abs(b), 1e-12)


def agree(what, one, many):
    """Every loss and step-0 gradient norm of `many` within TOLERANCE of `one`'s, said in a line."""
    worst = max([relative(x, y) for x, y in zip(many["losses"], one["losses"])] +
                [relative(x, y) for x, y in zip(many["step0"]["grad_norms"],
                                                one["step0"]["grad_norms"])])
    ok = len(many["losses"]) == len(one["losses"]) and worst <= TOLERANCE
    print(f"  {what}: {len(one['losses'])} steps, max relative difference {worst:.1e} "
          f"(tolerance {TOLERANCE:.0e}){'' if ok else '  FAIL'}")
    return ok


def compare(instance, ranks, tmp, compiled=False, weak_of=None, zero=False, libtorch=False):
    """weak_of: the instance of one process that `instance` at weak scaling over `ranks` is."""
    one = check([f"{BUILD}/bench_compiled", "--no-cache", "--dialect=priority"] if compiled else
                [f"{BUILD}/bench_libtorch"] if libtorch else
                [f"{BUILD}/bench_engine"], f"{tmp}/one.json", weak_of or instance)
    binary = "bench_libtorch" if libtorch else "bench_ranks"
    many = check(MPIRUN + ["-n", str(ranks), f"{BUILD}/{binary}", f"--ranks={ranks}"] +
                 (["--mode=compiled"] if compiled else []) +
                 (["--scaling=weak"] if weak_of else []) + (["--zero=1"] if zero else []),
                 f"{tmp}/ranks.json", instance)
    return agree(f"{instance}, {ranks} ranks{', compiled' if compiled else ''}"
                 f"{', libtorch (Gloo, DDP reducer)' if libtorch else ''}"
                 f"{', optimizer sharded' if zero else ''}"
                 f"{f', weak (as {weak_of})' if weak_of else ''}", one, many)


def compare_ddp(instance, ranks, tmp, weak_of=None):
    """PyTorch's DistributedDataParallel under torchrun against one PyTorch process."""
    data = ["--data=/usr/share/dict/words"]
    one = check([PYTHON, PYTORCH] + data, f"{tmp}/one.json", f"{weak_of or instance},check_steps=20")
    many = check(TORCHRUN + [f"--nproc_per_node={ranks}", PYTORCH, f"--ranks={ranks}"] + data +
                 (["--scaling=weak"] if weak_of else []), f"{tmp}/ranks.json",
                 f"{instance},check_steps=20",
                 env=dict(ENV, TMPDIR=tmp))  # its torchelastic_* folder goes with tmp
    return agree(f"{instance}, {ranks} ranks, PyTorch DDP"
                 f"{f', weak (as {weak_of})' if weak_of else ''}", one, many)


TWO_HOSTS = [os.path.join(SOURCE, "dev", "two_hosts.sh")]


def across_two_hosts(tmp):
    """Two hosts of network namespaces joined by a shaped veth (dev/two_hosts.sh): bench_ranks
    (TCP between the hosts) and bench_libtorch (Gloo over the veth) against one process. Needs
    root and network namespaces; says why where it cannot."""
    if os.geteuid() != 0 or subprocess.run(["ip", "netns", "list"], capture_output=True).returncode:
        print("  two hosts: skipped (needs root and `ip netns`)")
        return True
    hosts = f"{tmp}/hosts"
    env = dict(ENV, HOSTS=hosts)
    up = subprocess.run(TWO_HOSTS + ["up", "1gbit"], env=env, capture_output=True, text=True)
    if up.returncode:
        print(f"  two hosts: skipped (cannot make them: {up.stderr.strip()[-300:]})")
        subprocess.run(TWO_HOSTS + ["down"], env=env, capture_output=True)
        return True
    ok = True
    try:
        for binary, one in (("bench_ranks", "bench_engine"), ("bench_libtorch", "bench_libtorch")):
            instance = "workload=mini_gpt,size=12"
            a = check([f"{BUILD}/{one}"], f"{tmp}/one.json", instance)
            b = check(TWO_HOSTS + ["run", "mpirun", "-n", "2", "--hostfile", hosts,
                                   f"{BUILD}/{binary}", "--ranks=2"], f"{tmp}/two.json", instance,
                      env=env)
            ok &= agree(f"{instance}, two hosts (1 Gb/s veth), {binary}", a, b)
    finally:
        subprocess.run(TWO_HOSTS + ["down"], env=env, capture_output=True)
    return ok


def one_results_file(tmp):
    """3 ranks timing 5 steps twice: one file of results, rank 0's, naming the ranks."""
    out = f"{tmp}/results.json"
    r = subprocess.run(MPIRUN + ["-n", "3", f"{BUILD}/bench_ranks", "--ranks=3", "--iterations=5",
                                 "--instance=workload=mini_gpt,size=12",
                                 "--benchmark_repetitions=2", f"--benchmark_out={out}",
                                 "--benchmark_out_format=json"],
                       env=ENV, capture_output=True, text=True, timeout=120)
    with open(out) as f:
        d = json.load(f)
    runs = [b for b in d["benchmarks"] if b.get("run_type") == "iteration"]
    ok = (r.returncode == 0 and d["context"].get("ranks") == "3" and len(runs) == 2 and
          all(b["iterations"] == 5 and b["peak_rss_bytes_most_of_ranks"] > 0 for b in runs))
    print(f"  results ({'ok' if ok else 'FAIL'}): 3 ranks, one file of 2 repetitions of 5 steps")
    return ok


def refused(argv, expected, env=None):
    r = subprocess.run(argv, env=dict(ENV, **(env or {})), capture_output=True, text=True,
                       timeout=60)
    lines = [l for l in r.stderr.splitlines() if expected in l]
    ok = r.returncode == 2 and len(lines) >= 1
    print(f"  refused ({'ok' if ok else 'FAIL'}): {expected}" +
          ("" if ok else f"\n    exit {r.returncode}: {r.stderr.strip()[-500:]}"))
    return ok


def main():
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        for ranks in (2, 3, 4):
            ok &= compare("workload=mini_gpt,size=12", ranks, tmp)
        ok &= compare("workload=char_mlp,size=64", 2, tmp)
        ok &= compare("workload=mini_gpt,size=12", 3, tmp, compiled=True)
        ok &= compare("workload=mini_gpt,size=12", 3, tmp, zero=True)
        ok &= compare("workload=mini_gpt,size=12", 2, tmp, compiled=True, zero=True)
        ok &= compare("workload=mini_gpt,size=6", 2, tmp, weak_of="workload=mini_gpt,size=12")
        ok &= compare("workload=mini_gpt,size=12", 3, tmp, libtorch=True)
        ok &= compare_ddp("workload=char_mlp,size=64", 2, tmp)
        ok &= compare_ddp("workload=mini_gpt,size=6", 2, tmp, weak_of="workload=mini_gpt,size=12")
        ok &= one_results_file(tmp)
        ok &= across_two_hosts(tmp)
    ranks2 = MPIRUN + ["-n", "2", f"{BUILD}/bench_ranks"]
    ok &= refused([f"{BUILD}/bench_engine", "--ranks=2"], "bench_ranks under mpirun")
    ok &= refused([PYTHON, PYTORCH, "--ranks=2", "--instance=workload=char_mlp,size=64"],
                  "--ranks=2: torchrun started 1 process")
    # As torchrun would start it (its arguments are refused before the ranks meet); torchrun
    # itself exits 1 whatever its failed worker's status was.
    ok &= refused([PYTHON, PYTORCH, "--ranks=2", "--mode=torchscript",
                   "--instance=workload=char_mlp,size=64"],
                  "--ranks=2 with --mode=torchscript: DistributedDataParallel wraps the eager",
                  env=dict(WORLD_SIZE="2", RANK="0"))
    ok &= refused([f"{BUILD}/bench_libtorch", "--ranks=2"],
                  "--ranks=2: mpirun started 1 process (or none: run it under mpirun -n N)")
    ok &= refused(ranks2 + ["--ranks=3"], "--ranks=3: mpirun started 2 processes")
    ok &= refused(ranks2 + ["--ranks=0"], "--ranks=0: expected a whole number from 1")
    ok &= refused(ranks2 + ["--ranks=2", "--instance=workload=char_rnn,size=10"],
                  "char_rnn has no batch to shard")
    ok &= refused(MPIRUN + ["-n", "3", f"{BUILD}/bench_ranks", "--ranks=3",
                            "--instance=workload=char_mlp,size=64"],
                  "a batch of 64 rows does not split evenly into 3 ranks")
    ok &= refused(ranks2 + ["--ranks=2", "--scaling=both"], "--scaling=both: valid: strong")
    ok &= refused(ranks2 + ["--ranks=2", "--mode=jit"], "--mode=jit: valid: --mode=eager")
    ok &= refused(ranks2 + ["--ranks=2", "--zero=3"], "--zero=3: valid: --zero=0")
    ok &= refused(ranks2 + ["--ranks=2", "--zero=1", "--precision=bf16"],
                  "--zero=1 with --precision=bf16: the sharded optimizer gathers no bf16 copy")
    ok &= refused(MPIRUN + ["-n", "1", f"{BUILD}/bench_ranks", "--ranks=2", "--iterations=5", ":",
                            "-n", "1", f"{BUILD}/bench_ranks", "--ranks=2", "--iterations=6"],
                  "rank 1 was started with another binary or options than rank 0")
    ok &= refused(MPIRUN + ["-n", "1", f"{BUILD}/bench_libtorch", "--ranks=2", "--iterations=5",
                            ":", "-n", "1", f"{BUILD}/bench_libtorch", "--ranks=2",
                            "--iterations=6"],
                  "rank 1 was started with another binary or options than rank 0")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
