"""plots/tests/test_plots.py: plot.py's choices on summaries built here, each to exercise one:
the reference comes from the run (no engine: the speedups are over libtorch, not empty), a
benchmark that did not run is labelled rather than dropped, the crossovers are the runner's,
legends and notes never sit on the data, an unverified number is drawn as such, and a folder
without summary.json, or with a corrupt one, is a clear error.
The figures of a fresh real run of every backend are drawn and checked by harness/tests/.
    /usr/bin/python3 -m pytest plots/tests
"""
import json
import os
import sys

import matplotlib.container
import matplotlib.pyplot as plt
import matplotlib.transforms
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import plot  # noqa: E402


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def cell(seconds, ref_seconds, status="ok", losses=None):
    c = {"status": status, "median_seconds": seconds if status == "ok" else None,
         "ratio_to_reference": seconds / ref_seconds if status == "ok" and ref_seconds else None,
         "max_rss_bytes": 5e6, "peak_rss_bytes": 4e6, "items_per_second": None, "file": "f.json"}
    if status != "ok":
        c["message"] = "killed by signal 6"
    if losses:
        c["check_losses"] = losses
    return c


def summary(times, backends, crossovers=()):
    """times: {instance: {backend: seconds or a status}}, in summary.json's shape; the reference
    is the first backend, as the runner makes it."""
    ref = backends[0]
    rows = []
    for instance, by_backend in times.items():
        phase, workload, *rest = instance.split("/")
        key, size = rest[0].split(":") if rest else ("", 0)
        ref_s = by_backend.get(ref) if isinstance(by_backend.get(ref), float) else None
        rows.append({"instance": instance, "phase": phase, "workload": workload, "size_key": key,
                     "size": int(size), "backends": {
                         b: cell(t, ref_s) if isinstance(t, float) else cell(1.0, ref_s, status=t)
                         for b, t in by_backend.items()}})
    main = ["engine", "compiled", "libtorch", "pytorch", "torchscript"]  # as the runner marks them
    styles = {b: {"color": f"#{(37 * i) % 256:02x}60a0", "marker": "os^v*"[i % 5], "main": b in main}
              for i, b in enumerate(backends)}
    return {"run_id": "test-run", "reference": ref, "backends": backends, "backend_styles": styles,
            "threads": {b: 1 for b in backends}, "rows": rows, "crossovers": list(crossovers),
            "machine": {"cpu_model": "Test CPU", "cpus": 2, "git_sha": "abc1234"}}


def write(tmp_path, s):
    (tmp_path / "summary.json").write_text(json.dumps(s))
    return plot.load_run(str(tmp_path))


FOUR = ["engine", "libtorch", "pytorch", "torchscript"]
TIMES = {
    "grad/empty": {b: 1e-9 for b in FOUR},
    "grad/tiny_graph": {"engine": 4e-8, "libtorch": 3e-5, "pytorch": 3e-5, "torchscript": 3e-5},
    "grad/scalar_chain/nodes:10": {"engine": 1e-7, "libtorch": 4e-5, "pytorch": 4e-5,
                                   "torchscript": 4e-5},
    "grad/scalar_chain/nodes:100": {"engine": 1e-6, "libtorch": "failed", "pytorch": 4e-4,
                                    "torchscript": 4e-4},
    "step/mlp_width/width:16": {"engine": 5e-6, "libtorch": 5e-5, "pytorch": 7e-5,
                                "torchscript": 8e-5},
    "step/mlp_width/width:2048": {"engine": 1.2e-2, "libtorch": 1.0e-2, "pytorch": 1.5e-2,
                                  "torchscript": 1.6e-2},
}


def test_every_figure_for_a_run_of_four_backends(tmp_path, capsys):
    s = summary(TIMES, FOUR, [{"workload": "mlp_width", "size_key": "width", "baseline": "libtorch",
                               "from": 2048, "largest": 2048}])
    s["rows"][4]["backends"]["engine"]["check_losses"] = [4.0, 3.5, 3.0]
    write(tmp_path, s)
    assert plot.main(["plot.py", str(tmp_path)]) == 0
    drawn = sorted(os.listdir(tmp_path / "plots"))
    assert drawn == sorted(["speedup.png", "time.png", "memory.png", "model_sizes.png",
                            "scalar_chain.png"])
    assert "plots:" in capsys.readouterr().out


def test_the_reference_is_the_runs_not_always_engine(tmp_path):
    times = {i: {b: t for b, t in by.items() if b != "engine"} for i, by in TIMES.items()}
    run = write(tmp_path, summary(times, ["libtorch", "pytorch", "torchscript"]))
    fig = plot.speedup_figure(run)
    assert any(ax.lines for ax in fig.axes), "without the engine the speedups are over libtorch"
    assert "libtorch" in fig._suptitle.get_text() and "engine" not in fig._suptitle.get_text()
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["pytorch", "torchscript"]


def test_a_benchmark_that_did_not_run_is_labelled(tmp_path):
    run = write(tmp_path, summary(TIMES, FOUR))
    fig = plot.time_figure(run)
    labels = [t.get_text().strip() for ax in fig.axes for t in ax.texts if t.get_gid() == "status"]
    assert "failed" in labels


def test_crossover_note_comes_from_the_summary(tmp_path):
    crossovers = [{"workload": "mlp_width", "size_key": "width", "baseline": "libtorch",
                   "from": 2048, "largest": 2048},
                  {"workload": "mlp_width", "size_key": "width", "baseline": "pytorch",
                   "from": None, "largest": 2048}]
    run = write(tmp_path, summary(TIMES, FOUR, crossovers))
    assert plot.crossover_lines(run, "mlp_width") == [
        "libtorch faster than engine from width 2048",
        "pytorch: no crossover up to width 2048 (engine faster at every size)"]
    fig = plot.model_sizes_figure(run)
    notes = " ".join(t.get_text() for t in fig.texts)
    assert "libtorch faster than engine from width 2048" in notes, notes


def test_loss_curves_come_from_the_check(tmp_path):
    s = summary({"step/mini_gpt/batch:8": {b: 1e-3 for b in FOUR}}, FOUR)
    for j, b in enumerate(FOUR):
        s["rows"][0]["backends"][b]["check_losses"] = [4.0 - 0.1 * k + 1e-6 * j for k in range(50)]
    run = write(tmp_path, s)
    fig = plot.loss_figure(run)
    lines = fig.axes[0].lines
    assert [l.get_label() for l in lines] == FOUR and len(lines[0].get_xdata()) == 50


def overlaps(a, b, slack=0.5):
    return (a.x0 + slack < b.x1 and b.x0 + slack < a.x1 and a.y0 + slack < b.y1
            and b.y0 + slack < a.y1)


def assert_nothing_covers_data(fig):
    """Legends and figure notes lie outside every axes' plotting area."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    areas = [ax.get_window_extent(renderer) for ax in fig.axes if ax.get_visible()]
    boxes = [t.get_window_extent(renderer) for t in fig.texts]
    boxes += [ax.get_legend().get_window_extent(renderer) for ax in fig.axes if ax.get_legend()]
    boxes += [leg.get_window_extent(renderer) for leg in fig.legends]
    for box in boxes:
        for area in areas:
            assert not overlaps(box, area), (box, area)


def drawn_texts(fig):
    """Every text the figure draws, with its extent: titles, labels, tick labels in view, value
    labels, notes, legend entries."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    texts = list(fig.texts) + ([fig._suptitle] if fig._suptitle else [])
    for leg in fig.legends + [ax.get_legend() for ax in fig.axes if ax.get_legend()]:
        texts += leg.get_texts()
    out = []
    for ax in fig.axes:
        if not ax.get_visible():
            continue
        area = ax.get_window_extent(renderer)
        texts += [ax.title, ax._left_title, ax._right_title, ax.xaxis.label, ax.yaxis.label]
        texts += ax.texts
        for t in ax.xaxis.get_ticklabels(which="both") + ax.yaxis.get_ticklabels(which="both"):
            box = t.get_window_extent(renderer)  # a tick out of view draws nothing
            if t.get_visible() and t.get_text() and (
                    area.x0 - 2 <= (box.x0 + box.x1) / 2 <= area.x1 + 2
                    or area.y0 - 2 <= (box.y0 + box.y1) / 2 <= area.y1 + 2):
                out.append((t, box))
    out += [(t, t.get_window_extent(renderer)) for t in texts
            if t.get_visible() and t.get_text().strip()]
    return out, renderer


def data_boxes(ax, renderer):
    """The data of one axes as display boxes: every marker, every error bar's segment."""
    boxes = []
    for line in ax.lines:
        xy = line.get_transform().transform(line.get_xydata())
        size = max(line.get_markersize(), 1) * fig_dpi(ax) / 72 / 2
        for x, y in xy:
            boxes.append(matplotlib.transforms.Bbox([[x - size, y - size], [x + size, y + size]]))
    for coll in ax.collections:
        for seg in getattr(coll, "get_segments", lambda: [])():
            xy = coll.get_transform().transform(seg)
            boxes.append(matplotlib.transforms.Bbox([xy.min(axis=0), xy.max(axis=0)]))
    boxes += [p.get_window_extent(renderer) for p in ax.patches]
    return boxes


def fig_dpi(ax):
    return ax.figure.dpi


def assert_no_text_overlaps(fig):
    """No two texts of the figure intersect, every text lies within the figure, and no value or
    status label lies on a point, an error bar or a bar of its axes."""
    texts, renderer = drawn_texts(fig)
    page = fig.bbox
    seen = set()
    for i, (a, box_a) in enumerate(texts):
        assert (box_a.x0 >= page.x0 - 1 and box_a.x1 <= page.x1 + 1 and box_a.y0 >= page.y0 - 1
                and box_a.y1 <= page.y1 + 1), f"past the figure's edge: {a.get_text()!r}"
        for b, box_b in texts[i + 1:]:
            if a is b or (id(a), id(b)) in seen:
                continue
            seen.add((id(a), id(b)))
            assert not overlaps(box_a, box_b), f"{a.get_text()!r} overlaps {b.get_text()!r}"
    for ax in fig.axes:
        data = data_boxes(ax, renderer)
        for t in ax.texts:
            if t.get_gid() not in ("value", "status") or not t.get_text().strip():
                continue
            box = t.get_window_extent(renderer)
            for d in data:
                assert not overlaps(box, d, slack=1.0), f"{t.get_text()!r} lies on the data"


def assert_readable(fig):
    assert_nothing_covers_data(fig)
    assert_no_text_overlaps(fig)
    for ax in fig.axes:  # a handful of series a panel
        labels = {l.get_label() for l in ax.lines
                  if not l.get_label().startswith("_") and l.get_gid() != "reference"}
        labels |= {c.get_label() for c in ax.containers if not c.get_label().startswith("_")}
        assert len(labels) <= plot.MAX_SERIES, labels


def test_legends_and_notes_never_cover_data(tmp_path):
    crossovers = [{"workload": "mlp_width", "size_key": "width", "baseline": b, "from": None,
                   "largest": 2048} for b in FOUR[1:]]
    run = write(tmp_path, summary(TIMES, FOUR, crossovers))
    figures = plot.figures(run)
    assert "model_sizes.png" in figures and "memory.png" in figures
    for name, fig in figures.items():
        assert_readable(fig)


# The checker itself: a figure whose labels collide, or whose caption runs past its edge, fails.
def test_the_overlap_check_catches_collisions(tmp_path):
    run = write(tmp_path, summary(TIMES, FOUR))
    fig = plot.speedup_figure(run)
    ax = fig.axes[0]
    t = ax.texts[0]
    ax.annotate(t.get_text(), t.xy, xytext=(5, 0), textcoords="offset points", fontsize=7,
                va="center", gid="value")  # a second one on it
    with pytest.raises(AssertionError, match="overlaps"):
        assert_no_text_overlaps(fig)
    fig = plot.speedup_figure(run)
    fig.text(0.5, 0.01, "a caption far too long " * 20, fontsize=7)
    with pytest.raises(AssertionError, match="past the figure's edge"):
        assert_no_text_overlaps(fig)
    fig = plot.speedup_figure(run)
    ax = fig.axes[0]
    for t in list(ax.texts):  # the value labels gone: only the data is left to hit
        t.remove()
    line = next(l for l in ax.lines if len(l.get_xdata()))
    ax.text(line.get_xdata()[0], line.get_ydata()[0], "on the dot", fontsize=7, gid="value")
    with pytest.raises(AssertionError, match="lies on the data"):
        assert_no_text_overlaps(fig)


def test_missing_run_is_a_clear_error(tmp_path, capsys):
    assert plot.main(["plot.py", str(tmp_path / "nope")]) == 2
    assert "summary.json not found" in capsys.readouterr().err


def test_a_corrupt_summary_is_named_not_a_traceback(tmp_path, capsys):
    (tmp_path / "summary.json").write_text('{"rows": [{"instance": ')
    assert plot.main(["plot.py", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "summary.json cannot be read" in err and err.count("\n") == 1


# Each time carries its median's interval, and the note says what the bars are.
def test_times_carry_their_interval(tmp_path):
    s = summary(TIMES, FOUR)
    for row in s["rows"]:
        for c in row["backends"].values():
            if c["status"] == "ok":
                c["median_interval_seconds"] = [c["median_seconds"] * 0.98,
                                                c["median_seconds"] * 1.03]
                c["median_interval_level"] = 0.9375
    run = write(tmp_path, s)
    fig = plot.time_figure(run)
    bars = [c for ax in fig.axes for c in ax.containers
            if isinstance(c, matplotlib.container.ErrorbarContainer)]
    assert bars and all(c.has_xerr for c in bars)
    first = bars[0].lines[2][0].get_segments()[0]  # the interval, in µs
    assert first[0][0] == pytest.approx(0.98e-3) and first[1][0] == pytest.approx(1.03e-3)
    assert any("93.8% interval of each median" in t.get_text() for t in fig.texts)
    assert_readable(fig)


# A number the check could not verify is drawn, and drawn as unverified.
def test_unverified_times_are_circled_and_said_so(tmp_path):
    s = summary(TIMES, FOUR)
    s["rows"][1]["backends"]["libtorch"]["verified"] = False
    run = write(tmp_path, s)
    fig = plot.time_figure(run)
    circles = [l for ax in fig.axes for l in ax.lines if l.get_fillstyle() == "none"]
    assert len(circles) == 1
    assert any("unverified" in t.get_text() for t in fig.texts)
    assert_readable(fig)


# plots/compare.py: every compared benchmark drawn, the uncompared ones named beside the axes,
# nothing over the data.
def test_compare_figure_draws_every_benchmark_and_names_the_rest(tmp_path):
    import compare
    rows = [{"instance": f"grad/w{i}", "backend": "engine", "verdict": v, "note": "",
             "a_seconds": 1.0, "b_seconds": r, "ratio": r, "ratio_interval": [r * 0.95, r * 1.05]}
            for i, (v, r) in enumerate([("same", 1.01), ("slower", 1.5), ("faster", 0.6)])]
    rows.append({"instance": "grad/w3", "backend": "libtorch", "verdict": "broken",
                 "note": "failed in B: exit code 1", "a_seconds": 1.0, "b_seconds": None,
                 "ratio": None, "ratio_interval": [None, None]})
    report = {"a": "runA", "b": "runB", "threshold": 0.1, "rows": rows,
              "counts": {"same": 1, "slower": 1, "faster": 1, "broken": 1},
              "unreadable": ["runB/engine/x.json: JSON: unexpected end"],
              "machine": {"cpu_model": "AMD EPYC", "cpus": 2,
                          "environment": {"cpu_family": "26", "cpu_model_number": "2"}}}
    fig = compare.figure(report)
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == [
        "grad/w0 engine", "grad/w1 engine", "grad/w2 engine"]
    notes = "\n".join(t.get_text() for t in fig.texts)
    assert "grad/w3 libtorch: broken" in notes and "unreadable: runB/engine/x.json" in notes
    assert_nothing_covers_data(fig)
    path = tmp_path / "report.json"
    path.write_text(json.dumps(report))
    assert compare.main(["compare.py", str(path), str(tmp_path / "c.png")]) == 0
    assert (tmp_path / "c.png").read_bytes()[:4] == b"\x89PNG"
    assert compare.main(["compare.py", str(tmp_path / "nope.json"), str(tmp_path / "d.png")]) == 2


# plots/history.py: finished runs only, each once, in order; a processor change marked; what cannot
# be read named and skipped.
def test_history_of_runs_by_commit(tmp_path, capsys):
    import history
    results = tmp_path / "results"
    for i, (run_id, family) in enumerate([("20261101T000000Z", "25"), ("20261102T000000Z", "26"),
                                          ("20261103T000000Z", "26")]):
        s = summary(TIMES, FOUR)
        s["run_id"] = run_id
        s["machine"]["git_sha"] = "0000000"  # not in the repository: ordered by run id
        s["machine"]["environment"] = {"cpu_family": family, "cpu_model_number": "2"}
        (results / run_id).mkdir(parents=True)
        (results / run_id / "summary.json").write_text(json.dumps(s))
    (results / "latest").symlink_to("20261103T000000Z")
    (results / "partial").mkdir()
    (results / "partial" / "summary.json").write_text("{}")
    (results / "partial" / "INCOMPLETE").write_text("interrupted\n")
    (results / "broken").mkdir()
    (results / "broken" / "summary.json").write_text('{"rows": [')
    assert history.main(["history.py", str(results)]) == 0
    out = capsys.readouterr()
    assert "history of 3 runs" in out.out
    assert "partial: incomplete" in out.err and "broken/summary.json: unreadable" in out.err
    runs, _ = history.load_runs(str(results))
    figures = history.figures(runs)
    assert "history_step_mlp_width.png" in figures and (results / "history").is_dir()
    fig = figures["history_step_mlp_width.png"]
    assert "family 25 model 2 -> family 26 model 2" in fig.texts[0].get_text()
    for ax in fig.axes:
        assert len(ax.get_xticklabels()) == 3
    assert_nothing_covers_data(fig)
    assert history.main(["history.py", str(tmp_path / "nope")]) == 2


# A bf16 run and a two-thread run are not points on the float32 runs' line: a line per condition.
def test_history_never_joins_runs_of_other_conditions(tmp_path):
    import history
    results = tmp_path / "results"
    for run_id, precision, threads in [("20261101T000000Z", "fp32", 1),
                                       ("20261102T000000Z", "bf16", 1),
                                       ("20261103T000000Z", "fp32", 1),
                                       ("20261104T000000Z", "fp32", 2)]:
        s = summary(TIMES, FOUR)
        s["run_id"], s["machine"]["git_sha"] = run_id, "0000000"
        s["options"] = {"precision": precision, "threads": threads, "isa": "avx2"}
        (results / run_id).mkdir(parents=True)
        (results / run_id / "summary.json").write_text(json.dumps(s))
    runs, _ = history.load_runs(str(results))
    fig = history.figures(runs)["history_step_mlp_width.png"]
    legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert "engine (fp32, 1 thread, avx2)" in legend and "engine (bf16, 1 thread, avx2)" in legend
    assert "engine (fp32, 2 threads, avx2)" in legend
    for ax in fig.axes:
        points = {}
        for line in ax.lines:
            if len(line.get_xdata()):
                points.setdefault(line.get_linestyle(), set()).update(line.get_xdata())
        assert {0, 2} in [p for p in points.values()], points  # the two fp32 one-thread runs
    assert_nothing_covers_data(fig)


def test_the_budget_figure_is_the_compiled_modes_counters_on_a_linear_axis(tmp_path):
    times = {"step/mini_gpt_wide/batch:1": {"engine": 5e-3, "compiled": 4e-3,
                                            "compiled_budget": 4.4e-3}}
    s = summary(times, ["engine", "compiled", "compiled_budget"])
    cells = s["rows"][0]["backends"]
    cells["compiled"].update(max_rss_bytes=30e6, counters={"planned_arena_bytes": 20e6})
    cells["compiled_budget"].update(max_rss_bytes=20e6, counters={"planned_arena_bytes": 10e6})
    fig = plot.figures(write(tmp_path, s))["budget.png"]
    rss, arena = fig.axes
    assert rss.get_xscale() == "linear", "ratios near 1 are read on a linear axis"
    assert [round(p.get_width(), 6) for p in rss.patches] == [30.0, 20.0]
    assert [round(p.get_width(), 6) for p in arena.patches] == [20.0, 10.0]
    assert any("1.10x the time" in t.get_text() for t in rss.texts)
    assert_readable(fig)
    del cells["compiled_budget"]  # a run without the budgeted variant has no such figure
    assert "budget.png" not in plot.figures(write(tmp_path, s))


def test_the_fusion_figure_is_time_and_bytes_moved_fused_and_unfused(tmp_path):
    times = {"grad/gmm_d10_tensor/k:25": {"engine": 5e-4, "compiled": 4e-4,
                                          "compiled_unfused": 4.4e-4}}
    s = summary(times, ["engine", "compiled", "compiled_unfused"])
    cells = s["rows"][0]["backends"]
    cells["compiled"].update(counters={"bytes_moved": 14.5e6, "fused_groups": 2})
    cells["compiled_unfused"].update(counters={"bytes_moved": 18.5e6, "fused_groups": 0})
    fig = plot.figures(write(tmp_path, s))["fusion.png"]
    time, moved = fig.axes[:2]
    assert [round(p.get_width(), 6) for p in time.patches] == [0.88, 0.8]
    assert [round(p.get_width(), 6) for p in moved.patches] == [18.5, 14.5]
    assert any("2 groups" in t.get_text() for t in moved.texts)
    assert_readable(fig)
    del cells["compiled_unfused"]  # a run without the unfused variant has no such figure
    assert "fusion.png" not in plot.figures(write(tmp_path, s))


def test_the_amp_figure_is_each_models_loss_curves_float32_solid_bf16_dashed(tmp_path):
    amp = ["engine", "engine_bf16", "libtorch", "libtorch_bf16", "pytorch_bf16"]
    times = {i: {b: 1e-3 for b in amp} for i in ("step/mlp_width/width:2048",
                                                  "step/mini_gpt_wide/batch:32",
                                                  "step/char_mlp/hidden:1024")}
    s = summary(times, amp)
    for row in s["rows"]:
        for j, b in enumerate(amp):
            row["backends"][b]["check_losses"] = [2.3 - 0.005 * k + 1e-3 * j for k in range(200)]
    fig = plot.figures(write(tmp_path, s))["amp.png"]
    panels = [ax for ax in fig.axes if ax.get_visible()]
    assert len(panels) == 3
    for ax in panels:  # four series: pytorch_bf16 is no series of this figure
        assert [(l.get_label(), l.get_linestyle()) for l in ax.lines] == [
            ("engine", "-"), ("engine_bf16", "--"), ("libtorch", "-"), ("libtorch_bf16", "--")]
        assert len(ax.lines[0].get_xdata()) == 200
    assert_readable(fig)
    for row in s["rows"]:  # a run without a bf16 row has no such figure
        for b in amp[1::2] + ["pytorch_bf16"]:
            del row["backends"][b]
    assert "amp.png" not in plot.figures(write(tmp_path, s))


def test_kernel_dialects_are_gflops_with_autos_choice_hatched(tmp_path):
    s = summary({"step/mlp_width/width:16": {"engine": 5e-6}}, ["engine"])
    s["kernels"] = {"peak_gflops": 200.0, "shapes": [
        {"shape": "step/mlp_width/width:16/linear[64x16,16x16,1x16]", "flops": 2e6,
         "median_seconds": {"engine": 1e-4, "onednn": 2e-4}, "auto": "onednn", "best": "engine"}]}
    fig = plot.figures(write(tmp_path, s))["kernel_dialects.png"]
    ax = fig.axes[0]
    plain = [b for c in ax.containers for b in c if b.get_fill()]
    hatched = [b for c in ax.containers for b in c if not b.get_fill()]
    assert [round(b.get_height(), 6) for b in plain] == [20.0, 10.0]  # GFLOP/s: engine, onednn
    assert [round(b.get_height(), 6) for b in hatched] == [10.0] and hatched[0].get_hatch() == "//"
    assert [round(l.get_ydata()[0], 6) for l in ax.get_lines()] == [200.0, 160.0]  # peak, 80%
    assert ax.get_xticklabels()[0].get_text() == "mlp_width width:16\nlinear\n64x16, 16x16, 1x16"
    assert_nothing_covers_data(fig)
    del s["kernels"]  # a run without kernel rows has no such figure
    assert "kernel_dialects.png" not in plot.figures(write(tmp_path, s))


def test_recurrent_figures_are_log_log_with_out_of_memory_marked(tmp_path):
    backends = ["engine", "engine_revolve", "engine_multistage", "libtorch", "pytorch"]
    times = {f"step/char_rnn/length:{n}": {"engine": 1e-5 * n, "engine_revolve": 2e-5 * n,
                                           "engine_multistage": 1.4e-5 * n,
                                           "libtorch": 8e-5 * n, "pytorch": 1e-4 * n}
             for n in (100, 1000, 10000)}
    times["step/char_rnn/length:10000"]["pytorch"] = "out_of_memory"
    run = write(tmp_path, summary(times, backends))
    drawn = plot.figures(run)
    for name in ("recurrent_memory.png", "recurrent_time.png"):
        ours, torch = drawn[name].axes
        for ax in (ours, torch):
            assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
        labelled = lambda ax: [l.get_label() for l in ax.lines if not l.get_label().startswith("_")]
        assert labelled(ours) == ["engine", "engine_revolve", "engine_multistage"]
        assert labelled(torch) == ["libtorch", "pytorch"]
        pytorch = next(line for line in torch.lines if line.get_label() == "pytorch")
        assert list(pytorch.get_xdata()) == [100, 1000]  # the out-of-memory cell is no point
        crosses = [line for line in torch.lines if line.get_marker() == "x"]
        assert [list(line.get_xdata()) for line in crosses] == [[10000]]
        assert "out of memory" in " ".join(t.get_text() for t in drawn[name].texts)
        assert_readable(drawn[name])
    revolve = next(line for line in drawn["recurrent_time.png"].axes[0].lines
                   if line.get_label() == "engine_revolve")
    assert list(revolve.get_ydata()) == pytest.approx([2.0, 2.0, 2.0])
    # the main figures keep the five main backends; the strategies are the study's figures'
    assert "engine_revolve" not in [t.get_text() for t in drawn["time.png"].legends[0].get_texts()]


# A workload the plots have never heard of (one added to the registry) is drawn, in the panel of
# the family its row names, and rows from before families were written fall back to their kind's.
def test_a_new_workload_is_drawn_in_its_familys_panel(tmp_path):
    times = dict(TIMES)
    times["grad/my_new_graph"] = {"engine": 2e-8, "libtorch": 2e-5, "pytorch": 2e-5,
                                  "torchscript": 2e-5}
    s = summary(times, FOUR)
    for row in s["rows"]:
        row["family"] = "my family" if row["workload"] == "my_new_graph" else (
            "scalar graphs" if row["phase"] == "grad" else "MLPs")
    run = write(tmp_path, s)
    families = dict(plot.families_in(run))
    assert families["my family"] == ["grad/my_new_graph"]
    assert "grad/my_new_graph" not in families["scalar graphs"]
    fig = plot.speedup_figure(run)
    texts = [ax.get_title(loc="left") for ax in fig.axes]
    texts += [t.get_text() for ax in fig.axes for t in ax.get_yticklabels()]
    assert any("my family" in t for t in texts), texts
    assert any("my_new_graph" in t for t in texts), texts
    for row in s["rows"]:
        del row["family"]
    assert [f for f, _ in plot.families_in(write(tmp_path, s))] == ["scalar graphs", "models"]


# Colours and markers are the run's (the runner's rows write them): the plots retype no backend.
def test_colours_come_from_the_run(tmp_path):
    s = summary(TIMES, FOUR)
    s["backend_styles"]["engine"] = {"color": "#123456", "marker": "D", "main": True}
    run = write(tmp_path, s)
    assert plot.style_of(run, "engine") == ("#123456", "D")
    tensor, star = plot.style_of(run, "engine tensor")
    assert star == "*" and tensor != "#123456"  # darker, its own
    assert plot.color_of(run, "gradbench_adol_c") in plot.OTHER_COLORS  # no style: one of its own
    fig = plot.time_figure(run)
    engine = [c for ax in fig.axes for c in ax.containers if c.get_label() == "engine"]
    assert engine
    for container in engine:
        assert matplotlib.colors.to_hex(container.lines[0].get_color()) == "#123456"


# A short figure of many series (GradBench's figure with one eval and six series): the legend
# takes columns rather than running past the figure's bottom edge.
def test_a_legend_of_many_series_stays_inside_a_short_figure(tmp_path):
    import importlib.util
    backends = ["engine", "compiled", "libtorch", "adolc", "gradbench_pytorch_tool",
                "gradbench_tensorflow_tool"]
    times = {f"grad/lse/elements:{n}": {b: 1e-4 * (i + 1) * n / 2500 for i, b in enumerate(backends)}
             for n in (2500, 40000)}
    times.update({f"grad/lse_tensor/elements:{n}": {"engine": 2e-5 * n / 2500,
                                                    "compiled": 1e-5 * n / 2500}
                  for n in (2500, 40000)})
    s = summary(times, backends)
    for row in s["rows"]:
        row["family"] = "GradBench evals"
    run = write(tmp_path, s)
    spec = importlib.util.spec_from_file_location(
        "gradbench_figure", os.path.join(plot.STUDIES, "gradbench", "figure.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    fig = module.gradbench_figure(run)
    assert fig is not None and len(fig.legends[0].get_texts()) == plot.MAX_SERIES
    assert_readable(fig)
    fig.set_dpi(110)  # as plot.save writes it: text measured at one resolution, drawn at another
    assert_readable(fig)
