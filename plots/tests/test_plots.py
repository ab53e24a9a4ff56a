"""plots/tests/test_plots.py: plot.py on fixture_run/, a real short bench_run run (empty, tiny_graph,
small_graph, scalar_chain at 10-1000 nodes, mini_gpt at batch 1-2, mlp_width at width 16-256,
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
    assert len(run["rows"]) == 22  # 11 instances x 2 backends
    ok = [r for r in run["rows"] if r["status"] == "ok"]
    assert len(ok) == 21
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


FIGURES = ["runtime_grad.png", "memory_grad.png", "speedup_grad.png", "runtime_step.png",
           "memory_step.png", "speedup_step.png", "scalar_chain.png", "mini_gpt_batch.png",
           "mlp_width.png", "loss_curves.png"]


def test_main_writes_every_figure(run_copy, capsys):
    assert plot.main(["plot.py", run_copy]) == 0
    assert sorted(os.listdir(os.path.join(run_copy, "plots"))) == sorted(FIGURES)
    for name in FIGURES:
        path = os.path.join(run_copy, "plots", name)
        assert os.path.getsize(path) > 10_000, name
        with open(path, "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    assert "mlp_width crossover vs libtorch:" in capsys.readouterr().out


def test_figures_are_only_drawn_for_data_the_run_has():
    run = plot.load_run(FIXTURE)
    scalar_only = dict(run, rows=[r for r in run["rows"] if r["phase"] == "grad"], losses={})
    assert sorted(plot.figures(scalar_only)) == ["memory_grad.png", "runtime_grad.png",
                                                 "scalar_chain.png", "speedup_grad.png"]


def test_crossover_is_the_width_from_which_the_baseline_stays_faster():
    def row(backend, width, seconds):
        return {"backend": backend, "workload": "mlp_width", "status": "ok",
                "keys": {"width": str(width)}, "median_seconds": seconds}
    times = {16: (1, 5), 32: (2, 5), 64: (9, 5), 128: (3, 4), 256: (20, 10)}  # engine, libtorch
    run = {"rows": [row(b, w, t[i]) for w, t in times.items()
                    for i, b in enumerate(["engine", "libtorch"])]}
    assert plot.crossovers(run) == {"libtorch": (256, 256)}  # 64 was a blip: 128 is ours again
    run["rows"] = [r for r in run["rows"] if r["keys"]["width"] != "256"]
    assert plot.crossovers(run) == {"libtorch": (None, 128)}
    assert plot.crossover_text(run) == [
        "mlp_width crossover vs libtorch: none up to 128 (our engine is faster at every width)"]


def test_loss_curves_come_from_the_check_of_every_backend():
    run = plot.load_run(FIXTURE)
    curves = {b: c["step/mini_gpt/batch:1"] for b, c in run["losses"].items()}
    assert sorted(curves) == ["engine", "libtorch"] and len(curves["engine"]) == 50
    assert curves["engine"] == pytest.approx(curves["libtorch"], rel=2e-3)


def test_chain_figure_has_one_line_per_backend():
    fig = plot.chain_figure(plot.load_run(FIXTURE))
    lines = fig.axes[0].lines
    assert [l.get_label() for l in lines] == ["engine", "libtorch"]
    assert len(lines[0].get_xdata()) == 3 and len(lines[1].get_xdata()) == 2  # one crashed


def test_phases_are_split():
    run = plot.load_run(FIXTURE)
    assert {r["instance"] for r in plot.phase_of(run, "step")["rows"]} == {
        "step/mini_gpt/batch:1", "step/mini_gpt/batch:2", "step/mlp_width/width:16",
        "step/mlp_width/width:64", "step/mlp_width/width:256"}


def test_missing_run_is_a_clear_error(tmp_path, capsys):
    assert plot.main(["plot.py", str(tmp_path / "nope")]) == 2
    assert "processes.json not found" in capsys.readouterr().err
