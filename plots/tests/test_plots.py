"""plots/tests/test_plots.py: plot.py on fixture_run/, a real short bench_run run (sizes 10-1000,
3 repetitions) in which libtorch's scalar_chain/nodes:1000 was made to crash on purpose
(BACKPROP_BENCH_FAULT), so the failed path is drawn too.
    /usr/bin/python3 -m pytest plots/tests
"""
import os
import shutil
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import plot  # noqa: E402

FIXTURE = os.path.join(HERE, "fixture_run")


@pytest.fixture
def run_copy(tmp_path):
    dst = tmp_path / "run"
    shutil.copytree(FIXTURE, dst, ignore=shutil.ignore_patterns("plots"))
    return str(dst)


def test_load_run_reads_every_benchmark_process():
    run = plot.load_run(FIXTURE)
    assert plot.backends_of(run) == ["engine", "libtorch"]
    assert len(run["rows"]) == 12  # 6 instances x 2 backends
    ok = [r for r in run["rows"] if r["status"] == "ok"]
    assert len(ok) == 11
    for r in ok:
        assert r["median_seconds"] > 0 and r["process_peak_rss_bytes"] > 1e6
    failed = [r for r in run["rows"] if r["status"] != "ok"]
    assert [(r["backend"], r["instance"]) for r in failed] == [
        ("libtorch", "grad/scalar_chain/nodes:1000")]
    assert run["context"]["libtorch"]["threads"] == "1"


def test_speedups_are_ratios_of_the_medians_and_skip_failures():
    run = plot.load_run(FIXTURE)
    rows = {(r["instance"], r["backend"]): r for r in run["rows"]}
    sp = dict(plot.speedups(run)["libtorch"])
    assert "grad/scalar_chain/nodes:1000" not in sp and "grad/empty" not in sp
    tiny = rows[("grad/tiny_graph", "libtorch")]["median_seconds"] / rows[
        ("grad/tiny_graph", "engine")]["median_seconds"]
    assert sp["grad/tiny_graph"] == pytest.approx(tiny)
    assert sp["grad/tiny_graph"] > 1  # the fixture's real numbers: our engine is faster


def test_parse_name_matches_harness_names():
    p = plot.parse_name("grad/scalar_chain/engine/nodes:1000/threads:1")
    assert p["instance"] == "grad/scalar_chain/nodes:1000" and p["keys"]["nodes"] == "1000"
    with pytest.raises(plot.RunError):
        plot.parse_name("not-a-name")


def test_main_writes_every_figure(run_copy):
    assert plot.main(["plot.py", run_copy]) == 0
    for name in plot.FIGURES:
        path = os.path.join(run_copy, "plots", name)
        assert os.path.getsize(path) > 10_000, name
        with open(path, "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n"


def test_chain_figure_has_one_line_per_backend():
    fig = plot.chain_figure(plot.load_run(FIXTURE))
    lines = fig.axes[0].lines
    assert [l.get_label() for l in lines] == ["engine", "libtorch"]
    assert len(lines[0].get_xdata()) == 3 and len(lines[1].get_xdata()) == 2  # one crashed


def test_missing_run_is_a_clear_error(tmp_path, capsys):
    assert plot.main(["plot.py", str(tmp_path / "nope")]) == 2
    assert "processes.json not found" in capsys.readouterr().err
