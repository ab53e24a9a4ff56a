"""harness/tests/test_compare.py: `bench_run compare BASELINE NEW` (harness/runner/compare.h) on real runs.

A run compared with an exact copy of itself is the same everywhere (exit 0); a run whose engine
was slowed on purpose (BACKPROP_BENCH_FAULT=slow10:..., every timed step done ten times, far
beyond what a loaded machine does to a repetition's time) is caught as
slower (exit 1); bad input (the same run twice, a missing, partial or older-format run, runs on
different machines) is one clear line and exit 2; a corrupt result file is named and skipped
while the rest is compared. Google Benchmark's own tools/compare.py reads our result files.
No assertion here is about how fast anything is, only about what compare makes of the numbers.
    /usr/bin/python3 -m pytest harness/tests/test_compare.py
"""
import json
import os
import shutil
import subprocess

import pytest

from test_run import CPP, load, run, run_dirs

QUICK = ["--repetitions", "10", "--min-time", "0.02", "--no-plots"]
GB_COMPARE = "/usr/share/benchmark/compare.py"  # Debian's libbenchmark-tools


def compare(bin_dir, *args, out):
    return subprocess.run([os.path.join(bin_dir, "bench_run"), "compare", *map(str, args),
                           "--out", str(out)], capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def one_run(bin_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("runs")
    r = run(bin_dir, out, "--workloads", "tiny_graph,small_graph,mlp_width", "--sizes", "width=16",
            *QUICK, *CPP)
    assert r.returncode == 0, r.stdout + r.stderr
    return run_dirs(out)[0]


def copy_of(run_dir, tmp_path, name="copy"):
    """The run under another id: what compare sees is the same numbers from a different run."""
    dest = tmp_path / name
    shutil.copytree(run_dir, dest)
    summary = load(dest / "summary.json")
    summary["run_id"] = name
    (dest / "summary.json").write_text(json.dumps(summary))
    return dest


def edit_summary(run_dir, change):
    summary = load(run_dir / "summary.json")
    change(summary)
    (run_dir / "summary.json").write_text(json.dumps(summary))


def test_a_run_against_a_copy_of_itself_is_the_same_everywhere(bin_dir, one_run, tmp_path):
    r = compare(bin_dir, one_run, copy_of(one_run, tmp_path), out=tmp_path / "cmp")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "OK: 6 benchmarks in both runs: 6 same" in r.stdout, r.stdout
    report = load(next((tmp_path / "cmp").glob("*-vs-copy.json")))
    assert all(row["verdict"] == "same" and row["ratio"] == 1 for row in report["rows"])
    assert next((tmp_path / "cmp").glob("*-vs-copy.png")).stat().st_size > 10_000


def test_a_slowed_engine_is_caught(bin_dir, one_run, tmp_path):
    r = run(bin_dir, tmp_path / "slow", "--workloads", "tiny_graph,small_graph,mlp_width",
            "--sizes", "width=16", *QUICK, *CPP,
            env={"BACKPROP_BENCH_FAULT": "slow10:small_graph/engine"})
    assert r.returncode == 0, r.stdout + r.stderr
    r = compare(bin_dir, one_run, run_dirs(tmp_path / "slow")[0], out=tmp_path / "cmp")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "SLOWER:" in r.stdout
    # the sides named for what they are: the new run (the slowed one) is the slower
    assert f"compare baseline {load(one_run / 'summary.json')['run_id']}" in r.stdout
    assert "with new run " in r.stdout and "change = new / baseline" in r.stdout
    [line] = [l for l in r.stdout.splitlines() if l.startswith("grad/small_graph engine")]
    assert line.endswith("slower"), line
    report = load(next((tmp_path / "cmp").glob("*.json")))
    [row] = [x for x in report["rows"] if x["instance"] == "grad/small_graph"
             and x["backend"] == "engine"]
    assert row["ratio_interval"][0] > 1.1, row  # ten times the work: far beyond the threshold


def test_a_benchmark_that_broke_fails_the_gate(bin_dir, one_run, tmp_path):
    b = copy_of(one_run, tmp_path)

    def break_one(s):
        cell = s["rows"][1]["backends"]["compiled"]
        cell.update(status="failed", message="exit code 1 (see logs/x.log)")
    edit_summary(b, break_one)
    r = compare(bin_dir, one_run, b, out=tmp_path / "cmp")
    assert r.returncode == 1 and "1 broken" in r.stdout, r.stdout


def test_a_corrupt_result_file_is_named_and_skipped(bin_dir, one_run, tmp_path):
    b = copy_of(one_run, tmp_path)
    victim = b / load(b / "summary.json")["rows"][0]["backends"]["engine"]["file"]
    victim.write_text(victim.read_text()[:200])  # cut short, as by a full disk
    r = compare(bin_dir, one_run, b, out=tmp_path / "cmp")
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"unreadable, skipped: {victim}" in r.stdout, r.stdout
    assert "5 same, 1 not compared; 1 result file(s) unreadable, skipped" in r.stdout, r.stdout


@pytest.mark.parametrize("case, message", [
    ("same", "the baseline and the new run are the same run"),
    ("missing", "no such run folder"),
    ("partial", "the run is incomplete (interrupted or still running); finish it first"),
    ("format1", "written in result format 1, and this bench_run reads format 2"),
    ("machine", "the runs differ in what their numbers depend on (cpu_family: {family} vs 1"),
    ("force-in-make", "add --force (make compare ... FORCE=1) to compare anyway"),
    ("options", "option repetitions: 10 vs 12"),
    ("precision", 'option precision: "fp32" vs "bf16"'),
    ("one", "compare: needs two runs, a baseline and a new one (given 1)"),
    ("bad-summary", "summary.json: unreadable"),
])
def test_bad_input_is_one_clear_line(bin_dir, one_run, tmp_path, case, message):
    b = copy_of(one_run, tmp_path)
    args = [one_run, b]
    if case == "same":
        args = [one_run, one_run]
    elif case == "missing":
        args = [one_run, tmp_path / "nothing-here"]
    elif case == "partial":
        (b / "INCOMPLETE").write_text("interrupted\n")
    elif case == "format1":
        edit_summary(b, lambda s: s.pop("format_version"))
    elif case in ("machine", "force-in-make"):
        edit_summary(b, lambda s: s["machine"]["environment"].update(cpu_family="1"))
    elif case == "options":
        edit_summary(b, lambda s: s["options"].update(repetitions=12))
    elif case == "precision":  # an fp32 run against a bf16 one is no regression to report
        edit_summary(b, lambda s: s["options"].update(precision="bf16"))
    elif case == "one":
        args = [one_run]
    elif case == "bad-summary":
        (b / "summary.json").write_text('{"rows": [')
    r = compare(bin_dir, *args, out=tmp_path / "cmp")
    assert r.returncode == 2, r.stdout + r.stderr
    lines = r.stderr.strip().splitlines()
    family = load(one_run / "summary.json")["machine"]["environment"]["cpu_family"]
    assert len(lines) == 2 and message.format(family=family) in lines[0], r.stderr


# A run copied as it is (its run id too) is the same run, not a comparison that finds nothing.
def test_a_plain_copy_is_the_same_run(bin_dir, one_run, tmp_path):
    plain = tmp_path / "plain-copy"
    shutil.copytree(one_run, plain)
    r = compare(bin_dir, one_run, plain, out=tmp_path / "cmp")
    assert r.returncode == 2 and "the baseline and the new run are the same run" in r.stderr, \
        r.stdout + r.stderr
    assert "is a copy of" in r.stderr and not (tmp_path / "cmp").exists()


# --out must be a folder; an earlier comparison's files are never overwritten.
def test_out_is_a_folder_and_nothing_is_overwritten(bin_dir, one_run, tmp_path):
    b = copy_of(one_run, tmp_path)
    a_file = tmp_path / "a-file"
    a_file.write_text("mine\n")
    r = compare(bin_dir, one_run, b, out=a_file)
    assert r.returncode == 2 and f"--out {a_file}: is a file" in r.stderr, r.stdout + r.stderr
    assert a_file.read_text() == "mine\n"
    r = compare(bin_dir, one_run, b, out="")
    assert r.returncode == 2 and "--out '': name a folder" in r.stderr, r.stdout + r.stderr
    for _ in range(2):  # the second comparison of the same two ids gets a name of its own
        assert compare(bin_dir, one_run, b, "--no-plots", out=tmp_path / "cmp").returncode == 0
    assert sorted(p.name for p in (tmp_path / "cmp").glob("*.txt")) == [
        f"{load(one_run / 'summary.json')['run_id']}-vs-copy-2.txt",
        f"{load(one_run / 'summary.json')['run_id']}-vs-copy.txt"]


# The same processor model on another host: a hypervisor's flag and the kernel's release differ.
# Neither changes a step's cost: they are said, and no --force is needed.
def test_differences_that_only_inform_need_no_force(bin_dir, one_run, tmp_path):
    b = copy_of(one_run, tmp_path)
    def other_host(s):
        env = s["machine"]["environment"]
        env["cpu_flags"] += " some_hypervisor_flag"
        env["kernel"] = "9.9.9 #1 SMP"
    edit_summary(b, other_host)
    r = compare(bin_dir, one_run, b, "--no-plots", out=tmp_path / "cmp")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "note: the runs differ, which changes no step's cost: cpu_flags" in r.stdout
    assert "kernel: " in r.stdout and "9.9.9" in r.stdout


# What only one run holds is counted in one line, and a run kept as its summary alone (the
# curated reference) is compared from the repetitions summary.json holds.
def test_only_what_both_hold_is_compared_and_a_summary_alone_suffices(bin_dir, one_run, tmp_path):
    b = copy_of(one_run, tmp_path)
    edit_summary(b, lambda s: s["rows"].pop(0))  # tiny_graph only in A
    for backend in ("engine", "compiled"):
        shutil.rmtree(b / backend)  # result files gone: the summary is all B keeps
    r = compare(bin_dir, one_run, b, "--no-plots", out=tmp_path / "cmp")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "not compared: 2 benchmark(s) only in the baseline, 0 only in the new run" in r.stdout, \
        r.stdout
    assert "not in the new run:" not in r.stdout and "OK: 4 benchmarks in both runs: 4 same" in r.stdout


# Two runs of other workloads have nothing to compare: no "OK" for a gate to pass on, exit 2.
def test_runs_with_nothing_in_common_have_no_verdict(bin_dir, one_run, tmp_path):
    b = copy_of(one_run, tmp_path)
    edit_summary(b, lambda s: [row.update(workload=row["workload"] + "_other",
                                          instance=row["instance"] + "_other")
                               for row in s["rows"]])
    for backend in ("engine", "compiled"):
        shutil.rmtree(b / backend)
    r = compare(bin_dir, one_run, b, "--no-plots", out=tmp_path / "cmp")
    assert r.returncode == 2, r.stdout + r.stderr
    assert "NOTHING COMPARED: 0 benchmarks in both runs" in r.stdout, r.stdout
    assert "OK" not in r.stdout, r.stdout
    assert r.stderr.count("\n") == 1 and "hold no benchmark in common" in r.stderr, r.stderr


def test_different_machines_compare_with_force_and_say_so(bin_dir, one_run, tmp_path):
    b = copy_of(one_run, tmp_path)
    edit_summary(b, lambda s: s["machine"]["environment"].update(cpu_stepping="9"))
    r = compare(bin_dir, one_run, b, "--force", out=tmp_path / "cmp")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "warning (--force): the runs differ: cpu_stepping:" in r.stdout, r.stdout


@pytest.mark.skipif(not os.path.exists(GB_COMPARE), reason="libbenchmark-tools not installed")
def test_google_benchmarks_compare_reads_our_files(bin_dir, one_run, tmp_path):
    b = copy_of(one_run, tmp_path)
    for backend in ("engine", "compiled"):
        name = load(one_run / "summary.json")["rows"][1]["backends"][backend]["file"]
        r = subprocess.run(["/usr/bin/python3", GB_COMPARE, "benchmarks", one_run / name, b / name],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr
        assert f"grad/small_graph/{backend}/threads:1" in r.stdout, r.stdout
