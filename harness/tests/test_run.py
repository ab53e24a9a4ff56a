"""harness/tests/test_run.py: bench_run end to end, on real backend processes.

A short real run must write what README.md ("What a run writes") and plots/ rely on; bad inputs
must give one clear line and exit 2; a backend that crashes, hangs or disagrees must be reported
while the other backend's results are kept. Fault injection: BACKPROP_BENCH_FAULT
(harness/backend_main.h).
    ctest -R harness_pytest --output-on-failure     or     /usr/bin/python3 -m pytest harness/tests
"""
import json
import os
import statistics
import subprocess

import pytest

QUICK = ["--repetitions", "2", "--min-time", "0.01", "--no-plots"]
BACKENDS = ("engine", "libtorch", "pytorch", "torchscript")
CPP = ["--backends", "engine,libtorch"]  # where the subject is the runner, not a backend
SOURCE = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def run(bin_dir, tmp_path, *args, env=None):
    full_env = dict(os.environ, **(env or {}))
    return subprocess.run([os.path.join(bin_dir, "bench_run"), "--out", str(tmp_path), *args],
                          capture_output=True, text=True, env=full_env, timeout=600)


def load(path):
    with open(path) as f:
        return json.load(f)


def process_rows(tmp_path):
    return load(tmp_path / "latest" / "processes.json")["processes"]


def test_short_run_writes_everything_plots_read(bin_dir, tmp_path):
    r = run(bin_dir, tmp_path, "--filter", "tiny_graph|scalar_chain", "--sizes", "nodes=10,100",
            *QUICK)
    assert r.returncode == 0, r.stdout + r.stderr
    latest = tmp_path / "latest"
    assert latest.is_symlink()
    rows = [p for p in process_rows(tmp_path) if p["phase"] == "bench"]
    # 3 instances (tiny_graph, scalar_chain at 10 and 100) on 2 backends, each its own process
    assert sorted((p["backend"], p["instance"]) for p in rows) == sorted(
        (b, i) for b in BACKENDS
        for i in ("grad/tiny_graph", "grad/scalar_chain/nodes:10", "grad/scalar_chain/nodes:100"))
    for p in rows:
        assert p["status"] == "ok", p
        assert p["max_rss_bytes"] > 1_000_000 and p["median_real_time_seconds"] > 0
        result = load(latest / p["file"])
        ctx = result["context"]
        for key in ("backend", "backend_version", "threads", "compiler", "cxx_flags", "cpu_model",
                    "git_sha", "date", "host_name", "num_cpus"):
            assert ctx.get(key), (key, ctx)
        assert ctx["backend"] == p["backend"] and ctx["threads"] == "1"
        if p["backend"] != "engine":
            assert "openblas" in ctx["blas"], "torch must run on OpenBLAS, not the reference BLAS"
            assert ctx["blas_threads"] == "1" and ctx["intra_op_threads"] == "1"
        medians = [b for b in result["benchmarks"] if b.get("aggregate_name") == "median"]
        assert len(medians) == 1 and medians[0]["name"] == p["benchmark"] + "_median"
        repetitions = [b["real_time"] for b in result["benchmarks"] if b["run_type"] == "iteration"]
        assert len(repetitions) == 2
        assert medians[0]["real_time"] == pytest.approx(statistics.median(repetitions), rel=1e-9)
        assert medians[0]["peak_rss_bytes"] > 1_000_000
        if "scalar_chain" in p["instance"]:
            assert medians[0]["items_per_second"] > 0
    check = load(latest / "check.json")
    assert {c["status"] for c in check["results"]} == {"ok"}
    summary = (latest / "summary.txt").read_text()
    assert "grad/scalar_chain/nodes:100" in summary
    for b in BACKENDS[1:]:
        assert f"{b}/engine" in summary


def test_check_only_agrees(bin_dir, tmp_path):
    r = run(bin_dir, tmp_path, "--check-only", "--workloads", "small_graph")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "closest to its tolerance: rel diff" in r.stdout and "all OK" in r.stdout


@pytest.mark.parametrize("args, message", [
    (["--backends", "engine,tensorflow"], "unknown backend 'tensorflow'; valid: engine, libtorch"),
    (["--workloads", "resnet"], "unknown workload 'resnet'; valid: empty, tiny_graph"),
    (["--sizes", "nodes=abc"], "'abc' is not a whole number"),
    (["--sizes", "nodes=0"], "nodes=0 is out of range for scalar_chain (1 to 10000000)"),
    (["--sizes", "depth=8"], "no workload is sized by 'depth'; size keys: nodes, hidden, batch"),
    (["--sizes", "batch=0"], "batch=0 is out of range for mini_gpt (1 to 4096)"),
    (["--filter", "no_such_thing"], "--filter 'no_such_thing' matches no benchmark"),
    (["--filter", "tiny(("], "is not a valid regular expression"),
    (["--repetitions", "0"], "--repetitions 0: expected a number from 1 to 1000"),
    (["--frobnicate"], "unknown option '--frobnicate'"),
])
def test_bad_input_is_one_clear_line_and_exit_2(bin_dir, tmp_path, args, message):
    r = run(bin_dir, tmp_path, *args, *QUICK)
    assert r.returncode == 2, r.stdout + r.stderr
    assert message in r.stderr
    assert r.stderr.startswith("error: ")


def test_bad_data_file_is_a_clear_error(bin_dir, tmp_path):
    empty, short = tmp_path / "empty.txt", tmp_path / "short.txt"
    empty.write_text("")
    short.write_text("hello")
    for data, message in [(tmp_path / "missing.txt", "missing.txt: cannot open it"),
                          (empty, "empty.txt: the file is empty"),
                          (short, "has 5 bytes; the selected workloads need at least 65")]:
        r = run(bin_dir, tmp_path, "--data", str(data), *QUICK)
        assert r.returncode == 2, r.stdout + r.stderr
        assert message in r.stderr and r.stderr.startswith("error: ")
    # a file too short for mini_gpt_wide (context 64) still serves mini_gpt (context 8)
    r = run(bin_dir, tmp_path, "--data", str(short) + "-and-more", "--workloads", "tiny_graph",
            "--check-only")
    assert r.returncode == 0, r.stdout + r.stderr  # no model selected: the file is not read
    short.write_text("a short corpus of text")
    r = run(bin_dir, tmp_path, "--data", str(short), "--workloads", "mini_gpt", "--sizes",
            "batch=1", "--check-only")
    assert r.returncode == 0, r.stdout + r.stderr


def test_backend_crash_mid_run_keeps_other_results(bin_dir, tmp_path):
    r = run(bin_dir, tmp_path, "--workloads", "tiny_graph,small_graph", *QUICK, *CPP,
            env={"BACKPROP_BENCH_FAULT": "crash:small_graph/libtorch"})
    assert r.returncode == 3, r.stdout + r.stderr
    rows = {(p["backend"], p["instance"]): p for p in process_rows(tmp_path) if p["phase"] == "bench"}
    crashed = rows[("libtorch", "grad/small_graph")]
    assert crashed["status"] == "failed" and crashed["signal"] == 6
    for key in [("engine", "grad/tiny_graph"), ("engine", "grad/small_graph"),
                ("libtorch", "grad/tiny_graph")]:
        assert rows[key]["status"] == "ok"
        assert (tmp_path / "latest" / rows[key]["file"]).is_file()
    assert "failed" in (tmp_path / "latest" / "summary.txt").read_text()


def test_hanging_backend_is_killed_at_the_timeout(bin_dir, tmp_path):
    r = run(bin_dir, tmp_path, "--workloads", "tiny_graph", "--timeout", "3", *QUICK, *CPP,
            env={"BACKPROP_BENCH_FAULT": "hang:tiny_graph/libtorch"})
    assert r.returncode == 3
    rows = {p["backend"]: p for p in process_rows(tmp_path) if p["phase"] == "bench"}
    assert rows["libtorch"]["status"] == "timeout" and rows["libtorch"]["timed_out"]
    assert 3 <= rows["libtorch"]["wall_seconds"] < 20
    assert rows["engine"]["status"] == "ok"


def test_backend_with_wrong_answers_is_not_reported(bin_dir, tmp_path):
    r = run(bin_dir, tmp_path, "--workloads", "tiny_graph", *QUICK, *CPP,
            env={"BACKPROP_BENCH_FAULT": "wrong:tiny_graph/libtorch"})
    assert r.returncode == 3
    assert "WRONG" in r.stdout and "libtorch not reported: wrong answers" in r.stdout
    rows = {p["backend"]: p for p in process_rows(tmp_path) if p["phase"] == "bench"}
    assert rows["libtorch"]["status"] == "not_run" and rows["engine"]["status"] == "ok"
    check = load(tmp_path / "latest" / "check.json")
    wrong = [c for c in check["results"] if c["backend"] == "libtorch"]
    assert wrong[0]["status"] == "wrong" and wrong[0]["max_rel_diff_vs_reference"] > 1e-9


def test_backend_crashing_in_check_is_not_reported(bin_dir, tmp_path):
    r = run(bin_dir, tmp_path, "--workloads", "tiny_graph", *QUICK, *CPP,
            env={"BACKPROP_BENCH_FAULT": "check-crash:libtorch"})
    assert r.returncode == 3
    rows = {p["backend"]: p for p in process_rows(tmp_path) if p["phase"] == "bench"}
    assert rows["libtorch"]["status"] == "not_run" and rows["engine"]["status"] == "ok"


def test_python_backend_crash_and_wrong_answers_are_reported(bin_dir, tmp_path):
    r = run(bin_dir, tmp_path, "--workloads", "tiny_graph,small_graph", "--backends",
            "engine,pytorch,torchscript", *QUICK,
            env={"BACKPROP_BENCH_FAULT": "crash:small_graph/pytorch"})
    assert r.returncode == 3, r.stdout + r.stderr
    rows = {(p["backend"], p["instance"]): p for p in process_rows(tmp_path) if p["phase"] == "bench"}
    assert rows[("pytorch", "grad/small_graph")]["signal"] == 6
    assert rows[("torchscript", "grad/small_graph")]["status"] == "ok"
    r = run(bin_dir, tmp_path, "--workloads", "mini_gpt", "--sizes", "batch=1", "--backends",
            "engine,torchscript", "--check-only", env={"BACKPROP_BENCH_FAULT": "wrong:torchscript"})
    assert r.returncode == 1 and "torchscript vs engine" in r.stdout and "WRONG" in r.stdout


@pytest.mark.parametrize("flag", ["--workloads=resnet", "--sizes=nodes=abc", "--sizes=batch=0",
                                  "--sizes=depth=3", "--benchmark_filter=tiny((",
                                  "--data=/nonexistent/corpus"])
def test_python_backend_rejects_bad_flags_like_the_cpp_ones(bin_dir, flag):
    def first_line(cmd):
        r = subprocess.run(cmd + [flag, "--benchmark_list_tests=true"], capture_output=True,
                           text=True, timeout=120)
        assert r.returncode == 2, r.stdout + r.stderr
        return r.stderr.splitlines()[0]
    python = first_line([os.path.join(SOURCE, "baselines", "pytorch_bench.py"), "--mode=pytorch"])
    assert python == first_line([os.path.join(bin_dir, "bench_engine")])
