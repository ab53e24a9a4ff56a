"""harness/tests/test_audit.py: the defects an outside audit of the runner found, one test each.

Two resumes of one run at once; a memory estimate from a probe that itself ran out of memory; a
compiled probe writing into the current directory; a backend that cannot start under a small
--memory-limit; `--resume ''`; a check record that is not JSON; a corpus from /proc; a run made
by another user; Ctrl-C during the check; a runner killed during its memory probes. Each of
these failed before it was fixed. (compare's are in test_compare.py, the report's in
plots/tests/test_report.py, the budget flag's in test_run.py.)
    /usr/bin/python3 -m pytest harness/tests/test_audit.py
"""
import os
import pathlib
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time

import pytest

from test_faults import cmdline, parent_of
from test_run import CPP, QUICK, cells, load, run, run_dirs


def bench_run(bin_dir, *args, **kwargs):
    return subprocess.Popen([os.path.join(bin_dir, "bench_run"), *map(str, args)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kwargs)


def wait_for_child(runner, text, seconds=60):
    """The pid of a child of `runner` whose command line holds `text`, once it runs."""
    for _ in range(int(seconds / 0.05)):
        for pid in map(int, filter(str.isdigit, os.listdir("/proc"))):
            if parent_of(pid) == runner.pid and text.encode() in cmdline(pid):
                return pid
        time.sleep(0.05)
    runner.kill()
    pytest.fail(f"no child of bench_run ran {text}")


def interrupted_run(bin_dir, out):
    """A run interrupted in its benchmarks, to resume."""
    runner = bench_run(bin_dir, "--out", out, "--workloads", "tiny_graph,small_graph", *QUICK,
                       *CPP, env=dict(os.environ, BACKPROP_BENCH_FAULT="hang:small_graph/engine"))
    wait_for_child(runner, "--benchmark_out=" + str(out))
    wait_for_child(runner, "small_graph/engine")
    runner.send_signal(signal.SIGINT)
    runner.communicate(timeout=60)
    assert runner.returncode == 130
    [folder] = run_dirs(out)
    return folder


# A second --resume of a run that one is resuming is refused: two would tear each other's files.
def test_two_resumes_of_one_run_are_not_run_at_once(bin_dir, tmp_path):
    folder = interrupted_run(bin_dir, tmp_path)
    first = bench_run(bin_dir, "--resume", folder, "--no-plots",
                      env=dict(os.environ, BACKPROP_BENCH_FAULT="hang:small_graph/engine"))
    wait_for_child(first, "small_graph/engine")  # it holds the run
    second = subprocess.run([os.path.join(bin_dir, "bench_run"), "--resume", str(folder)],
                            capture_output=True, text=True, timeout=60)
    assert second.returncode == 2, second.stdout + second.stderr
    assert "another bench_run is writing this run" in second.stderr, second.stderr
    first.send_signal(signal.SIGINT)
    first.communicate(timeout=60)
    assert (folder / "INCOMPLETE").exists(), "the run stays resumable"
    third = subprocess.run([os.path.join(bin_dir, "bench_run"), "--resume", str(folder),
                            "--no-plots"], capture_output=True, text=True, timeout=300)
    assert third.returncode == 0, third.stdout + third.stderr
    assert all(c["status"] == "ok" for c in cells(tmp_path).values())


# A probe that ran out of memory proves its size does not fit: a larger one is refused, not
# estimated from a peak the limit capped (that estimate let width 2100 run, and die).
def test_a_probe_that_ran_out_of_memory_refuses_the_size(bin_dir, tmp_path):
    r = run(bin_dir, tmp_path, "--workloads", "mlp_width", "--sizes", "width=2100",
            "--backends", "engine", "--memory-limit", "64M", "--check-only")
    assert "a smaller size ran out of memory: width=2048: out of memory" in r.stdout, r.stdout
    [folder] = run_dirs(tmp_path)
    [estimate] = load(folder / "processes.json")["memory_estimates"]
    assert estimate["not_run"] is True and "its probe at width=2048" in estimate["how"]
    assert not (folder / "check" / "engine.json").exists(), "nothing was run at width 2100"


# The memory probes of a backend that shares kernel verdicts, or keeps plans (a warm start),
# write them into their scratch folder, never into the directory bench_run was started from.
def test_probes_write_nothing_into_the_current_directory(bin_dir, tmp_path):
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    r = subprocess.run([os.path.join(bin_dir, "bench_run"), "--out", str(tmp_path / "out"),
                        "--workloads", "mlp_width", "--sizes", "width=2049", "--backends",
                        "compiled,compiled_warm_start", "--check-only"], cwd=cwd,
                       capture_output=True, text=True, timeout=300)
    assert "memory estimate: step/mlp_width/width:2049 on compiled: about" in r.stdout, r.stdout
    assert "width:2049 on compiled_warm_start: about" in r.stdout, r.stdout
    assert os.listdir(cwd) == [], os.listdir(cwd)


# A backend that cannot even start under the memory limit (the loader cannot map libtorch, Python
# cannot import torch) is out of memory, not "exit code 127".
def test_a_backend_that_cannot_start_under_the_limit_is_out_of_memory(bin_dir, tmp_path):
    r = run(bin_dir, tmp_path, "--workloads", "tiny_graph", "--backends", "libtorch,pytorch",
            "--memory-limit", "64M", *QUICK)
    assert r.returncode == 3, r.stdout + r.stderr
    check = {c["backend"]: c for c in load(run_dirs(tmp_path)[0] / "check.json")["results"]}
    for b in ("libtorch", "pytorch"):
        assert check[b]["status"] == "out_of_memory", check[b]
        assert "could not start under the memory limit of 67.1 MB" in check[b]["message"]
        assert "exit code" not in check[b]["message"]
    assert "out of mem" in (run_dirs(tmp_path)[0] / "summary.txt").read_text()


def test_resume_of_nothing_is_one_line(bin_dir):
    r = subprocess.run([os.path.join(bin_dir, "bench_run"), "--resume", ""], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 2, r.returncode
    assert r.stderr.startswith("error: --resume needs a value") and len(r.stderr.splitlines()) == 2


# A check record that is not JSON (a bare NaN) names the parse error instead of "not reported".
def test_a_check_record_that_is_not_json_is_named(bin_dir, tmp_path):
    fake = tmp_path / "bin"
    fake.mkdir()
    shutil.copy(os.path.join(bin_dir, "bench_run"), fake / "bench_run")
    backend = fake / "bench_engine"
    backend.write_text(f"""#!{sys.executable}
import sys
import tempfile
flags = dict(a.split("=", 1) for a in sys.argv[1:] if a.startswith("--") and "=" in a)
name = dict(f.split("=", 1) for f in flags["--instance"].split(","))["name"]
with open(flags["--check_out"], "w") as f:
    f.write('{{"context": {{}},\\n "records": [\\n  {{"name": "' + name + '", "status": "ok", '
            '"step": {{"value": NaN, "grads": [1, 2]}}}}\\n]}}\\n')
""")
    backend.chmod(backend.stat().st_mode | stat.S_IEXEC)
    r = subprocess.run([str(fake / "bench_run"), "--out", str(tmp_path / "out"), "--workloads",
                        "tiny_graph", "--backends", "engine", "--check-only", "--bin-dir",
                        str(fake)], capture_output=True, text=True, timeout=60)
    assert "its check record is not valid JSON" in r.stdout, r.stdout
    assert "not reported" not in r.stdout


# A corpus that a file system generates as it is read (/proc) claims no size: it is read whole.
def test_a_corpus_from_proc_is_read(bin_dir, tmp_path):
    r = run(bin_dir, tmp_path, "--workloads", "char_mlp", "--sizes", "hidden=64", "--backends",
            "engine,libtorch", "--data", "/proc/cpuinfo", "--check-only")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "empty" not in r.stdout + r.stderr


# Run by another user than the tree's owner, git still reads the tree: the run id keeps its sha.
@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"),
                    reason="needs root, to run as another user")
def test_a_run_by_another_user_keeps_its_git_sha(bin_dir):
    out = pathlib.Path(tempfile.mkdtemp(prefix="bench_run-other-user-"))
    out.chmod(0o777)  # where the other user can write
    r = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                        os.path.join(bin_dir, "bench_run"), "--out", str(out), "--workloads",
                        "tiny_graph", "--backends", "engine", "--check-only"],
                       capture_output=True, text=True, timeout=120, env=dict(os.environ, HOME="/"))
    assert r.returncode == 0, r.stdout + r.stderr
    [folder] = run_dirs(out)
    shutil.rmtree(out)
    assert not folder.name.endswith("nogit"), folder.name


# Ctrl-C during the check still writes the summary, the rest marked interrupted.
def test_ctrl_c_during_the_check_writes_the_summary(bin_dir, tmp_path):
    runner = bench_run(bin_dir, "--out", tmp_path, "--workloads", "tiny_graph", *QUICK, *CPP,
                       env=dict(os.environ, BACKPROP_BENCH_FAULT="check-hang:tiny_graph/compiled"))
    wait_for_child(runner, "--check_out=")
    wait_for_child(runner, "bench_compiled")
    runner.send_signal(signal.SIGINT)
    _, err = runner.communicate(timeout=60)
    assert runner.returncode == 130, err
    [folder] = run_dirs(tmp_path)
    text = (folder / "summary.txt").read_text()
    assert "interrupted" in text and (folder / "INCOMPLETE").exists()
    summary = load(folder / "summary.json")
    assert {c["status"] for row in summary["rows"] for c in row["backends"].values()} == {
        "interrupted"}


# A runner killed outright while its memory probes run leaves their scratch folder behind; the
# next run removes it (its owner is gone).
def test_a_killed_runners_probe_folder_is_removed_by_the_next_run(bin_dir, tmp_path):
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = dict(os.environ, TMPDIR=str(scratch), BACKPROP_BENCH_FAULT="check-hang:probe")
    runner = bench_run(bin_dir, "--out", tmp_path / "out", "--workloads", "mlp_width", "--sizes",
                       "width=2049", "--backends", "engine", "--check-only", env=env)
    wait_for_child(runner, "name=probe")
    runner.kill()
    runner.communicate(timeout=60)
    left = [p.name for p in scratch.iterdir()]
    assert left and left[0].startswith("bench_run.memory."), left
    r = subprocess.run([os.path.join(bin_dir, "bench_run"), "--out", str(tmp_path / "out2"),
                        "--workloads", "tiny_graph", "--backends", "engine", "--check-only"],
                       capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, TMPDIR=str(scratch)))
    assert r.returncode == 0, r.stdout + r.stderr
    assert list(scratch.iterdir()) == []
