#!/usr/bin/python3
"""plots/plot.py: draws the figures of one run folder into <run>/plots/.

A pure function of the run's summary.json, which bench_run writes (harness/runner/summary.h):
every median, ratio, memory figure, crossover and check loss is read from it, never recomputed;
the only arithmetic here is unit changes. The reference backend (what ratios divide by) is the
run's.

    /usr/bin/python3 plots/plot.py results/latest        # or: make plots RUN=results/<run-id>

Each figure answers one question, with at most six series a panel: the main backends (as the
run's backend_styles mark them) in the figures of every run, a study's variants in its own. Panels
are the workload families the run's rows name.
  speedup.png       how many times our engine's time does each backend take? (with intervals)
  time.png          how long is one step on each backend?
  memory.png        how much memory does each benchmark's process hold?
  model_sizes.png   how does a step's time grow with the model's size, per model?
  scalar_chain.png  what does a node cost as the graph grows?
  loss_curves.png   do the backends train alike? (the check's losses)
  and each study's own, from studies/<name>/figure.py (its README.md names them).
No text overlaps another or the data: legends, notes and the caption sit outside the axes, and
value labels beside their point (plots/tests/test_plots.py measures every text's extent). Then
plots/report.py writes <run>/report.html, the page that shows the figures with the tables.
Tests: plots/tests/test_plots.py; harness/tests/ draws them from a fresh real run.
"""
import importlib.util
import json
import math
import os
import sys
import textwrap

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.colors  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402

import report  # noqa: E402

MAX_SERIES = 6
# A backend's colour and marker come from the run (summary.json's backend_styles, from the
# runner's rows: harness/runner/backends.h), so this file retypes no backend. An eval's tensor form
# (workloads/gradbench_tensor.h) is drawn as "<backend> tensor", darker, with a star; a series the
# run has no style for (a tool imported from GradBench's logs) gets a colour of its own.
OTHER_COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#17becf"]


def style_of(run, b):
    """(colour, marker) of series `b` in `run`."""
    styles = run.get("backend_styles") or {}
    if b in styles:
        return styles[b]["color"], styles[b].get("marker", "o")
    if b.endswith(" tensor") and b[:-len(" tensor")] in styles:
        rgb = matplotlib.colors.to_rgb(styles[b[:-len(" tensor")]]["color"])
        return matplotlib.colors.to_hex([0.55 * x for x in rgb]), "*"
    others = sorted({x for x in backends_of(run) if x not in styles} | {b})
    return OTHER_COLORS[others.index(b) % len(OTHER_COLORS)], "o"


def color_of(run, b):
    return style_of(run, b)[0]


def marker_of(run, b):
    return style_of(run, b)[1]


# Workloads are grouped in panels by their family, a fact of the registry each row of summary.json
# carries (workloads/workload.h): a new workload is drawn with its family, never left out.
ROW_INCHES = 0.16  # one point's row in a dot plot: a 7 pt label fits beside it
WIDTH = 11.0


class RunError(Exception):
    """A run folder that cannot be plotted; the message says why and what to do."""


def load_run(run_dir):
    """The run's summary.json, with its rows flattened to one per benchmark."""
    path = os.path.join(run_dir, "summary.json")
    if not os.path.isfile(path):
        raise RunError(f"{path} not found: is {run_dir} a finished run of bench_run?")
    try:
        with open(path) as f:
            summary = json.load(f)
        rows = summary["rows"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise RunError(f"{path} cannot be read as a run's summary: {type(e).__name__}: {e}")
    cells = []
    for row in rows:
        for backend, cell in row["backends"].items():
            cells.append(dict(cell, backend=backend, instance=row["instance"], phase=row["phase"],
                              workload=row["workload"], size_key=row["size_key"],
                              size=row["size"], family=row.get("family") or family_of(row)))
    if not cells:
        raise RunError(f"{path} holds no benchmark")
    return dict(summary, cells=cells)


def family_of(row):
    """A run written before rows named their family: its kind's, as the registry's default."""
    return "scalar graphs" if row["phase"] == "grad" else "models"


def backends_of(run):
    return [b for b in run["backends"] if any(c["backend"] == b for c in run["cells"])]


def main_backends(run):
    """The backends of the main figures: those the run's styles mark main; without any, its
    first six."""
    present = backends_of(run)
    styles = run.get("backend_styles") or {}
    main = [b for b in present if styles.get(b, {}).get("main")]
    return (main or present)[:MAX_SERIES]


def instances_of(run, workloads=None):
    return list(dict.fromkeys(c["instance"] for c in run["cells"]
                              if workloads is None or c["workload"] in workloads))


def label(instance):
    return instance.split("/", 1)[1]  # the phase is in the figure's name


def caption(run):
    m = run["machine"] or {}  # none in a run imported from GradBench's logs alone
    env = m.get("environment", {})
    cpu = f" (family {env['cpu_family']} model {env['cpu_model_number']})" if env else ""
    threads = sorted(set(run["threads"].values()))
    t = f"{threads[0]} thread each" if len(threads) == 1 else "threads: " + ", ".join(
        f"{b} {n}" for b, n in run["threads"].items())
    where = f"{m['cpu_model']}{cpu}, {m['cpus']} CPUs" if m else "machine not recorded"
    return f"{where}; {t}; run {run['run_id']}"


def finish(fig, run, note=None, legend_axes=None):
    """The legend right of the axes, the note and the caption under them, all wrapped to the
    figure's width: nothing over the data, nothing past the figure's edge."""
    width_chars = int(fig.get_figwidth() * 14)  # 7 pt text: about 14 characters an inch
    lines = []
    if note:
        for paragraph in note.split("\n"):
            lines += textwrap.wrap(paragraph, width_chars) or [""]
    lines.append(None)  # the caption
    caption_lines = textwrap.wrap(caption(run), width_chars)
    height = fig.get_figheight()
    line = 0.15 / height  # of the figure's height
    y = 0.01
    for text in reversed(caption_lines):
        fig.text(0.01, y, text, fontsize=7, color="gray", va="bottom")
        y += line
    for text in reversed([t for t in lines if t is not None]):
        fig.text(0.01, y, text, fontsize=7, va="bottom")
        y += line
    axes = legend_axes or (fig.axes[0] if fig.axes else None)
    handles, labels = [], []
    for ax in fig.axes:  # one legend for the figure: a series' entry once
        for h, lab in zip(*ax.get_legend_handles_labels()):
            if lab not in labels:
                handles.append(h), labels.append(lab)
    right = 1.0
    if handles and axes is not None:  # at the right edge; the axes end where it begins
        # in as many columns as it takes to end above the notes (a short figure of many series
        # would otherwise run past its bottom edge)
        room = (1 - 0.45 / height - y - 0.01) * fig.bbox.height
        for columns in range(1, 5):
            legend = fig.legend(handles, labels, loc="upper right",
                                bbox_to_anchor=(0.995, 1 - 0.45 / height), ncol=columns,
                                fontsize=8, borderaxespad=0, frameon=False)
            fig.canvas.draw()
            box = legend.get_window_extent(fig.canvas.get_renderer())
            if box.height <= room or columns == 4:
                break
            legend.remove()
        right = 1 - box.width / fig.bbox.width - 0.015
    if fig._suptitle:  # its band at the top, the same 0.4 in however tall the figure is
        fig._suptitle.set_y(1 - 0.08 / height)
        fig._suptitle.set_va("top")
    top = 1 - 0.4 / height if fig._suptitle else 1  # the figure's title keeps its own band
    fig.tight_layout(rect=(0, y + 0.01, right, top))
    return fig


def cell_map(run):
    return {(c["instance"], c["backend"]): c for c in run["cells"]}


def workloads_in_family(run, family):
    """The run's workloads of `family`, in registry (row) order."""
    return list(dict.fromkeys(c["workload"] for c in run["cells"] if c["family"] == family))


def families_in(run):
    """[(family, instances)] with at least one instance, in the order of the run's rows."""
    out = []
    for family in dict.fromkeys(c["family"] for c in run["cells"]):
        instances = instances_of(run, workloads_in_family(run, family))
        if instances:
            out.append((family, instances))
    return out


def dot_panels(run, series, point_of, xlabel, title, labels=False, log=True, note=None,
               reference_line=None):
    """A dot plot per workload family: a row per (instance, series), the value as a dot with its
    interval as a bar, and with `labels` the value written right of the interval's top, on the
    row's own line. point_of(cell) -> (value, low, high, label) or None; a cell that did not run
    gets its status written in its row instead."""
    by_key = cell_map(run)
    panels = families_in(run)
    rows_of = [len(instances) * len(series) for _, instances in panels]
    if not panels or not series:
        return None
    inches = [max(r * ROW_INCHES, 0.7) + 0.5 for r in rows_of]  # the rows, the panel's title
    height = sum(inches) + 0.4 * len(panels) + 1.8  # axis labels; title, legend, notes, caption
    fig, axes = plt.subplots(len(panels), 1, figsize=(WIDTH, height), squeeze=False,
                             gridspec_kw={"height_ratios": inches})
    drawn_any = False
    for ax, (family, instances) in zip(axes[:, 0], panels):
        lowest, highest = float("inf"), 0.0
        texts = []
        for i, inst in enumerate(instances):
            for j, b in enumerate(series):
                y = i * (len(series) + 1) + j
                c = by_key.get((inst, b))
                if c is None:
                    continue
                p = point_of(c) if c["status"] == "ok" else None
                if p is None:
                    if c["status"] != "ok":
                        texts.append((y, c["status"].replace("_", " "), b))
                    continue
                value, lo, hi, text = p
                lo, hi = (lo if lo is not None else value), (hi if hi is not None else value)
                ax.errorbar([value], [y], xerr=[[value - lo], [hi - value]],
                            fmt=marker_of(run, b), color=color_of(run, b), markersize=4,
                            elinewidth=0.9, capsize=1.5, label=b)
                if not c.get("verified", True):
                    ax.plot([value], [y], "o", markersize=8, fillstyle="none", color="black")
                lowest, highest = min(lowest, lo, value), max(highest, hi, value)
                if labels and text:
                    texts.append((y, text, None, hi))
                drawn_any = True
        if highest == 0:
            lowest, highest = 1, 10
        if log:
            ax.set_xscale("log")
            # room on the right for the labels; the left starts under the lowest point
            ax.set_xlim(lowest / 1.6, highest * (12 if labels or texts else 1.6))
        else:
            ax.set_xlim(min(0, lowest * 0.9), highest * (1.45 if labels or texts else 1.1))
        for t in texts:
            y, text = t[0], t[1]
            if t[2] is not None:  # a status where the dot would be: at the left, in its colour
                ax.text(ax.get_xlim()[0], y, " " + text, va="center", ha="left", fontsize=7,
                        color=color_of(run, t[2]), gid="status")
            else:  # a few points right of the interval's top: clear of the dot and its bar
                ax.annotate(text, (t[3], y), xytext=(5, 0), textcoords="offset points",
                            va="center", ha="left", fontsize=7, gid="value")
        ticks = [i * (len(series) + 1) + (len(series) - 1) / 2 for i in range(len(instances))]
        ax.set_yticks(ticks, [label(i) for i in instances], fontsize=8)
        ax.set_ylim(len(instances) * (len(series) + 1) - 1, -1)
        # a tall figure is read panel by panel: each says its unit, and its ticks top and bottom
        ax.set_title(f"{family}: {xlabel}", fontsize=9, loc="left")
        ax.tick_params(axis="x", top=True, labeltop=len(panels) > 1, labelsize=7)
        ax.grid(axis="x", which="major", alpha=0.3)
        if reference_line is not None:
            ax.axvline(reference_line, color="black", linewidth=0.8)
    if not drawn_any:
        plt.close(fig)
        return None
    axes[-1, 0].set_xlabel(xlabel)
    fig.suptitle(title, fontsize=10, x=0.01, ha="left")
    return finish(fig, run, note)


def interval_note(run):
    levels = {c.get("median_interval_level") for c in run["cells"] if c["status"] == "ok"}
    level = next((lv for lv in levels if lv), None)
    notes = []
    if level:
        notes.append(f"bars: the {level:.1%} interval of each median (order statistics of the "
                     "repetitions)")
    if any(c["status"] == "ok" and not c.get("verified", True) for c in run["cells"]):
        notes.append("circled: unverified, the check had nothing to compare it with")
    return "; ".join(notes) or None


def speedup_figure(run):
    ref = run["reference"]
    series = [b for b in main_backends(run) if b != ref]

    def point(c):
        r = c.get("ratio_to_reference")
        if r is None:
            return None
        lo, hi = (c.get("ratio_interval") or [None, None])[:2]
        return r, lo, hi, f"{r:.2g}x" if r < 10 else f"{r:.0f}x"

    paired = any(c.get("ratio_paired") for c in run["cells"])
    timed = dict(run, cells=[c for c in run["cells"] if c["workload"] != "empty"])  # no work
    return dot_panels(timed, series, point, f"time per step over {ref}'s (log; right of 1: {ref} is "
                      "faster)", f"How many times {ref}'s time does each backend take?",
                      labels=True, reference_line=1,
                      note="bars: the interval of each ratio" + (
                          " (order statistics of the ratios of repetitions that took turns)"
                          if paired else " (from the two medians' intervals)"))


def time_figure(run):
    def point(c):
        m = c.get("median_seconds")
        if not m:
            return None
        lo, hi = (c.get("median_interval_seconds") or [None, None])[:2]
        return m * 1e6, lo and lo * 1e6, hi and hi * 1e6, None

    return dot_panels(run, main_backends(run), point, "median time per step (µs, log)",
                      "How long is one step on each backend?", note=interval_note(run))


def memory_figure(run):
    def point(c):
        m = c.get("max_rss_bytes")
        return (m / 1e6, None, None, None) if m else None

    return dot_panels(run, main_backends(run), point, "peak RSS of the process (MB, log)",
                      "How much memory does each benchmark's process hold? (wait4, one process "
                      "each)")


def crossover_lines(run, workload):
    """The runner's crossovers of one workload, as sentences."""
    return [f"{c['baseline']} faster than {run['reference']} from {c['size_key']} {c['from']}"
            if c["from"] is not None else
            f"{c['baseline']}: no crossover up to {c['size_key']} {c['largest']}"
            f" ({run['reference']} faster at every size)"
            for c in run["crossovers"] if c["workload"] == workload]


def short_count(n):
    """2500 -> 2.5k, 1280000 -> 1.28M."""
    for unit, div in (("M", 1e6), ("k", 1e3)):
        if n >= div:
            return f"{n / div:.3g}{unit}"
    return f"{n:g}"


def panel_grid(count, row_height):
    """A figure of `count` panels two to a row, the spare one hidden; (fig, the panels' axes)."""
    cols = min(2, count)
    rows = (count + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(WIDTH, row_height * rows + 1.2), squeeze=False)
    for k in range(count, rows * cols):
        axes[k // cols, k % cols].set_visible(False)
    return fig, [axes[k // cols, k % cols] for k in range(count)]


def size_panels(run, workloads, series, value_of, ylabel, title, note=None):
    """A panel per sized workload with at least two sizes: a line per series against the size."""
    panels = []
    for w in workloads:
        sizes = sorted({c["size"] for c in run["cells"] if c["workload"] == w and c["size_key"]})
        if len(sizes) >= 2:
            panels.append(w)
    if not panels:
        return None
    fig, axes = panel_grid(len(panels), 3.2)
    for ax, w in zip(axes, panels):
        values = []
        for b in series:
            pts = sorted((c["size"], value_of(c)) for c in run["cells"]
                         if c["workload"] == w and c["backend"] == b and c["status"] == "ok"
                         and value_of(c))
            values += [p[1] for p in pts]
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker_of(run, b) + "-",
                        label=b, color=color_of(run, b), markersize=4)
        for c in run["crossovers"]:
            if c["workload"] == w and c["from"] is not None and c["baseline"] in series:
                ax.axvline(c["from"], color=color_of(run, c["baseline"]), linestyle=":",
                           linewidth=1)
        key = next(c["size_key"] for c in run["cells"] if c["workload"] == w)
        ax.set_xscale("log")
        ax.set_yscale("log")
        # the measured sizes as ticks, short (2.5k, 1.28M); no minor labels to collide
        sizes = sorted({c["size"] for c in run["cells"] if c["workload"] == w})
        ax.set_xticks(sizes, [short_count(n) for n in sizes], fontsize=7)
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.set_xlabel(f"{w}: {key} (log)", fontsize=8)
        ax.set_ylabel(ylabel, fontsize=8)
        label_log_axis(ax.yaxis, values)
        ax.grid(which="major", alpha=0.3)
    fig.suptitle(title, fontsize=10, x=0.01, ha="left")
    return finish(fig, run, note)


def label_log_axis(axis, values):
    """Every point between two labelled ticks: the axis runs from the labelled tick at or below
    the lowest value to the one at or above the highest, its ticks each decade, or 1, 2 and 5 of
    each on a span under two decades (one decade had one label, or none, beside its lines)."""
    values = [v for v in values if v and v > 0]
    if not values:
        return
    subs = (1.0,) if max(values) / min(values) >= 100 else (1.0, 2.0, 5.0)

    def ticks_around(v):
        decade = 10.0 ** math.floor(math.log10(v))
        ticks = [decade * s for s in subs] + [decade * 10]
        return max(t for t in ticks if t <= v * (1 + 1e-9)), min(t for t in ticks
                                                                 if t >= v * (1 - 1e-9))
    lo, hi = ticks_around(min(values))[0], ticks_around(max(values))[1]
    axis.set_major_locator(matplotlib.ticker.LogLocator(subs=subs))
    axis.set_major_formatter(matplotlib.ticker.FuncFormatter(
        lambda v, _: f"{v:g}" if len(subs) > 1 else f"$10^{{{round(math.log10(v))}}}$"))
    axis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    axis.axes.set_ylim(lo / 1.05, hi * 1.05)


def crossover_note(run, workloads, series):
    """The runner's crossovers of these panels in few words: each backend that becomes faster
    than the reference, where; and in one sentence, those it never does (each said once)."""
    ref, found, never = run["reference"], [], {}
    for c in run["crossovers"]:
        if c["workload"] not in workloads or c["baseline"] not in series:
            continue
        if c["from"] is None:
            never.setdefault(c["baseline"], []).append(c["workload"])
            continue
        smallest = min(x["size"] for x in run["cells"] if x["workload"] == c["workload"])
        where = ("at every size" if c["from"] == smallest
                 else f"from {c['size_key']} {c['from']} on")
        line = f"{c['baseline']} faster than {ref} {where} of {c['workload']}"
        if line not in found:
            found.append(line)
    if not found and not never:
        return None
    everywhere = [b for b, ws in never.items() if set(ws) >= set(workloads) & {
        c["workload"] for c in run["crossovers"]}]
    parts = ["dotted: a backend faster than the reference from that size on"] + found
    if everywhere:
        parts.append(f"{ref} faster than {', '.join(everywhere)} at every size of every panel")
    for b, ws in never.items():
        if b not in everywhere:
            parts.append(f"{ref} faster than {b} at every size of {', '.join(ws)}")
    return "; ".join(parts)


def model_sizes_figure(run):
    models = ["char_mlp", "mini_gpt", "mini_gpt_wide", "mlp_width"]
    return size_panels(run, models, main_backends(run),
                       lambda c: c["median_seconds"] and c["median_seconds"] * 1e3,
                       "time per step (ms, log)",
                       "How does a training step's time grow with the model's size?",
                       note=crossover_note(run, models, main_backends(run)))


def chain_figure(run):
    return size_panels(run, ["scalar_chain"], main_backends(run),
                       lambda c: c.get("items_per_second") and 1e9 / c["items_per_second"],
                       "time per node (ns, log)", "What does a node cost as the graph grows?")


def loss_figure(run, instance="step/mini_gpt/batch:8"):
    """Training losses from the correctness check (same weights, same batches on every backend)."""
    series = main_backends(run)
    curves = {}
    for wanted in [instance] + sorted({c["instance"] for c in run["cells"]
                                       if c["workload"] == "mini_gpt"}):
        curves = {c["backend"]: c["check_losses"] for c in run["cells"]
                  if c["instance"] == wanted and c.get("check_losses") and c["backend"] in series}
        if curves:
            instance = wanted
            break
    if not curves:
        return None
    fig, ax = plt.subplots(figsize=(8.5, 4.8))
    for j, (b, losses) in enumerate(curves.items()):
        ax.plot(range(len(losses)), losses, ["-", "--", ":", "-."][j % 4], label=b,
                color=color_of(run, b), linewidth=max(0.8, 2.5 - 0.45 * j))
    ax.set_xlabel("training step (same initial weights, same batches)")
    ax.set_ylabel("training loss (mean cross-entropy, nats)")
    ax.set_title(f"Do the backends train alike? {label(instance)} (the lines overlap)",
                 fontsize=10)
    ax.grid(alpha=0.3)
    return finish(fig, run)


# ---- the studies' figures: studies/<name>/figure.py, each a list FIGURES of (file, draw) ----

STUDIES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "studies")


def study_figures():
    """[(file name, draw)] of every study's figure.py, in the order of the studies' folders."""
    out = []
    for name in sorted(os.listdir(STUDIES)):
        path = os.path.join(STUDIES, name, "figure.py")
        if os.path.isfile(path):
            spec = importlib.util.spec_from_file_location(f"study_{name}_figure", path)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            out += module.FIGURES
    return out


def figures(run):
    """{file name: figure} for everything this run has data for."""
    out = {}
    for name, make in [("speedup.png", speedup_figure), ("time.png", time_figure),
                       ("memory.png", memory_figure), ("model_sizes.png", model_sizes_figure),
                       ("scalar_chain.png", chain_figure),
                       ("loss_curves.png", loss_figure)] + study_figures():
        if name == "speedup.png" and len(main_backends(run)) < 2:
            continue
        fig = make(run)
        if fig is not None:
            out[name] = fig
    return out


def save(drawn, out_dir, dpi=110):
    """Writes {file name: figure} into out_dir (made if missing), closing each; returns names."""
    os.makedirs(out_dir, exist_ok=True)
    for name, fig in drawn.items():
        fig.savefig(os.path.join(out_dir, name), dpi=dpi)
        plt.close(fig)
    return list(drawn)


def main(argv):
    if len(argv) != 2:
        print("usage: plot.py RUN_DIR   (e.g. results/latest)", file=sys.stderr)
        return 2
    try:
        run = load_run(argv[1])
    except RunError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    out_dir = os.path.join(argv[1], "plots")
    drawn = save(figures(run), out_dir)
    print(textwrap.fill(f"plots: {', '.join(drawn)} in {out_dir}", 120, subsequent_indent="    ",
                        break_long_words=False, break_on_hyphens=False))
    print(f"report: {report.write_report(argv[1])}")  # the page that shows them with the tables
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
