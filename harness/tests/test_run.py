"""harness/tests/test_run.py: bench_run end to end, on real backend processes.

A short real run must write what docs/results.md and plots/ rely on; bad inputs
must give one clear line and exit 2; the verdicts must not depend on the order of --backends; a
backend binary must still run on its own with Google Benchmark's flags. What goes wrong (crashes,
hangs, wrong answers, a full disk, an interrupted run) is test_faults.py's.
    ctest -R harness_pytest --output-on-failure     or     /usr/bin/python3 -m pytest harness/tests
"""
import csv
import json
import os
import re
import shlex
import statistics
import subprocess
import sys
import time

import pytest

QUICK = ["--repetitions", "2", "--min-time", "0.01", "--no-plots", "--rounds", "1"]
# The default run's backends (harness/runner/studies.h, the study main).
MAIN = ("engine", "compiled", "libtorch", "pytorch", "torchscript")
# Where the subject is the runner, not a backend: our two, whose processes start at once (libtorch
# takes 0.9 s of CPU to start, Python and torch 1.2 s; make test started each about a hundred times)
CPP = ["--backends", "engine,compiled"]
TORCH_PAIR = ["--backends", "engine,libtorch"]  # where a torch backend is the subject
SOURCE = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(SOURCE, "plots"))
sys.path.insert(0, os.path.join(SOURCE, "plots", "tests"))
import matplotlib.pyplot as plt  # noqa: E402
import plot  # noqa: E402
from test_plots import assert_readable  # noqa: E402


def run(bin_dir, tmp_path, *args, env=None):
    full_env = dict(os.environ, **(env or {}))
    return subprocess.run([os.path.join(bin_dir, "bench_run"), "--out", str(tmp_path), *args],
                          capture_output=True, text=True, env=full_env, timeout=600)


def load(path):
    with open(path) as f:
        return json.load(f)


def bench_rows(tmp_path):
    return {(p["backend"], p["benchmark"].split("/")[1]): p
            for p in load(tmp_path / "latest" / "processes.json")["processes"]
            if p["phase"] == "bench"}


def cells(tmp_path):
    """{(backend, instance): summary cell}"""
    return {(b, row["instance"]): c for row in load(tmp_path / "latest" / "summary.json")["rows"]
            for b, c in row["backends"].items()}


# A fresh real run of the default backends: every file docs/results.md promises, and its plots.
def test_short_run_writes_everything_and_draws_it(bin_dir, tmp_path):
    r = run(bin_dir, tmp_path, "--workloads", "tiny_graph,scalar_chain,mini_gpt,mlp_width",
            "--sizes", "nodes=10,100", "--sizes", "batch=1", "--sizes", "width=16,32",
            "--repetitions", "2", "--min-time", "0.01", "--warmup-steps", "2", "--rounds", "1")
    assert r.returncode == 0, r.stdout + r.stderr
    latest = tmp_path / "latest"
    assert latest.is_symlink()
    processes = load(latest / "processes.json")["processes"]
    bench = [p for p in processes if p["phase"] == "bench"]
    # 6 instances on the 5 main backends, each in its own process
    assert sorted(p["benchmark"] for p in bench) == sorted(
        f"{w}/{b}/{k}threads:1" for b in MAIN
        for w, k in [("grad/tiny_graph", ""), ("grad/scalar_chain", "nodes:10/"),
                     ("grad/scalar_chain", "nodes:100/"), ("step/mini_gpt", "batch:1/"),
                     ("step/mlp_width", "width:16/"), ("step/mlp_width", "width:32/")])
    summary = load(latest / "summary.json")
    assert summary["reference"] == "engine" and summary["backends"] == list(MAIN)
    assert summary["study"] == "main"
    by_cell = cells(tmp_path)
    for p in bench:
        assert p["status"] == "ok", p
        assert p["max_rss_bytes"] > 1_000_000
        result = load(latest / p["file"])
        ctx = result["context"]
        for key in ("cpu_vendor", "cpu_family", "cpu_model_number", "cpu_stepping", "cpu_flags",
                    "cpu_affinity", "cpus_online", "kernel", "memory_total_bytes"):
            assert ctx.get(key) not in (None, "", "unknown"), (key, p["backend"])
        assert ctx["cpu_family"] == summary["machine"]["environment"]["cpu_family"]
        for key in ("backend", "backend_version", "threads", "compiler", "cxx_flags", "cpu_model",
                    "git_sha", "date", "host_name", "num_cpus"):
            assert ctx.get(key), (key, ctx)
        assert ctx["warmup_steps"] == "2", "every backend times its steady state alike"
        assert ctx["backend"] == p["backend"] and ctx["threads"] == "1"
        if not p["backend"].startswith(("engine", "compiled")):
            assert "openblas" in ctx["blas"], "torch must run on OpenBLAS, not the reference BLAS"
            assert ctx["blas_threads"] == "1" and ctx["intra_op_threads"] == "1"
            assert ctx["omp_wait_policy"] == "PASSIVE", "OpenMP must not spin on BLAS's cores"
        medians = [b for b in result["benchmarks"] if b.get("aggregate_name") == "median"]
        assert len(medians) == 1 and medians[0]["name"] == p["benchmark"] + "_median"
        repetitions = [b["real_time"] for b in result["benchmarks"] if b["run_type"] == "iteration"]
        assert len(repetitions) == 2
        assert medians[0]["real_time"] == pytest.approx(statistics.median(repetitions), rel=1e-9)
        instance = "/".join(p["benchmark"].split("/")[:2] + p["benchmark"].split("/")[3:-1])
        cell = by_cell[(p["backend"], instance)]
        assert cell["median_seconds"] == pytest.approx(medians[0]["real_time"] * 1e-6, rel=1e-9)
        # the process's peak: wait4's, or a repetition's own high-water mark if larger (each
        # repetition resets the mark, and the kernel's ru_maxrss with it)
        peaks = [b["peak_rss_bytes"] for b in result["benchmarks"] if b["run_type"] == "iteration"]
        assert cell["max_rss_bytes"] == max([p["max_rss_bytes"]] + peaks)
        assert cell["file"] == p["file"]
        if "scalar_chain" in instance:
            assert medians[0]["items_per_second"] > 0  # nodes per second
        # every process's log starts with its command line, so it can be run again by hand
        with open(latest / p["log"]) as f:
            command = shlex.split(f.readline()[2:])
        assert command[0].endswith(("bench_engine", "bench_compiled", "bench_libtorch",
                                    "pytorch_bench.py"))
        assert any(a.startswith("--instance=workload=") for a in command)
    for (b, instance), cell in by_cell.items():  # the repetitions took turns: ratios of pairs
        ref = by_cell[("engine", instance)]["repetition_seconds"]
        pairs = [x / y for x, y in zip(cell["repetition_seconds"], ref)]
        assert cell["ratio_paired"] and len(pairs) == 2
        assert cell["ratio_to_reference"] == pytest.approx(statistics.median(pairs), rel=1e-9)
    check = load(latest / "check.json")
    assert {c["status"] for c in check["results"]} == {"ok"}
    # summary.csv: a line per benchmark, the same numbers, read by Python's csv module
    with open(latest / "summary.csv", newline="") as f:
        table = list(csv.DictReader(f))
    assert len(table) == len(by_cell)
    for line in table:
        cell = by_cell[(line["backend"], line["instance"])]
        assert line["status"] == cell["status"] and line["precision"] == "fp32"
        assert float(line["median_seconds"]) == cell["median_seconds"]
        assert float(line["ratio_to_reference"]) == cell["ratio_to_reference"]
        assert int(line["repetitions"]) == len(cell["repetition_seconds"])
    text = (latest / "summary.txt").read_text()
    assert "grad/scalar_chain/nodes:100" in text and "crossovers" in text
    assert "its time over engine's" in text
    assert max(len(line) for line in text.splitlines()
               if not line.startswith("results: ")) <= 120, "the summary fits 120 columns"
    assert len(by_cell[("torchscript", "step/mini_gpt/batch:1")]["check_losses"]) == 50
    # the runner drew every figure this run has data for, each one readable: no text over
    # another or over the data, a handful of series a panel
    drawn = sorted(os.listdir(latest / "plots"))
    assert drawn == sorted(["speedup.png", "time.png", "memory.png", "model_sizes.png",
                            "scalar_chain.png", "loss_curves.png"]), drawn
    assert summary["kernels"] is None, "the kernel rows are the study kernels'"
    for name in drawn:
        with open(latest / "plots" / name, "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    for fig in plot.figures(plot.load_run(str(latest))).values():
        assert_readable(fig)


def test_check_only_agrees_and_says_how_closely(bin_dir, tmp_path):
    r = run(bin_dir, tmp_path, "--check-only", "--workloads", "small_graph,mlp_width",
            "--sizes", "width=16")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "closest to its tolerance:" in r.stdout and "NOT OK" not in r.stdout
    assert "check libtorch    2 instances agree" in r.stdout


# One judge: the same verdicts and the same reference whatever the order of --backends, and
# whether the checks run one after another or two at once (--jobs 2, which shares the memory
# limit between the two).
def test_order_of_backends_changes_nothing(bin_dir, tmp_path):
    outcomes = []
    for order, jobs in (("pytorch,libtorch,engine", "1"), ("engine,libtorch,pytorch", "2")):
        out = tmp_path / order.replace(",", "-")
        r = run(bin_dir, out, "--check-only", "--workloads", "tiny_graph,mlp_width", "--sizes",
                "width=16", "--backends", order, "--jobs", jobs, "--memory-limit", "8G",
                env={"BACKPROP_BENCH_FAULT": "wrong:libtorch"})
        assert r.returncode == 1, r.stdout + r.stderr
        run_dir = next(p for p in out.iterdir() if p.is_dir())
        outcomes.append(load(run_dir / "check.json")["results"])
        processes = load(run_dir / "processes.json")
        assert sorted(p["backend"] for p in processes["processes"]) == sorted(order.split(","))
        assert all(p["status"] == "ok" for p in processes["processes"]), processes
        assert processes["options"]["memory_limit_bytes"] == (8 << 30) // int(jobs)
    assert outcomes[0] == outcomes[1]
    r = run(bin_dir, tmp_path / "timed", "--jobs", "2", "--workloads", "tiny_graph")
    assert r.returncode == 2 and r.stderr.startswith(
        "error: --jobs 2: only with --check-only (benchmarks run one at a time)"), r.stderr
    refs = {(c["instance"], c["backend"]): c for c in outcomes[0]}
    assert refs[("grad/tiny_graph", "engine")]["is_reference"]
    assert refs[("step/mlp_width/width:16", "libtorch")]["status"] == "wrong"
    assert refs[("step/mlp_width/width:16", "pytorch")]["reference"] == "engine"


@pytest.mark.parametrize("args, message", [
    (["--backends", "engine,tensorflow"], "unknown backend 'tensorflow'; valid: engine, engine_revolve, engine_multistage, engine_2t"),
    (["--workloads", "resnet"], "unknown workload 'resnet'; valid: empty, tiny_graph"),
    (["--sizes", "nodes=abc"], "--sizes nodes=abc: 'abc' is not a whole number"),
    (["--sizes", "nodes=0"], "nodes=0 is out of range for scalar_chain (1 to 10000000)"),
    (["--sizes", "depth=8"], "no workload is sized by 'depth'; size keys: nodes, hidden, batch, width"),
    (["--sizes", "batch=0"], "batch=0 is out of range for mini_gpt (1 to 4096)"),
    (["--sizes", "batch=2048", "--workloads", "tiny_graph"], ""),  # valid: mini_gpt accepts 2048
    (["--filter", "no_such_thing"], "--filter 'no_such_thing' matches no benchmark"),
    (["--filter", "tiny(("], "is not a valid regular expression"),
    (["--filter", r"nodes:\d+"], r"--filter 'nodes:\d+': \d is not POSIX extended regex"),
    (["--filter", "grad/x/y"], "--filter 'grad/x/y' matches no benchmark; names look like"),
    (["--filter", r"tiny_graph/engine|small\.graph"], ""),  # escaped specials are POSIX
    (["--repetitions", "0"], "--repetitions 0: expected a whole number from 1 to 1000"),
    (["--repetitions", "1.9"], "--repetitions 1.9: expected a whole number from 1 to 1000"),
    (["--repetitions", "2", "--rounds", "3"], "--rounds 3: at most --repetitions (2)"),
    (["--jobs", "0"], "--jobs 0: expected a whole number from 1 to 16"),
    (["--threads", "2x"], "--threads 2x: expected a whole number from 1 to 256"),
    (["--precision", "fp16"], "--precision fp16: valid: fp32 (the default), bf16 (bfloat16 "
                              "products, float32 accumulation, master weights and optimizer); fp16 "
                              "is not supported"),
    (["--precision", "half"], "--precision half: valid: fp32 (the default), bf16"),
    (["--isa", "avx9"], "--isa avx9: no such level; valid: avx2, avx512, native"),
    (["--sizes", "=10"], "--sizes =10: expected KEY=N,N,..."),
    (["--data", "/"], "--data=/: not a regular file (a directory)"),
    (["--cache-dir", "/etc/hostname"], "--cache-dir /etc/hostname: not a directory"),
    (["--frobnicate"], "unknown option '--frobnicate'"),
    (["--background", "0"], "--background 0: expected N or N,NICE: N busy processes from 1 to 64, "
                            "NICE from 0 to 19"),
    (["--background", "1,20"], "--background 1,20: expected N or N,NICE"),
    (["--background=1,-5"], "--background 1,-5: expected N or N,NICE"),
    (["--background", "65"], "--background 65: expected N or N,NICE"),
    (["--out", "/dev/null"], "--out /dev/null: cannot create it"),
    (["--out", "/dev/null/results"], "--out /dev/null/results: cannot create it"),
])
def test_bad_input_is_one_clear_line_and_exit_2(bin_dir, tmp_path, args, message):
    r = run(bin_dir, tmp_path, *args, "--check-only")
    if not message:
        assert r.returncode == 0, r.stdout + r.stderr
        return
    assert r.returncode == 2, r.stdout + r.stderr
    assert message in r.stderr
    assert r.stderr.startswith("error: ")
    assert not tmp_path.joinpath("latest").exists(), "nothing runs on bad input"
    assert not run_dirs(tmp_path), "and no run folder is left behind"


# The bound row is not judged against the backends (its numbers are no answer) but it is run,
# and a bound whose check crashes is failed like any row, never "unverified".
def test_the_bound_is_not_judged_but_its_failure_is(bin_dir, tmp_path):
    for fault, status in (("", "unverified"), ("check-crash:adamw", "failed")):
        out = tmp_path / (status or "ok")
        r = run(bin_dir, out, "--check-only", "--workloads", "adamw", "--sizes", "params=100000",
                "--backends", "engine,libtorch,bound",
                env={"BACKPROP_BENCH_FAULT": fault} if fault else None)
        assert r.returncode == (1 if fault else 0), r.stdout + r.stderr
        run_dir = next(p for p in out.iterdir() if p.is_dir() and p.name != "latest")
        verdicts = {v["backend"]: v for v in load(run_dir / "check.json")["results"]}
        assert verdicts["bound"]["status"] == status, verdicts["bound"]
        if not fault:
            assert verdicts["bound"]["message"].startswith("a bound, not a backend")
            assert verdicts["libtorch"]["status"] == "ok" and "bound" not in str(verdicts["libtorch"])


# --cache-dir: the compiled benchmarks keep their plans there; the check's process compiles and
# stores, the benchmark's builds from the plan (and says so), and nothing else uses the cache.
def test_cache_dir_keeps_the_compiled_plans(bin_dir, tmp_path):
    cache = tmp_path / "plans"
    r = run(bin_dir, tmp_path / "out", "--workloads", "mlp_width", "--sizes", "width=16",
            "--backends", "engine,compiled", "--repetitions", "1", "--no-plots",
            "--cache-dir", str(cache))
    assert r.returncode == 0, r.stdout + r.stderr
    assert len(list(cache.glob("*.plan"))) == 1, list(cache.iterdir())
    run_dir = next(p for p in (tmp_path / "out").iterdir() if p.is_dir() and p.name != "latest")
    result = load(next((run_dir / "compiled").glob("*.json")))
    assert result["context"]["plan_cache"] == str(cache)
    assert result["benchmarks"][0]["plan_cache_hit"] == 1
    assert not (run_dir / "plans").exists()


# More threads than this machine has CPUs run (they were refused), and each backend's results
# say so beside the threads and the CPUs.
def test_more_threads_than_cpus_run_and_say_oversubscribed(bin_dir, tmp_path):
    threads = len(os.sched_getaffinity(0)) + 1
    r = run(bin_dir, tmp_path, "--threads", str(threads), "--workloads", "tiny_graph,char_mlp",
            "--sizes", "hidden=64", "--backends", "engine,compiled,libtorch", "--check-only")
    assert r.returncode == 0, r.stdout + r.stderr
    (folder,) = run_dirs(tmp_path)
    for backend in ("engine", "compiled", "libtorch"):
        context = load(folder / "check" / f"{backend}.json")["context"]
        assert context["threads"] == str(threads), (backend, context)
        assert context["oversubscribed"] == "yes", (backend, context)
    # the compiled mode's kernel verdicts are kept per thread count (the driver names the file)
    assert (folder / f"dialect_verdicts.threads-{threads}.txt").exists()
    assert not (folder / "dialect_verdicts.txt").exists()
    cpus = len(os.sched_getaffinity(0))
    assert f"warning: --threads {threads} on {cpus} CPUs: every backend is oversubscribed" \
        in r.stderr, r.stderr
    timed = tmp_path / "timed"
    r = run(bin_dir, timed, "--threads", str(threads), "--workloads", "tiny_graph", "--backends",
            "engine", *QUICK)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"(oversubscribed: {threads} threads on {cpus} CPUs)" in \
        (timed / "latest" / "summary.txt").read_text().replace("\n  ", " ")


# Every option --help lists is one the parser takes (--warmup-steps once was listed, not parsed).
def test_every_documented_option_is_accepted(bin_dir, tmp_path):
    usage = subprocess.run([os.path.join(bin_dir, "bench_run"), "--help"], capture_output=True,
                           text=True).stdout
    options = [line.split()[0:2] for line in usage.splitlines() if line.startswith("  --")]
    listed = subprocess.run([os.path.join(bin_dir, "bench_run"), "--list"], capture_output=True,
                            text=True).stdout
    studies = [line.split()[1] for line in listed.splitlines() if line.startswith("study ")]
    assert {"main", "bptt", "optim", "gradbench", "gradbench_tensor", "all"} <= set(studies)
    for study in studies:
        assert re.search(rf"\b{study}\b", usage), f"--help leaves out the study {study}"
    assert max(len(line) for line in usage.splitlines()) <= 100
    assert len(options) >= 14, usage
    for option in options:
        args = [option[0]] + (["1"] if len(option) > 1 and option[1].isupper() else [])
        # the option under test, then a selection small enough to run in a blink
        r = run(bin_dir, tmp_path, *args, "--check-only", "--workloads", "empty", "--backends",
                "engine", "--out", str(tmp_path))
        assert "unknown option" not in r.stderr, (option, r.stderr)


def test_bad_data_file_is_a_clear_error(bin_dir, tmp_path):
    empty, short = tmp_path / "empty.txt", tmp_path / "short.txt"
    empty.write_text("")
    short.write_text("hello")
    for data, message in [(tmp_path / "missing.txt", "missing.txt: cannot open it"),
                          (empty, "empty.txt: the file is empty"),
                          (short, "has 5 bytes; the selected workloads need at least 257")]:
        r = run(bin_dir, tmp_path, "--data", str(data), *QUICK)
        assert r.returncode == 2, r.stdout + r.stderr
        assert message in r.stderr and r.stderr.startswith("error: ")
    # no model that reads the corpus selected: the file is not read
    r = run(bin_dir, tmp_path, "--data", str(short) + "-and-more", "--workloads",
            "tiny_graph,mlp_width", "--sizes", "width=16", "--check-only",
            "--backends", "engine,pytorch")
    assert r.returncode == 0, r.stdout + r.stderr
    # a file too short for mini_gpt_wide (context 64) still serves mini_gpt (context 8)
    short.write_text("a short corpus of text")
    r = run(bin_dir, tmp_path, "--data", str(short), "--workloads", "mini_gpt", "--sizes",
            "batch=1", "--check-only", "--backends", "engine,pytorch")
    assert r.returncode == 0, r.stdout + r.stderr


# The default lengths of the recurrent workloads go to 10^5 on our engine's strategies and to
# 10^4 on the torch backends: beyond, each is reported skipped with the flag that runs it, and
# no process is started for it; lengths given with --sizes run everywhere.
def test_default_lengths_beyond_a_backends_sweep_are_skipped_with_why(bin_dir, tmp_path):
    r = run(bin_dir, tmp_path, "--check-only", "--study", "bptt", "--workloads", "char_rnn",
            "--filter", "length:100000/", "--backends", "libtorch,pytorch_checkpoint")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "check libtorch    1 instances not run" in r.stdout, r.stdout
    [folder] = run_dirs(tmp_path)
    results = load(folder / "check.json")["results"]
    assert [(x["backend"], x["status"]) for x in results] == [
        ("libtorch", "skipped"), ("pytorch_checkpoint", "skipped")]
    assert results[1]["message"] == (
        "not in the default sweep, which runs pytorch_checkpoint up to length=10000; "
        "--sizes length=...,100000 runs it")
    assert not (folder / "check" / "libtorch.json").exists()
    r = run(bin_dir, tmp_path / "given", "--check-only", "--workloads", "char_rnn", "--sizes",
            "length=10001", "--backends", "libtorch")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "check libtorch    0 instances agree; 1 unverified" in r.stdout, r.stdout


# A benchmark whose steps are too long for --time-budget gets fewer repetitions (at least 3),
# two warm-up steps and one round, on one setup (--warm_once), and the progress line and
# processes.json say so; the others keep the run's repetitions, warm-up and rounds.
def test_long_steps_get_fewer_repetitions_within_the_time_budget(bin_dir, tmp_path):
    # mini_gpt_wide at batch 32: tens of ms a step, 10 steps; tiny_graph: 4 x 1 ms, and its steps
    r = run(bin_dir, tmp_path, "--workloads", "tiny_graph,mini_gpt_wide", "--sizes", "batch=32",
            "--backends", "engine", "--repetitions", "4", "--warmup-steps", "3",
            "--min-time", "0.001", "--time-budget", "0.05", "--no-plots")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "(1 with steps too long for it: fewer, in one round, to take about 0.05 s each)" \
        in re.sub(r"\n +", " ", r.stdout), r.stdout  # lines wrapped at 120 columns, joined
    assert "(3 repetitions: " in r.stdout and "a step in its check)" in r.stdout
    bench = {(p["benchmark"].split("/")[1], p["round"]): p
             for p in load(tmp_path / "latest" / "processes.json")["processes"]
             if p["phase"] == "bench"}
    assert sorted(bench) == [("mini_gpt_wide", 1), ("tiny_graph", 1), ("tiny_graph", 2)]
    long = bench[("mini_gpt_wide", 1)]
    assert (long["repetitions"], long["warmup_steps"], long["warm_once"]) == (3, 2, True)
    # a step of at least --min-time: one setup and warm-up for all its repetitions
    assert "--warm_once" in (tmp_path / "latest" / long["log"]).read_text().splitlines()[0]
    assert [(bench[("tiny_graph", k)]["repetitions"], bench[("tiny_graph", k)]["warmup_steps"])
            for k in (1, 2)] == [(2, 3), (2, 3)]
    c = cells(tmp_path)
    assert len(c[("engine", "step/mini_gpt_wide/batch:32")]["repetition_seconds"]) == 3
    assert len(c[("engine", "grad/tiny_graph")]["repetition_seconds"]) == 4


# No user string reaches a shell: an --out full of quotes and semicolons is a folder name, and
# the plots (drawn by a child process) are drawn into it.
def test_a_hostile_out_folder_is_only_a_name(bin_dir, tmp_path):
    pwned = tmp_path / "pwned"
    out = tmp_path / f"x'; touch {pwned}; echo '"
    r = subprocess.run([os.path.join(bin_dir, "bench_run"), "--out", str(out), "--workloads",
                        "tiny_graph", "--backends", "engine", "--repetitions", "1",
                        "--min-time", "0.01"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert not pwned.exists()
    assert (out / "latest" / "plots" / "time.png").exists()


def run_dirs(out):
    return sorted(d for d in out.iterdir() if d.is_dir() and not d.is_symlink())


def verdicts(run_dir):
    return {(c["instance"], c["backend"]): c for c in load(run_dir / "check.json")["results"]}


# The engine's check crashes: libtorch, compared with nothing, is benchmarked but marked
# unverified where no answer of the workload's own confirms it.
def test_compared_with_nothing_is_unverified(bin_dir, tmp_path):
    r = run(bin_dir, tmp_path, "--workloads", "scalar_chain,mlp_width", "--sizes", "nodes=10",
            "--sizes", "width=16", *QUICK, *CPP, env={"BACKPROP_BENCH_FAULT": "check-crash:engine"})
    assert r.returncode == 3, r.stdout + r.stderr
    v = verdicts(tmp_path / "latest")
    assert v[("step/mlp_width/width:16", "compiled")]["status"] == "unverified"
    assert v[("grad/scalar_chain/nodes:10", "compiled")]["status"] == "ok"
    assert v[("grad/scalar_chain/nodes:10", "compiled")]["confirmed_by"] == "finite differences"
    c = cells(tmp_path)
    assert c[("compiled", "step/mlp_width/width:16")]["status"] == "ok"
    assert c[("compiled", "step/mlp_width/width:16")]["verified"] is False
    assert c[("compiled", "grad/scalar_chain/nodes:10")]["verified"] is True
    text = (tmp_path / "latest" / "summary.txt").read_text()
    assert "?" in text and "? unverified:" in text
    assert "1 unverified" in r.stdout


# Two runs into one --out in the same second: two folders, each complete, `latest` on one of
# them, and each other's presence recorded as a warning.
def test_concurrent_runs_keep_apart_and_say_so(bin_dir, tmp_path):
    args = [os.path.join(bin_dir, "bench_run"), "--out", str(tmp_path), "--workloads",
            "tiny_graph,small_graph", *QUICK, *CPP]
    procs = [subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    outputs = [p.communicate(timeout=600) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outputs
    runs = run_dirs(tmp_path)
    assert len(runs) == 2
    for d in runs:
        assert len([p for p in load(d / "processes.json")["processes"]
                    if p["phase"] == "bench"]) == 4
        assert not (d / "INCOMPLETE").exists()
    assert (tmp_path / "latest").resolve() == runs[-1]
    machines = [load(d / "summary.json")["machine"] for d in runs]
    assert all(m["load_average_start"] >= 0 and m["load_average_end"] >= 0 for m in machines)
    assert any(m["other_benchmarks"] for m in machines), machines
    assert any("another benchmark is running on this machine" in err for _, err in outputs)
    # once per other run, however many processes it starts (under ctest -j2 another test's runs
    # may be running too, each said once as well): the sibling's run once, never its backends too
    for (_, err), sibling in zip(outputs, reversed(procs)):
        said = [line for line in err.splitlines() if "another benchmark is running" in line]
        assert len(said) == len(set(said)), err
        about_sibling = [line for line in said if f"({sibling.pid} bench_run)" in line
                         or f"of the run of process {sibling.pid})" in line]
        assert len(about_sibling) <= 1, err


# A wrapper that names bench_run in its arguments (`time`, `timeout`: make bench under them) is
# the run itself, not another benchmark.
# (Other tests' runs may be going on beside this one under make test: only the wrapper's own pid
# must not be named.)
def test_a_wrapper_is_not_another_benchmark(bin_dir, tmp_path):
    wrapper = subprocess.Popen(["/usr/bin/timeout", "300", os.path.join(bin_dir, "bench_run"),
                                "--out", str(tmp_path), "--workloads", "empty", "--check-only",
                                *CPP], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = wrapper.communicate(timeout=600)
    assert wrapper.returncode == 0, out + err
    assert f"running on this machine ({wrapper.pid} " not in err, err


# The backends of a row take turns, one repetition each (harness/common/protocol.h), in each of the two
# default rounds: the turns recorded in processes.json go engine, libtorch, engine, libtorch...
# within a round, and round 2 of a row comes after round 1 of every row. Each benchmark's rounds
# are merged into one Google Benchmark file with every repetition, and every ratio comes from the
# pairs.
def test_backends_take_turns_in_rounds_and_ratios_are_paired(bin_dir, tmp_path):
    r = run(bin_dir, tmp_path, "--workloads", "tiny_graph,mlp_width", "--sizes", "width=16",
            "--repetitions", "4", "--min-time", "0.01", "--no-plots", *CPP)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "(round 2 of 2)" in r.stdout
    latest = tmp_path / "latest"
    turns, starts = {}, {}
    for p in load(latest / "processes.json")["processes"]:
        if p["phase"] != "bench":
            continue
        assert len(p["turns"]) == 2, p  # 4 repetitions in 2 rounds; the search in the first turn
        assert p["file"].endswith(f".round{p['round']}.json")
        turns.setdefault((p["benchmark"].split("/")[1], p["round"]), []).extend(
            (t, p["backend"]) for t in p["turns"])
        starts.setdefault(p["round"], []).append(p["benchmark"])
    assert sorted(turns) == [(w, k) for w in ("mlp_width", "tiny_graph") for k in (1, 2)]
    for key, events in turns.items():
        assert [b for _, b in sorted(events)] == ["engine", "compiled"] * 2, key
    assert sorted(starts[1]) == sorted(starts[2]) and len(starts[1]) == 4
    for (backend, instance), c in cells(tmp_path).items():
        assert len(c["repetition_seconds"]) == 4
        merged = load(latest / c["file"])
        assert merged["context"]["rounds"] == "2"
        times = [b["real_time"] for b in merged["benchmarks"] if b["run_type"] == "iteration"]
        assert [b["repetition_index"] for b in merged["benchmarks"]
                if b["run_type"] == "iteration"] == [0, 1, 2, 3]
        [median] = [b for b in merged["benchmarks"] if b.get("aggregate_name") == "median"]
        assert median["real_time"] == pytest.approx(statistics.median(times), rel=1e-12)
        rounds = [load(latest / c["file"].replace(".json", f".round{k}.json")) for k in (1, 2)]
        assert times == [b["real_time"] for f in rounds for b in f["benchmarks"]
                         if b["run_type"] == "iteration"]
        if backend == "compiled":
            lo, hi = c["ratio_interval"]
            assert c["ratio_paired"] and lo <= c["ratio_to_reference"] <= hi, c


def test_python_driver_refuses_bad_protocol_flags(bin_dir):
    driver = os.path.join(SOURCE, "baselines", "pytorch", "pytorch_bench.py")
    for flag, message in [("--instance=workload=resnet", "unknown workload 'resnet'"),
                          ("--instance=workload=tiny_graph,size=x", "size 'x' is not a whole number"),
                          ("--instance=colour=red", "'colour=red' is not one of"),
                          ("--frobnicate", "unrecognized or invalid argument '--frobnicate'"),
                          ("--precision=fp8", "--precision=fp8: valid: fp32 (the default), bf16")]:
        r = subprocess.run(["/usr/bin/python3", driver, flag], capture_output=True, text=True,
                           timeout=120)
        assert r.returncode == 2 and r.stderr.startswith("error: ") and message in r.stderr, r.stderr
    for binary in ("bench_engine", "bench_compiled", "bench_libtorch", "bench_adolc"):
        r = subprocess.run([os.path.join(bin_dir, binary), "--precision=fp16"],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 2 and r.stderr.startswith("error: --precision=fp16: valid: fp32") \
            and "fp16 is not supported" in r.stderr and len(r.stderr.splitlines()) == 1, r.stderr


# --precision bf16: every backend under mixed precision, the scalar graphs skipped saying why,
# the model rows checked against one another at the bf16 tolerance.
def test_precision_bf16_runs_the_models_and_skips_the_scalar_graphs(bin_dir, tmp_path):
    r = run(bin_dir, tmp_path, "--precision", "bf16", "--workloads", "tiny_graph,mlp_width",
            "--sizes", "width=16", *TORCH_PAIR, "--check-only")
    assert r.returncode == 0, r.stdout + r.stderr
    run_dir = next(p for p in tmp_path.iterdir() if p.is_dir() and p.name != "latest")
    checks = {(c["backend"], c["instance"]): c for c in load(run_dir / "check.json")["results"]}
    for backend in ("engine", "libtorch"):
        tiny = checks[(backend, "grad/tiny_graph")]
        assert tiny["status"] == "skipped" and "a scalar graph is computed in double" in \
            tiny["message"], tiny
        model = checks[(backend, "step/mlp_width/width:16")]
        assert model["status"] == "ok", model
    assert checks[("libtorch", "step/mlp_width/width:16")]["tolerance"] == 8 / 256
    # the float32 twin of the reference (engine without --precision=bf16): in check.json, the
    # bf16 rows held to it, no column of its own
    twin = checks[("float32_reference", "step/mlp_width/width:16")]
    assert twin["status"] == "unverified" and twin["is_reference"], twin
    assert checks[("engine", "step/mlp_width/width:16")]["reference"] == "float32_reference"
    command = (run_dir / "logs" / "float32_reference.check.log").read_text().splitlines()[0]
    assert "bench_engine" in command and "--precision=bf16" not in command, command


def cpu_flags():
    with open("/proc/cpuinfo") as f:
        return next(line for line in f if line.startswith("flags")).split(":", 1)[1].split()


# --isa: every backend capped through its own variable, the cap and what each library ran at in
# every result; torch's bf16 products then take the path of an AVX2 processor (ATen's own kernels,
# summing in bfloat16: the records say so, and the judge holds them at that tolerance).
def test_isa_caps_every_backend_and_says_so(bin_dir, tmp_path):
    r = run(bin_dir, tmp_path, "--isa", "avx2", "--precision", "bf16", "--workloads", "mlp_width",
            "--sizes", "width=16", "--backends", "engine,libtorch,pytorch", "--check-only")
    assert r.returncode == 0, r.stdout + r.stderr
    run_dir = next(p for p in tmp_path.iterdir() if p.is_dir() and p.name != "latest")
    assert load(run_dir / "processes.json")["options"]["isa"] == "avx2"
    for backend in ("engine", "libtorch", "pytorch"):
        check = load(run_dir / "check" / f"{backend}.json")
        context = check["context"]
        assert context["isa_cap"].startswith("BP_ISA=avx2 ATEN_CPU_CAPABILITY=avx2 "
                                             "DNNL_MAX_CPU_ISA=AVX2"), context
        assert context["isa"].startswith("avx2"), context
        sums = check["records"][0].get("bf16_sums")
        assert sums == (None if backend == "engine" else "bfloat16"), (backend, sums)


# Ranks on other hosts (--hostfile) get mpirun's environment only as -x exports it: the caps and
# the commit go with them, and the results say so.
def test_isa_caps_reach_the_ranks_of_a_hostfile(bin_dir, tmp_path):
    hosts = tmp_path / "hosts"
    hosts.write_text("localhost slots=4\n")
    r = run(bin_dir, tmp_path / "out", "--study", "ranks", "--hostfile", str(hosts), "--isa",
            "avx2", "--workloads", "mini_gpt", "--sizes", "batch=8", "--backends", "engine_ranks",
            "--check-only")
    assert r.returncode == 0, r.stdout + r.stderr
    run_dir = next(p for p in (tmp_path / "out").iterdir() if p.is_dir() and p.name != "latest")
    command = (run_dir / "logs" / "engine_ranks.check.log").read_text().splitlines()[0]
    assert "-x BP_ISA=avx2 -x ATEN_CPU_CAPABILITY=avx2 -x DNNL_MAX_CPU_ISA=AVX2" in command, command
    context = load(run_dir / "check" / "engine_ranks.json")["context"]
    assert context["isa_cap"].startswith("BP_ISA=avx2"), context
    assert f"-x BACKPROP_BENCH_GIT_SHA={context['git_sha']}" in command, command


# A row in float32 only (the sharded optimizer) under --precision bf16: reported skipped with why,
# the row beside it run; the run is kept, not refused.
def test_a_float32_only_row_under_bf16_is_skipped_with_why(bin_dir, tmp_path):
    r = run(bin_dir, tmp_path, "--study", "ranks", "--precision", "bf16", "--workloads",
            "mini_gpt", "--sizes", "batch=8", "--backends", "compiled_ranks,compiled_zero",
            "--check-only")
    assert r.returncode == 0, r.stdout + r.stderr
    run_dir = next(p for p in tmp_path.iterdir() if p.is_dir() and p.name != "latest")
    results = {x["backend"]: x for x in load(run_dir / "check.json")["results"]}
    assert results["compiled_zero"]["status"] == "skipped", results
    assert "float32 only: the sharded optimizer" in results["compiled_zero"]["message"], results
    assert results["compiled_ranks"]["status"] in ("ok", "unverified"), results


# Ranks x threads beyond the CPUs: said before the run, and every rank's result says
# oversubscribed (each rank runs the threads).
def test_ranks_times_threads_beyond_the_cpus_is_oversubscribed(bin_dir, tmp_path):
    one_cpu = min(os.sched_getaffinity(0))
    r = subprocess.run(["taskset", "-c", str(one_cpu), os.path.join(bin_dir, "bench_run"),
                        "--out", str(tmp_path), "--study", "ranks", "--ranks", "2", "--workloads",
                        "mini_gpt", "--sizes", "batch=8", "--backends", "engine_ranks",
                        "--memory-limit", "6G", "--check-only"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "warning: --ranks 2 x --threads 1 on 1 CPU: the data-parallel rows are " \
           "oversubscribed" in r.stderr, r.stderr
    run_dir = next(p for p in tmp_path.iterdir() if p.is_dir() and p.name != "latest")
    context = load(run_dir / "check" / "engine_ranks.json")["context"]
    assert context["oversubscribed"] == "yes"
    assert context["address_space_limit"] == str(3 << 30), "the two ranks share --memory-limit"


# A level the processor lacks: one line naming what it lacks, exit 2; the study's rows at that
# level are reported skipped, saying so.
def test_isa_above_the_processor_is_refused(bin_dir, tmp_path):
    lacking = next((level for level, needs in (("avx512", "avx512f"), ("avx2", "avx2"))
                    if needs not in cpu_flags()), None)
    if lacking is None:
        pytest.skip("this processor has every level --isa names")
    r = run(bin_dir, tmp_path, "--isa", lacking, "--workloads", "empty", "--check-only")
    assert r.returncode == 2 and f"--isa {lacking}: this processor" in r.stderr, r.stderr
    r = run(bin_dir, tmp_path, "--study", "isa", "--workloads", "mlp_width", "--sizes",
            "width=16", "--backends", f"engine_{lacking}", "--check-only")
    run_dir = next(p for p in tmp_path.iterdir() if p.is_dir() and p.name != "latest")
    result = load(run_dir / "check.json")["results"][0]
    assert result["status"] == "skipped" and "this processor lacks" in result["message"], result


# Run by hand, a backend binary registers every workload and takes Google Benchmark's flags.
def test_backend_binary_runs_on_its_own(bin_dir, tmp_path):
    engine = os.path.join(bin_dir, "bench_engine")
    r = subprocess.run([engine, "--benchmark_filter=small_graph", "--benchmark_min_time=0.01"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "grad/small_graph/engine/threads:1" in r.stdout, r.stdout + r.stderr
    r = subprocess.run([engine, "--benchmark_list_tests=true"], capture_output=True, text=True)
    assert "grad/scalar_chain/engine/nodes:100000/threads:1" in r.stdout.split()
    out = tmp_path / "check.json"
    r = subprocess.run([engine, "--instance=workload=scalar_chain,size=5000",
                        f"--check_out={out}"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    record = load(out)["records"][0]
    assert record["name"] == "grad/scalar_chain/engine/nodes:5000/threads:1"
    assert len(record["step"]["grads"]) == 3
    r = subprocess.run([engine, "--instance=workload=scalar_chain,size=0"], capture_output=True,
                       text=True)
    assert r.returncode == 2
    assert r.stderr == "error: nodes=0 is out of range for scalar_chain (1 to 10000000)\n"


# The compiled mode's own flags: a bad one is one line and exit 2, before anything runs; a
# forced dialect shows in every result's label.
def test_compiled_flags_are_checked_and_the_kernels_reported(bin_dir):
    compiled = os.path.join(bin_dir, "bench_compiled")
    engine = os.path.join(bin_dir, "bench_engine")
    for binary, flag, message in [
            (compiled, "--dialect=matmul:mkl", "error: --dialect=matmul:mkl: 'matmul:mkl': no "
             "dialect mkl for matmul; its dialects are engine, generated, blis, openblas, onednn, libxsmm, "
             "reference\n"),
            (compiled, "--dialect=conv:blis", "FAMILY one of matmul, attention, layernorm"),
            (compiled, "--memory_budget=1.5", "expected bytes (a whole number from 2 to 2^50)"),
            # no budget in disguise, or a cast past size_t: each refused
            (compiled, "--memory_budget=1e-300", "or a fraction of the unbudgeted plan's peak"),
            (compiled, "--memory_budget=inf", "expected bytes"),
            (compiled, "--memory_budget=nan", "expected bytes"),
            (compiled, "--memory_budget=1e30", "expected bytes"),
            (compiled, "--memory_budget=18446744073709551616", "expected bytes"),
            (compiled, "--library-memory=all", "error: --library-memory=all: expected saving"),
            (compiled, "--generated-code=always", "error: --generated-code=always: expected "
             "within-tape"),
            (compiled, "--fusion=maybe", "error: --fusion=maybe: expected on (elementwise and "
             "row-wise chains as tiled groups) or off\n"),
            (engine, "--dialect=auto", "error: --dialect=auto: engine takes no such flag\n"),
            (engine, "--time_first_step", "error: --time_first_step: engine compiles nothing\n"),
            (engine, "--kernel_rows", "error: --kernel_rows: engine has none\n")]:
        r = subprocess.run([binary, flag, "--instance=workload=tiny_graph"], capture_output=True,
                           text=True, timeout=120)
        assert r.returncode == 2 and message in r.stderr and r.stdout == "", (flag, r.stderr)
    r = subprocess.run([compiled, "--dialect=matmul:reference,layernorm:reference",
                        "--instance=workload=mini_gpt,size=1", "--benchmark_format=json",
                        "--benchmark_min_time=0.01"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    label = json.loads(r.stdout)["benchmarks"][0]["label"]
    assert label.startswith("matmul:reference,layernorm:reference: ") and "linear=reference" in label
    assert "layernorm=reference" in label and "attention=engine" in label, label
    # A scalar step's label names its executor: generated code within the eager tape's memory
    # by default, wherever it can be built with --generated-code=any.
    for flag, executor in [("--generated-code=within-tape", "scalar: threaded: generated code "
                            "would outgrow the eager tape's"),
                           ("--generated-code=any", "scalar: generated code (")]:
        r = subprocess.run([compiled, flag, "--instance=workload=scalar_chain,size=10000",
                            "--benchmark_format=json", "--benchmark_min_time=0.01"],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        label = json.loads(r.stdout)["benchmarks"][0]["label"]
        assert label.startswith(executor), (flag, label)


# Every result claims the flags it was built with: they must be the compiler's real ones.
def test_results_record_the_flags_the_compiler_was_given(bin_dir):
    with open(os.path.join(bin_dir, "compile_commands.json")) as f:
        commands = {os.path.relpath(c["file"], SOURCE): c["command"] for c in json.load(f)}
    for binary, source in [("bench_engine", "apps/bench_engine.cc"),
                           ("bench_libtorch", "apps/bench_libtorch.cc")]:
        r = subprocess.run([os.path.join(bin_dir, binary), "--benchmark_filter=grad/empty/",
                            "--benchmark_format=json", "--benchmark_min_time=0.001"],
                           capture_output=True, text=True, timeout=120)
        claimed = json.loads(r.stdout)["context"]["cxx_flags"].split()
        given = [w for w in shlex.split(commands[source])
                 if w.startswith(("-O", "-m", "-f", "-std=", "-W", "-DNDEBUG"))]
        assert claimed == given, (binary, claimed, given)
        assert any(w.startswith("-march=x86-64-v") for w in claimed) and "-std=c++20" in claimed


# Multistage checkpointing into a directory that does not exist: that backend stops with one line
# naming it, the other strategies run, and the run says a benchmark was not run (exit 3).
def test_missing_checkpoint_directory_stops_multistage_only(bin_dir, tmp_path):
    missing = tmp_path / "no" / "such" / "dir"
    r = run(bin_dir, tmp_path, "--workloads", "char_rnn", "--sizes", "length=100", "--backends",
            "engine,engine_revolve,engine_multistage", "--checkpoint-dir", str(missing), *QUICK)
    assert r.returncode == 3, r.stdout + r.stderr
    by_cell = cells(tmp_path)
    multistage = by_cell[("engine_multistage", "step/char_rnn/length:100")]
    assert multistage["status"] == "not_run"
    assert multistage["message"] == (f"check failed: checkpoint directory {missing}: "
                                      "No such file or directory")
    assert by_cell[("engine_revolve", "step/char_rnn/length:100")]["status"] == "ok"
    assert by_cell[("engine", "step/char_rnn/length:100")]["status"] == "ok"


# The paper's experiment: multistage at k = 1, 2, 4, ... and its own k, against store-all, for
# each recurrent workload selected with engine_multistage (here one, at length 64), all of its
# processes taking turns.
# Every study draws its own figure from a real run, as readable as the main ones.
@pytest.mark.parametrize("study, args, figure", [
    ("budget", ["--sizes", "batch=1"], "budget.png"),
    ("first_step", ["--workloads", "tiny_graph,mlp_width", "--sizes", "width=16,32"],
     "first_step.png"),
    ("fusion", ["--workloads", "mlp_width", "--sizes", "width=16"], "fusion.png"),
    ("kernels", ["--sizes", "hidden=64", "--sizes", "width=16"], "kernel_dialects.png"),
    ("threads", ["--workloads", "mlp_width", "--sizes", "width=16,32", "--backends",
                 "engine,libtorch,libtorch_2t,pytorch_2t"], "threads.png"),
    ("isa", ["--workloads", "mlp_width", "--sizes", "width=16", "--backends",
             "engine_avx2,engine_avx512,libtorch_avx2,libtorch_avx512"], "isa.png"),
    ("contention", ["--workloads", "mlp_width", "--sizes", "width=16", "--backends",
                    "engine,engine_2t,engine_busy,engine_2t_busy,compiled,compiled_2t,"
                    "compiled_busy,compiled_2t_busy"], "contention.png"),
])
def test_every_study_draws_its_figure(bin_dir, tmp_path, study, args, figure):
    r = run(bin_dir, tmp_path, "--study", study, *args, "--repetitions", "2", "--min-time",
            "0.01", "--rounds", "1")
    assert r.returncode == 0, r.stdout + r.stderr
    latest = tmp_path / "latest"
    assert load(latest / "summary.json")["study"] == study
    assert figure in os.listdir(latest / "plots"), os.listdir(latest / "plots")
    for p in load(latest / "processes.json")["processes"]:  # a variant's results say its name
        if p["phase"] == "bench" and p["file"]:
            assert load(latest / p["file"])["context"]["backend"] == p["backend"], p
    figures = plot.figures(plot.load_run(str(latest)))
    for fig in figures.values():
        assert_readable(fig)
    plt.close("all")
    text = (latest / "summary.txt").read_text()
    assert max(len(line) for line in text.splitlines()
               if not line.startswith("results: ")) <= 120, text
    if study == "contention":  # whatever the order given, the others over the compiled mode
        assert "threads the time of engine over compiled's" in text, text


# The study fusion: each compiler over its framework's eager run. TorchScript's CPU fuser runs
# where this torch can compile fused groups (NNC with LLVM); elsewhere (Debian's 1.13) its row is
# skipped, saying why, and nothing else is lost.
def test_the_fusion_study_weighs_each_compiler_against_its_eager_run(bin_dir, tmp_path):
    r = run(bin_dir, tmp_path, "--study", "fusion", "--workloads", "mlp_width", "--sizes",
            "width=16", *QUICK)
    assert r.returncode == 0, r.stdout + r.stderr
    by_cell = cells(tmp_path)
    fused = by_cell[("torchscript_fused", "step/mlp_width/width:16")]
    assert fused["status"] == "ok" or (
        fused["status"] == "skipped"
        and "TorchScript's CPU fuser (NNC) cannot compile here" in fused["message"]), fused
    for backend in ("engine", "compiled", "compiled_unfused", "torchscript"):
        assert by_cell[(backend, "step/mlp_width/width:16")]["status"] == "ok", backend
    text = (tmp_path / "latest" / "summary.txt").read_text()
    assert "compilers against their eager runs" in text and "compiled / engine" in text, text
    # the compiled program's size beside its time: instructions and bytes moved, as its counters
    counters = by_cell[("compiled", "step/mlp_width/width:16")]["counters"]
    assert counters["instructions"] > 0 and counters["bytes_moved"] > 0, counters
    row = next(line for line in text.splitlines() if line.startswith("step/mlp_width/width:16")
               and " KB " in line)
    assert f" {counters['fused_groups']:.0f}/{counters['instructions']:.0f} " in row, row
    unfused = by_cell[("compiled_unfused", "step/mlp_width/width:16")]["counters"]
    assert unfused["fused_groups"] == 0 and unfused["bytes_moved"] == counters["bytes_moved_unfused"]
    assert max(len(line) for line in text.splitlines()
               if not line.startswith("results: ")) <= 120, text
    # Another run with the compiled mode but not the study's row has no such table.
    other = tmp_path / "other"
    r = run(bin_dir, other, "--workloads", "mlp_width", "--sizes", "width=16", "--backends",
            "engine,compiled", *QUICK)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "compilers against" not in (other / "latest" / "summary.txt").read_text()


def test_the_interval_sweep_is_run_summarised_and_drawn(bin_dir, tmp_path):
    r = run(bin_dir, tmp_path, "--study", "bptt", "--workloads", "char_rnn", "--sizes",
            "length=64", "--backends", "engine,engine_multistage", *QUICK)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "intervals: multistage at k = 1, 2, 4, ... and its own choice, against store-all" \
        in r.stdout
    summary = load(tmp_path / "latest" / "summary.json")
    rows = summary["intervals"]
    assert [row["k"] for row in rows] == ["auto", "1", "2", "4", "8", "16", "32"], rows
    for row in rows:
        assert row["workload"] == "char_rnn" and row["length"] == 64
        assert len(row["slowdowns"]) == 5  # repetition i over store-all's repetition i
        assert row["slowdown"] == pytest.approx(statistics.median(row["slowdowns"]))
        assert row["records"] >= 1 and row["bytes_written"] > 0
    # store-all and every k took turns: every process's i-th turn before anyone's (i+1)-th
    turns = [p["turns"] for p in load(tmp_path / "latest" / "processes.json")["processes"]
             if p["phase"] == "intervals"]
    assert len(turns) == 8 and all(len(t) == 5 for t in turns), turns
    assert all(max(t[i] for t in turns) < min(t[i + 1] for t in turns) for i in range(4)), turns
    assert [row["interval"] for row in rows[1:]] == [1, 2, 4, 8, 16, 32]
    text = (tmp_path / "latest" / "summary.txt").read_text()
    assert "char_rnn length 64: auto (k=" in text and " 32 " in text
    figures = plot.figures(plot.load_run(tmp_path / "latest"))
    assert {"intervals.png", "recurrent_memory.png", "recurrent_time.png"} <= set(figures)
    for fig in figures.values():
        assert_readable(fig)


# --background: its busy processes run beside the timed steps of the rows under load alone (the
# study contention's), stopped during the others' turns; each result says what it ran beside; and
# they end with the run. Without rows under load they run beside every row.
def test_background_load_is_beside_the_busy_rows_and_ends_with_the_run(bin_dir, tmp_path):
    from test_faults import background_of, parent_of
    runner = subprocess.Popen(
        [os.path.join(bin_dir, "bench_run"), "--out", str(tmp_path / "rows"), "--study",
         "contention", "--workloads", "mlp_width", "--sizes", "width=16", "--backends",
         "compiled,compiled_busy", "--background", "1,7", *QUICK],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    busy = []
    while runner.poll() is None and not busy:
        busy = background_of(runner.pid)
        time.sleep(0.02)
    out, err = runner.communicate(timeout=600)
    assert runner.returncode == 0, out + err
    assert len(busy) == 1 and all(parent_of(pid) is None for pid in busy), busy
    assert "background: 1 busy process at nice 7 beside the timed steps of the rows under load" \
        in out
    latest = tmp_path / "rows" / "latest"
    for p in load(latest / "processes.json")["processes"]:
        if p["phase"] == "bench" and p["file"]:
            said = load(latest / p["file"])["context"]["background"]
            assert said == ("1 busy process at nice 7" if p["backend"] == "compiled_busy"
                            else "none"), p
    summary = load(latest / "summary.json")
    assert summary["options"]["background_beside"] == "rows under load"
    r = run(bin_dir, tmp_path / "all", "--workloads", "mlp_width", "--sizes", "width=16",
            "--backends", "engine", "--background", "1", *QUICK)
    assert r.returncode == 0, r.stdout + r.stderr
    latest = tmp_path / "all" / "latest"
    (result,) = (latest / "engine").glob("*.json")
    assert load(result)["context"]["background"] == "1 busy process at nice 0"
    assert "background: 1 busy process at nice 0 beside every row" in \
        (latest / "summary.txt").read_text().replace("\n  ", " ")
