"""harness/tests/test_faults.py: bench_run end to end when things go wrong, on real processes.

A backend that crashes, hangs, answers wrong (a NaN anywhere, a wrong engine among right
baselines), breaks its reset or runs out of memory must be reported while the other backends'
results are kept; a full disk stops the run with every file at its last good copy; a runner
interrupted (Ctrl-C) or killed takes its backends with it, and an interrupted run resumes to the
summary an uninterrupted one writes. Fault injection: BACKPROP_BENCH_FAULT
(harness/driver/backend_main.h). The runs that go well are test_run.py's; this file is its own ctest
(harness_pytest_faults), run beside that one.
    ctest -R harness_pytest --output-on-failure     or     /usr/bin/python3 -m pytest harness/tests
"""
import os
import re
import resource
import signal
import subprocess
import time

import pytest

from test_run import CPP, QUICK, bench_rows, cells, load, run, run_dirs, verdicts


def test_backend_crash_mid_run_keeps_other_results(bin_dir, tmp_path):
    r = run(bin_dir, tmp_path, "--workloads", "tiny_graph,small_graph", *QUICK, *CPP,
            env={"BACKPROP_BENCH_FAULT": "crash:small_graph/compiled"})
    assert r.returncode == 3, r.stdout + r.stderr
    rows = bench_rows(tmp_path)
    crashed = rows[("compiled", "small_graph")]
    assert crashed["status"] == "failed" and crashed["signal"] == 6
    for key in [("engine", "tiny_graph"), ("engine", "small_graph"), ("compiled", "tiny_graph")]:
        assert rows[key]["status"] == "ok"
        assert (tmp_path / "latest" / rows[key]["file"]).is_file()
    assert cells(tmp_path)[("compiled", "grad/small_graph")]["status"] == "failed"
    assert "failed" in (tmp_path / "latest" / "summary.txt").read_text()


def test_hanging_backend_is_killed_at_the_timeout(bin_dir, tmp_path):
    r = run(bin_dir, tmp_path, "--workloads", "tiny_graph", "--timeout", "3", *QUICK, *CPP,
            env={"BACKPROP_BENCH_FAULT": "hang:tiny_graph/compiled"})
    assert r.returncode == 3
    rows = bench_rows(tmp_path)
    assert rows[("compiled", "tiny_graph")]["status"] == "timeout"
    assert 3 <= rows[("compiled", "tiny_graph")]["wall_seconds"] < 20
    assert rows[("engine", "tiny_graph")]["status"] == "ok"


def test_backend_with_wrong_answers_is_not_benchmarked(bin_dir, tmp_path):
    r = run(bin_dir, tmp_path, "--workloads", "tiny_graph,small_graph", *QUICK, *CPP,
            env={"BACKPROP_BENCH_FAULT": "wrong:tiny_graph/compiled"})
    assert r.returncode == 3
    assert "NOT OK" in r.stdout and "grad/tiny_graph: wrong" in r.stdout
    rows = bench_rows(tmp_path)
    assert rows[("compiled", "tiny_graph")]["status"] == "not_run"
    assert rows[("compiled", "small_graph")]["status"] == "ok", "only the wrong instance is dropped"
    assert rows[("engine", "tiny_graph")]["status"] == "ok"
    check = {(c["backend"], c["instance"]): c for c in load(tmp_path / "latest" / "check.json")["results"]}
    wrong = check[("compiled", "grad/tiny_graph")]
    assert wrong["status"] == "wrong" and "off the known answer by 1" in wrong["message"]


# A model whose repeated step 0 differs is reported as a broken reset, on any backend.
def test_broken_reset_of_a_model_is_caught(bin_dir, tmp_path):
    for backend in ("engine", "pytorch"):
        r = run(bin_dir, tmp_path, "--check-only", "--workloads", "mlp_width", "--sizes", "width=16",
                "--backends", backend, env={"BACKPROP_BENCH_FAULT": f"reset:mlp_width/{backend}"})
        assert r.returncode == 1, r.stdout + r.stderr
        assert "reset is broken" in r.stdout, r.stdout


def test_backend_crashing_in_check_is_not_benchmarked(bin_dir, tmp_path):
    r = run(bin_dir, tmp_path, "--workloads", "tiny_graph,small_graph", *QUICK, *CPP,
            env={"BACKPROP_BENCH_FAULT": "check-crash:small_graph/compiled"})
    assert r.returncode == 3
    rows = bench_rows(tmp_path)
    assert rows[("compiled", "small_graph")]["status"] == "not_run"
    assert "killed by signal 6" in rows[("compiled", "small_graph")]["message"]
    # the record written before the crash is kept and judged
    assert rows[("compiled", "tiny_graph")]["status"] == "ok"
    assert rows[("engine", "small_graph")]["status"] == "ok"


def test_python_backend_crash_and_wrong_answers_are_reported(bin_dir, tmp_path):
    r = run(bin_dir, tmp_path, "--workloads", "tiny_graph,small_graph", "--backends",
            "engine,pytorch,torchscript", *QUICK,
            env={"BACKPROP_BENCH_FAULT": "crash:small_graph/pytorch"})
    assert r.returncode == 3, r.stdout + r.stderr
    rows = bench_rows(tmp_path)
    assert rows[("pytorch", "small_graph")]["signal"] == 6
    assert rows[("torchscript", "small_graph")]["status"] == "ok"
    r = run(bin_dir, tmp_path, "--workloads", "mini_gpt", "--sizes", "batch=1", "--backends",
            "engine,torchscript", "--check-only", env={"BACKPROP_BENCH_FAULT": "wrong:torchscript"})
    assert r.returncode == 1 and "differs from engine" in r.stdout and "NOT OK" in r.stdout


# A size too big for the memory limit (run with --force, which makes no estimate) is out of
# memory at that size, on every backend (C++ and Python; found by the check), and the other sizes
# run. An allocation refused while benchmarking (injected) is reported the same way.
def test_out_of_memory_is_reported_at_its_size(bin_dir, tmp_path):
    r = run(bin_dir, tmp_path, "--workloads", "mini_gpt_wide", "--sizes", "batch=1,512",
            "--memory-limit", "1500M", "--force", "--backends", "engine,libtorch,pytorch", *QUICK)
    assert r.returncode == 3, r.stdout + r.stderr
    c = cells(tmp_path)
    for b in ("engine", "libtorch", "pytorch"):
        assert c[(b, "step/mini_gpt_wide/batch:1")]["status"] == "ok"
        big = c[(b, "step/mini_gpt_wide/batch:512")]
        assert big["status"] == "out_of_memory", (b, big)
        assert "out of memory in the check at step/mini_gpt_wide/batch:512 under the limit of " \
               "1572.9 MB" in big["message"], big["message"]
    # our engine names the allocation it could not make (docs/troubleshooting.md)
    assert re.search(r"cannot allocate \d+ bytes for ",
                     c[("engine", "step/mini_gpt_wide/batch:512")]["message"])
    assert "out of mem" in (tmp_path / "latest" / "summary.txt").read_text()
    out = tmp_path / "injected"
    r = run(bin_dir, out, "--workloads", "mlp_width", "--sizes", "width=16", *QUICK,
            "--backends", "engine,libtorch,pytorch", env={"BACKPROP_BENCH_FAULT": "oom:torch/width"})
    assert r.returncode == 3, r.stdout + r.stderr
    rows = bench_rows(out)
    assert rows[("engine", "mlp_width")]["status"] == "ok"
    for b in ("libtorch", "pytorch"):
        assert rows[(b, "mlp_width")]["status"] == "out_of_memory", rows[(b, "mlp_width")]
        assert rows[(b, "mlp_width")]["exit_code"] == 12
        assert "out of memory at step/mlp_width/width:16" in rows[(b, "mlp_width")]["message"]


# A size beyond the defaults is measured at three smaller sizes on each backend and estimated;
# a benchmark that would not fit under the memory limit is not run, it is reported out of memory
# with its estimate, and the run goes on with the rest.
def test_a_size_too_big_for_memory_is_reported_and_not_run(bin_dir, tmp_path):
    r = run(bin_dir, tmp_path, "--workloads", "mini_gpt_wide", "--sizes", "batch=1,256",
            "--memory-limit", "800M", "--backends", "engine", *QUICK)
    assert r.returncode == 3, r.stdout + r.stderr
    out = re.sub(r"\n +", " ", r.stdout)  # lines wrapped at 120 columns, joined
    assert "memory estimate: step/mini_gpt_wide/batch:256 on engine: about " in out
    assert "(peak RSS " in out and "at batch=8, 16, 32): above the limit, not run" in out
    c = cells(tmp_path)
    assert c[("engine", "step/mini_gpt_wide/batch:1")]["status"] == "ok"
    big = c[("engine", "step/mini_gpt_wide/batch:256")]
    assert big["status"] == "out_of_memory", big
    assert big["message"].startswith("not run: estimated above the limit of 838.9 MB "
                                     "(step/mini_gpt_wide/batch:256 on engine: about "), big
    assert big["message"].endswith("; --force runs it, capped"), big
    processes = load(tmp_path / "latest" / "processes.json")
    assert [p["benchmark"] for p in processes["processes"] if p["phase"] == "bench" and
            p["status"] == "ok"] == ["step/mini_gpt_wide/engine/batch:1/threads:1"]
    [estimate] = processes["memory_estimates"]
    assert estimate["bytes"] > 800 * 2**20 and estimate["not_run"] is True
    check = load(tmp_path / "latest" / "check" / "engine.json")
    assert [rec["name"] for rec in check["records"]] == [
        "step/mini_gpt_wide/engine/batch:1/threads:1"], "the check process is not asked"


# A NaN in the numbers of any backend, C++ or Python, fails its check as such.
def test_a_nan_anywhere_fails_the_check(bin_dir, tmp_path):
    for backend in ("libtorch", "pytorch"):
        out = tmp_path / backend
        r = run(bin_dir, out, "--check-only", "--workloads", "tiny_graph,mlp_width", "--sizes",
                "width=16", "--backends", "engine,libtorch,pytorch",
                env={"BACKPROP_BENCH_FAULT": f"nan:{backend}"})
        assert r.returncode == 1, r.stdout + r.stderr
        v = verdicts(run_dirs(out)[0])
        for instance in ("grad/tiny_graph", "step/mlp_width/width:16"):
            assert v[(instance, backend)]["status"] == "wrong"
            assert "is not a finite number" in v[(instance, backend)]["message"]
            assert v[(instance, "engine")]["status"] == "ok"


# Our engine wrong where the baselines agree, or off finite differences: the engine is the one
# found wrong, and no correct baseline is dropped.
def test_a_wrong_engine_is_outvoted_not_trusted(bin_dir, tmp_path):
    r = run(bin_dir, tmp_path, "--check-only", "--workloads", "scalar_chain,mlp_width", "--sizes",
            "nodes=10", "--sizes", "width=16", "--backends", "engine,libtorch,pytorch",
            env={"BACKPROP_BENCH_FAULT": "wrong:engine"})
    assert r.returncode == 1, r.stdout + r.stderr
    v = verdicts(run_dirs(tmp_path)[0])
    assert v[("grad/scalar_chain/nodes:10", "engine")]["status"] == "wrong"
    assert "off finite differences" in v[("grad/scalar_chain/nodes:10", "engine")]["message"]
    model = v[("step/mlp_width/width:16", "engine")]
    assert model["status"] == "wrong"
    assert "differs from libtorch, pytorch (who agree)" in model["message"]
    for b in ("libtorch", "pytorch"):
        for instance in ("grad/scalar_chain/nodes:10", "step/mlp_width/width:16"):
            assert v[(instance, b)]["status"] == "ok", v[(instance, b)]


# A full disk (here a file-size limit, which fails writes the same way without root): the run
# stops with one line naming the file and the filesystem, exit 4, and every file it had written
# keeps its last good copy.
# A backend's check file on a full disk: one line and exit 1, no file under the final name (it
# once was left empty) and no temporary file; a file that a crash cut short is read from
# <file>.tmp, the name it is written under until every record is in.
@pytest.mark.parametrize("backend", ["bench_engine", "bench_compiled", "bench_adolc", "pytorch"])
def test_a_check_file_on_a_full_disk_is_one_line_and_no_file(bin_dir, tmp_path, backend):
    def small_files():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (300, 300))

    driver = os.path.join(os.path.dirname(__file__), "..", "..", "baselines", "pytorch",
                          "pytorch_bench.py")
    command = ["/usr/bin/python3", driver] if backend == "pytorch" else [
        os.path.join(bin_dir, backend)]
    out = tmp_path / "check" / f"{backend}.json"
    out.parent.mkdir()
    r = subprocess.run([*command, "--instance=workload=scalar_chain,size=50",
                        f"--check_out={out}"], capture_output=True, text=True, timeout=120,
                       preexec_fn=small_files)
    assert r.returncode == 1, r.stdout + r.stderr
    assert r.stderr.strip().splitlines()[-1] == f"error: --check_out={out}: cannot write: File too large"
    assert not list(out.parent.iterdir()), "a file was left behind"


def test_a_full_disk_stops_the_run_and_keeps_the_last_good_files(bin_dir, tmp_path):
    def small_files():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (5000, 5000))

    r = subprocess.run([os.path.join(bin_dir, "bench_run"), "--out", str(tmp_path), "--workloads",
                        "tiny_graph,small_graph,scalar_chain", *QUICK, *CPP],
                       capture_output=True, text=True, timeout=600, preexec_fn=small_files)
    assert r.returncode == 4, r.stdout + r.stderr
    errors = [line for line in r.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "cannot write " in errors[0] and "File too large" in errors[0]
    assert "(filesystem /" in errors[0] and "MB free)" in errors[0]
    run_dir = run_dirs(tmp_path)[0]
    processes = load(run_dir / "processes.json")["processes"]  # whole, if not the newest
    assert 0 < len(processes) < 2 + 2 * 7
    assert not list(run_dir.glob("*.tmp")) and (run_dir / "INCOMPLETE").exists()
    assert not (tmp_path / "latest").exists(), "latest never points at a run that stopped"


def comm_of(pid):
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return ""


def background_of(runner_pid):
    """The busy processes (bench_run --background) of the runner `runner_pid`."""
    return [pid for pid in map(int, filter(str.isdigit, os.listdir("/proc")))
            if parent_of(pid) == runner_pid and comm_of(pid) == "bp_background"]


# A runner stopped mid-run (Ctrl-C, or SIGKILL where no handler runs) leaves no backend behind,
# nor its busy processes (--background), marks its folder incomplete and does not move `latest`.
def test_a_stopped_runner_takes_its_backend_with_it(bin_dir, tmp_path):
    for sig in (signal.SIGINT, signal.SIGKILL):
        out = tmp_path / sig.name
        runner = subprocess.Popen(
            [os.path.join(bin_dir, "bench_run"), "--out", str(out), "--workloads", "tiny_graph",
             "--backends", "engine", "--background", "2,19", *QUICK], stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL, env=dict(os.environ, BACKPROP_BENCH_FAULT="hang:tiny_graph"))
        backend = None
        for _ in range(300):
            backend = next((pid for pid in map(int, filter(str.isdigit, os.listdir("/proc")))
                            if parent_of(pid) == runner.pid and is_benchmarking(pid)), None)
            if backend:
                break
            time.sleep(0.1)
        assert backend, "the backend process never started"
        busy = background_of(runner.pid)
        assert len(busy) == 2, busy
        runner.send_signal(sig)
        runner.wait(timeout=30)
        for _ in range(100):
            if parent_of(backend) is None:
                break
            time.sleep(0.05)
        assert parent_of(backend) is None, f"backend {backend} outlived a runner stopped by {sig}"
        for _ in range(100):
            if all(parent_of(pid) is None for pid in busy):
                break
            time.sleep(0.05)
        assert all(parent_of(pid) is None for pid in busy), f"{busy} outlived it ({sig})"
        assert (run_dirs(out)[0] / "INCOMPLETE").exists()
        assert not (out / "latest").exists()


def start_and_interrupt(bin_dir, out, args, fault, when):
    """bench_run with `args`, sent SIGINT once a bench process whose command line contains `when`
    runs; returns (exit status, stderr)."""
    runner = subprocess.Popen(
        [os.path.join(bin_dir, "bench_run"), "--out", str(out), *args],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        env=dict(os.environ, BACKPROP_BENCH_FAULT=fault))
    for _ in range(600):
        pids = map(int, filter(str.isdigit, os.listdir("/proc")))
        if any(parent_of(pid) == runner.pid and when.encode() in cmdline(pid)
               and is_benchmarking(pid) for pid in pids):
            break
        time.sleep(0.05)
    else:
        runner.kill()
        pytest.fail(f"no benchmark of {when} ever started")
    runner.send_signal(signal.SIGINT)
    _, err = runner.communicate(timeout=60)
    return runner.returncode, err


# Ctrl-C while the plots are drawn: the run finished, its results whole, and the exit status says
# the interruption (130, as --help promises), with the command that draws them.
def test_ctrl_c_during_the_plots_exits_130(bin_dir, tmp_path):
    runner = subprocess.Popen(
        [os.path.join(bin_dir, "bench_run"), "--out", str(tmp_path), "--workloads", "tiny_graph",
         "--backends", "engine", "--repetitions", "2", "--min-time", "0.01", "--rounds", "1"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    for _ in range(1200):  # the plotting process started
        pids = map(int, filter(str.isdigit, os.listdir("/proc")))
        if any(parent_of(pid) == runner.pid and b"plots/plot.py" in cmdline(pid) for pid in pids):
            break
        time.sleep(0.05)
    else:
        runner.kill()
        pytest.fail("the plots never started")
    runner.send_signal(signal.SIGINT)
    _, err = runner.communicate(timeout=60)
    assert runner.returncode == 130, err
    assert "interrupted (Interrupt) while drawing the plots: the results are whole" in err, err
    assert "make plots RUN=" in err and "plots failed" not in err, err
    [folder] = run_dirs(tmp_path)
    assert (folder / "summary.json").exists() and not (folder / "INCOMPLETE").exists()


# Ctrl-C mid-run: the benchmarks stop at once, what finished is written with a summary, the run is
# marked INCOMPLETE and says how to resume; --resume then runs only what is missing, and the
# summary is that of an uninterrupted run. With two rounds, interrupted in the first, a benchmark
# whose first round finished is not finished, and its first round is not run again.
@pytest.mark.parametrize("rounds", ["1", "2"])
def test_an_interrupted_run_is_written_and_resumed(bin_dir, tmp_path, rounds):
    args = ["--workloads", "tiny_graph,small_graph,mlp_width", "--sizes", "width=16", *QUICK, *CPP,
            "--rounds", rounds]
    code, err = start_and_interrupt(bin_dir, tmp_path, args, "hang:small_graph/compiled",
                                    when="small_graph")
    assert code == 130, err
    [folder] = run_dirs(tmp_path)
    assert f"make bench RESUME={folder}" in err, err
    finished = 2 if rounds == "1" else 0
    assert f"interrupted (Interrupt): {finished} of 6 benchmarks finished" in err, err
    assert "RESUME=" in (folder / "INCOMPLETE").read_text()
    assert not (tmp_path / "latest").exists()
    summary = load(folder / "summary.json")
    status = {(b, row["instance"]): c["status"] for row in summary["rows"]
              for b, c in row["backends"].items()}
    tiny = "ok" if rounds == "1" else "interrupted"
    assert status == {("engine", "grad/tiny_graph"): tiny, ("compiled", "grad/tiny_graph"): tiny,
                      ("engine", "grad/small_graph"): "interrupted",
                      ("compiled", "grad/small_graph"): "interrupted",
                      ("engine", "step/mlp_width/width:16"): "interrupted",
                      ("compiled", "step/mlp_width/width:16"): "interrupted"}
    for row in summary["rows"]:  # no result file was left half written
        for c in row["backends"].values():
            if c["file"] and (folder / c["file"]).exists():
                load(folder / c["file"])
    kept = folder / summary["rows"][0]["backends"]["engine"]["file"]  # its (first round's) file
    assert kept.name.endswith(".json" if rounds == "1" else ".round1.json"), kept
    kept_time = kept.stat().st_mtime_ns

    r = subprocess.run([os.path.join(bin_dir, "bench_run"), "--resume", str(folder), "--no-plots"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "resumed" in r.stdout and "(before the interrupt)" in r.stdout, r.stdout
    assert kept.stat().st_mtime_ns == kept_time, "a finished benchmark ran again"
    assert not (folder / "INCOMPLETE").exists()
    assert (tmp_path / "latest").resolve() == folder.resolve()
    resumed = load(folder / "summary.json")
    assert all(c["status"] == "ok" for row in resumed["rows"] for c in row["backends"].values())
    # the same summary as an uninterrupted run of the same options
    other = tmp_path / "uninterrupted"
    assert run(bin_dir, other, *args).returncode == 0
    fresh = load(other / "latest" / "summary.json")
    shape = lambda s: [(row["instance"], sorted((b, sorted(c)) for b, c in row["backends"].items()))
                       for row in s["rows"]]
    assert shape(resumed) == shape(fresh)
    assert sorted(resumed) == sorted(fresh)


def stopped_in_its_check(bin_dir, out):
    """A run of engine and compiled on tiny_graph, interrupted while the engine's check hangs:
    its folder, INCOMPLETE."""
    runner = subprocess.Popen(
        [os.path.join(bin_dir, "bench_run"), "--out", str(out), "--workloads", "tiny_graph",
         *QUICK, *CPP], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        env=dict(os.environ, BACKPROP_BENCH_FAULT="check-hang:tiny_graph/engine"))
    for _ in range(600):
        pids = map(int, filter(str.isdigit, os.listdir("/proc")))
        if any(parent_of(pid) == runner.pid and b"--check_out=" in cmdline(pid) for pid in pids):
            break
        time.sleep(0.05)
    runner.send_signal(signal.SIGINT)
    runner.communicate(timeout=60)
    [folder] = run_dirs(out)
    assert (folder / "INCOMPLETE").exists()
    return folder


def files_of(folder):
    return sorted(p.relative_to(folder) for p in folder.rglob("*") if p.name != ".lock")


# A resume never deletes what a run measured. Resumed in another environment (a variable that
# changes results, here BP_SPLIT), it is refused before anything runs; resumed where a backend
# refuses its flags (a binary that does, from --bin-dir), the folder and every file in it stay,
# still INCOMPLETE; each is one line and exit 2. (Both deleted the run before.)
def test_a_refused_resume_keeps_the_run(bin_dir, tmp_path):
    folder = stopped_in_its_check(bin_dir, tmp_path / "out")
    before = files_of(folder)
    resume = [os.path.join(bin_dir, "bench_run"), "--resume", str(folder), "--no-plots"]
    r = subprocess.run(resume, capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, BP_SPLIT="elems=0"))
    assert r.returncode == 2, r.stdout + r.stderr
    assert "the environment differs from the run's (BP_SPLIT: unset then, elems=0 now)" in \
        r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 2  # the line, and where --help is
    assert files_of(folder) == before

    refusing = tmp_path / "bin"
    refusing.mkdir()
    for name in os.listdir(bin_dir):
        if name != "bench_engine" and os.access(os.path.join(bin_dir, name), os.X_OK):
            os.symlink(os.path.join(bin_dir, name), refusing / name)
    (refusing / "bench_engine").write_text("#!/bin/sh\necho 'error: --frob: refused' >&2\nexit 2\n")
    (refusing / "bench_engine").chmod(0o755)
    r = subprocess.run(resume + ["--bin-dir", str(refusing)], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "engine refused its flags: error: --frob: refused" in r.stderr, r.stderr
    assert f"{folder} is kept as it was" in r.stderr, r.stderr
    assert (folder / "INCOMPLETE").exists()
    assert set(before) <= set(files_of(folder))


@pytest.mark.parametrize("extra, message", [
    ([], "that run finished; there is nothing to resume"),
    (["--filter", "tiny"], "'--filter' cannot be added"),
])
def test_resume_refuses_what_it_cannot_do(bin_dir, tmp_path, extra, message):
    assert run(bin_dir, tmp_path, "--workloads", "tiny_graph", *QUICK, *CPP).returncode == 0
    [folder] = run_dirs(tmp_path)
    r = subprocess.run([os.path.join(bin_dir, "bench_run"), "--resume", str(folder), *extra],
                       capture_output=True, text=True)
    assert r.returncode == 2 and message in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 2  # the line, and where --help is
    r = subprocess.run([os.path.join(bin_dir, "bench_run"), "--resume", str(tmp_path / "nope")],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "no such run folder" in r.stderr


def cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read()
    except OSError:
        return b""


def is_benchmarking(pid):
    """A backend process of the bench phase (not git, not the check)."""
    return b"--benchmark_out=" in cmdline(pid)


def parent_of(pid):
    """The parent pid of a live process, None if it is gone (or a zombie)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return None if fields[0] == "Z" else int(fields[1])


# Data-parallel rows (the study ranks): a rank that dies or hangs ends its row, named, and no rank
# is left behind; the row beside it keeps its result.
def ranks_left(fault):
    """Live ranks or launchers of this test (their environment holds BACKPROP_BENCH_FAULT=fault:
    another test's may run beside it), after a few seconds for the kernel to end them (a rank goes
    when its mpirun does: PR_SET_PDEATHSIG) and for init to reap them."""
    marker = f"BACKPROP_BENCH_FAULT={fault}".encode() + b"\0"

    def ours(pid):
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                return marker in f.read()
        except OSError:
            return False
    for _ in range(30):
        out = subprocess.run(["ps", "-eo", "pid,stat,args"], capture_output=True,
                             text=True).stdout
        left = [line for line in out.splitlines()[1:] if line.split()[1][:1] != "Z" and
                ("bench_ranks" in line or "bench_libtorch --ranks" in line or
                 os.path.basename((line.split() + ["", "", ""])[2]) == "mpirun") and
                ours(int(line.split()[0]))]
        if not left:
            return []
        time.sleep(0.1)
    return left


def launcher_leftovers():
    """What launchers leave in the shared folders: Open MPI's shared memory and session folders,
    torchrun's torchelastic_* folders, the runner's data-parallel scratch."""
    found = set()
    for folder, prefixes in (("/dev/shm", ("",)),
                             ("/tmp", ("torchelastic_", "bench_run.ranks."))):
        if os.path.isdir(folder):
            found |= {f"{folder}/{n}" for n in os.listdir(folder) if n.startswith(prefixes)}
    for session in (p for p in os.listdir("/tmp") if p.startswith("ompi.")):
        found |= {f"/tmp/{session}/{n}" for n in os.listdir(f"/tmp/{session}")}
    return found


@pytest.mark.parametrize("kind", ["rank-crash", "rank-hang", "rank-stop"])
def test_a_rank_that_dies_or_hangs_ends_its_row_named(bin_dir, tmp_path, kind):
    before = launcher_leftovers()
    r = run(bin_dir, tmp_path, "--ranks", "2", "--backends", "engine,engine_ranks",
            "--workloads", "char_mlp", "--sizes", "hidden=64", "--timeout", "8", *QUICK,
            env={"BACKPROP_BENCH_FAULT": f"{kind}:char_mlp/engine_ranks"})
    assert r.returncode == 3, r.stdout + r.stderr
    rows = bench_rows(tmp_path)
    failed = rows[("engine_ranks", "char_mlp")]
    if kind == "rank-crash":  # mpirun's own words name it
        assert failed["status"] == "failed", failed
        assert "mpirun of 2 ranks: process rank 1" in failed["message"], failed["message"]
    elif kind == "rank-hang":  # each rank said where it was when the timeout came
        assert failed["status"] == "timeout", failed
        assert "rank 1: between timed steps, 3 done" in failed["message"], failed["message"]
        assert failed["wall_seconds"] < 20
    else:  # a stopped rank answers nothing: the runner saw its state, and names it, not rank 0
        assert failed["status"] == "timeout", failed
        assert "rank 1 (pid " in failed["message"] and "was stopped" in failed["message"], \
            failed["message"]
        assert "rank 0" not in failed["message"], failed["message"]
        assert failed["wall_seconds"] < 20
    assert rows[("engine", "char_mlp")]["status"] == "ok"
    assert not ranks_left(f"{kind}:char_mlp/engine_ranks")
    assert not launcher_leftovers() - before  # mpirun killed: its shared memory, its session


def test_torchrun_leaves_no_folder_behind(bin_dir, tmp_path):
    before = launcher_leftovers()
    r = run(bin_dir, tmp_path, "--study", "ranks", "--backends", "pytorch_ranks", "--workloads",
            "char_mlp", "--sizes", "hidden=64", "--check-only")
    assert r.returncode == 0, r.stdout + r.stderr
    assert not launcher_leftovers() - before


@pytest.mark.parametrize("program", ["bench_ranks", "bench_libtorch"])
def test_ranks_go_with_an_mpirun_killed_while_they_start(bin_dir, tmp_path, program):
    """mpirun killed while its ranks are still starting (libtorch's 2-3 s on a cold machine, stood
    for by the slow-start fault): the ranks go with it, asked of the kernel before any library
    started, not left to finish and write into a run that has ended."""
    launch = ["mpirun", "-n", "2", "--oversubscribe", "--bind-to", "none"]
    if os.geteuid() == 0:
        launch.append("--allow-run-as-root")
    fault = f"slow-start:{program}-{os.getpid()}"
    mpirun = subprocess.Popen(
        [*launch, os.path.join(bin_dir, program), "--ranks=2", "--instance=workload=char_mlp,size=64"],
        # a killed mpirun leaves its session folder and shared memory: in tmp_path, not /tmp
        env=dict(os.environ, BACKPROP_BENCH_FAULT=fault, TMPDIR=str(tmp_path),
                 OMPI_MCA_btl_vader_backing_directory=str(tmp_path)),
        start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(100):  # both ranks started
        if len(children_of(mpirun.pid)) >= 2:
            break
        time.sleep(0.05)
    mpirun.kill()
    mpirun.wait()
    assert not ranks_left(fault), f"{program}'s ranks outlived mpirun"


@pytest.mark.parametrize("program", ["bench_ranks", "bench_libtorch"])
def test_a_data_parallel_check_on_a_full_disk_ends_in_one_line(bin_dir, tmp_path, program):
    """Rank 0's check file on a full disk (a file-size limit) after its first record: every rank
    still makes every record (a check's steps are collective: a rank 0 that stopped left the
    other waiting in its all-reduce forever), and rank 0 says it in one line, exit 1, no file."""
    launch = ["mpirun", "-n", "2", "--oversubscribe", "--bind-to", "none"]
    if os.geteuid() == 0:
        launch.append("--allow-run-as-root")
    instance = "--instance=workload=char_mlp,size=64"
    argv = [*launch, os.path.join(bin_dir, program), "--ranks=2", instance]
    one = tmp_path / "one.json"
    subprocess.run(argv + [f"--check_out={one}"], check=True, capture_output=True, timeout=60)
    limit = one.stat().st_size - 100  # the context and most of one record

    # the ranks alone under the limit (mpirun's own shared-memory files would meet it first)
    full_disk = ["/usr/bin/python3", "-c",
                 "import os, resource, signal, sys; "
                 f"resource.setrlimit(resource.RLIMIT_FSIZE, ({limit}, {limit})); "
                 "signal.signal(signal.SIGXFSZ, signal.SIG_IGN); os.execv(sys.argv[1], sys.argv[1:])"]
    full = tmp_path / "full.json"
    ranks = argv[len(launch):]
    r = subprocess.run([*launch, "--mca", "btl", "self,tcp", *full_disk, *ranks, instance,
                        f"--check_out={full}"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0, r.stdout + r.stderr
    assert f"error: --check_out={full}: cannot write: File too large" in r.stderr, r.stderr
    assert not full.exists() and not (tmp_path / "full.json.tmp").exists()


def children_of(pid):
    """Live processes whose parent is pid."""
    kids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and parent_of(int(entry)) == pid:
            kids.append(int(entry))
    return kids


def test_torchrun_workers_go_with_a_killed_torchrun(tmp_path):
    """torchrun killed by SIGKILL (as the runner's own death takes it) while its workers start:
    they go with it, where they would have hung on in the benchmark the fault hangs."""
    script = os.path.join(os.path.dirname(__file__), "..", "..", "baselines", "pytorch",
                          "pytorch_bench.py")
    torchrun = subprocess.Popen(
        ["torchrun", "--standalone", "--redirects", "1", "--tee", "1", "--nproc_per_node=2",
         "--log_dir", str(tmp_path), script, "--ranks=2", "--data=/usr/share/dict/words",
         "--instance=workload=char_mlp,size=64"],
        env=dict(os.environ, BACKPROP_BENCH_FAULT="hang:char_mlp", TMPDIR=str(tmp_path)),
        start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    workers = []
    for _ in range(300):  # torchrun's agent starts its two workers
        workers = children_of(torchrun.pid)
        if len(workers) == 2:
            break
        time.sleep(0.05)
    assert len(workers) == 2, "torchrun started no workers"
    torchrun.kill()  # the agent alone: its workers are told nothing
    torchrun.wait()
    for _ in range(50):
        left = [w for w in workers if parent_of(w) is not None]
        if not left:
            break
        time.sleep(0.1)
    for w in left:
        os.kill(w, signal.SIGKILL)
    assert not left, "torchrun's workers outlived it"


def test_ranks_refused_in_one_line(bin_dir, tmp_path):
    for bad in ("0", "-2", "two"):
        r = run(bin_dir, tmp_path, "--ranks", bad)
        assert r.returncode == 2 and f"--ranks {bad}: expected a whole number from 1" in r.stderr
    r = run(bin_dir, tmp_path, "--ranks", "2", env={"PATH": "/nonexistent"})
    assert r.returncode == 2, r.stderr
    assert "mpirun is not installed (Debian package openmpi-bin" in r.stderr
