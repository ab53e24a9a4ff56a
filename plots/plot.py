#!/usr/bin/python3
"""plots/plot.py: draws the figures of one run folder into <run>/plots/.

A pure function of the run's summary.json, which bench_run writes (harness/runner/results.h): every
median, ratio, memory figure, crossover and check loss is read from it, never recomputed; the
only arithmetic here is unit changes. The reference backend (what ratios divide by) is the run's.

    /usr/bin/python3 plots/plot.py results/latest        # or: make plots RUN=results/<run-id>

Figures, for what the run contains: runtime_<phase>.png (median time per step), memory_<phase>.png
(peak RSS per process), speedup_<phase>.png (each baseline's time over the reference's), for
phase grad (scalar graphs) and step (training steps); scalar_chain.png (time per node against
graph size); mini_gpt_batch.png (time per step against batch size); mlp_width.png (time against
width, crossovers marked); loss_curves.png (mini_gpt's training loss on every backend, overlaid);
recurrent_memory.png and recurrent_time.png (peak RSS, and time relative to the reference, against
the sequence length of the recurrent workloads, every strategy); intervals.png (multistage's time
over store-all's against its checkpoint interval, per state size, its own choice starred);
memory_plan.png (the compiled
mode's planned arena against its lower bound and the eager engine's arena, per model);
kernel_dialects.png (each matmul dialect's GFLOP/s on the op shapes of real steps, auto's choice
marked, against the core's FMA peak measured in the same run).
Legends and notes sit outside the plotting area, so they never cover data. Then plots/report.py
writes <run>/report.html, the page that shows the figures with the tables.
Tests: plots/tests/test_plots.py; harness/tests/ draws them from a fresh run of every backend.
"""
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402

import report  # noqa: E402

COLORS = {"engine": "#1b9e77", "compiled": "#66a61e", "compiled_budget": "#a6d854",
          "compiled_first_step": "#b3b3b3", "libtorch": "#d95f02", "pytorch": "#7570b3",
          "torchscript": "#e7298a",
          # the recurrent workloads' strategies, each near its backend's colour
          "engine_revolve": "#e6ab02", "engine_multistage": "#a6761d",
          "libtorch_segments": "#fc8d62", "pytorch_checkpoint": "#8da0cb"}
# The compiled mode's matmul dialects (engine/compiled/dialects.h), in kernel_dialects.png.
DIALECT_COLORS = {"engine": "#1b9e77", "blis": "#e6ab02", "openblas": "#d95f02",
                  "onednn": "#7570b3", "libxsmm": "#e7298a"}
PHASES = {"grad": "scalar graphs: build, forward, backward, read gradients",
          "step": "training steps: zero grads, forward, loss, backward, update"}


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
                              size=row["size"]))
    if not cells:
        raise RunError(f"{path} holds no benchmark")
    return dict(summary, cells=cells)


def backends_of(run):
    return [b for b in run["backends"] if any(c["backend"] == b for c in run["cells"])]


def instances_of(run):
    return list(dict.fromkeys(c["instance"] for c in run["cells"]))


def phase_of(run, phase):
    """The run restricted to one phase, or None if it has none of it."""
    cells = [c for c in run["cells"] if c["phase"] == phase]
    return dict(run, cells=cells) if cells else None


def label(instance):
    return instance.split("/", 1)[1]  # the phase is in the figure's name


def caption(run):
    m = run["machine"]
    env = m.get("environment", {})
    cpu = f"family {env['cpu_family']} model {env['cpu_model_number']}, " if env else ""
    threads = ", ".join(f"{b} {n}" for b, n in run["threads"].items())
    return f"{m['cpu_model']} ({cpu}{m['cpus']} CPUs); threads: {threads}; run {run['run_id']}"


def finish(fig, run, note=None):
    """Caption (and a note) under the axes, legend to their right: outside the data."""
    ax = fig.axes[0]
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0, fontsize=8)
    bottom = 0.03
    if note:
        fig.text(0.01, 0.045, note, fontsize=8, color="black", va="bottom")
        bottom = 0.03 + 0.03 * (note.count("\n") + 1)
    fig.text(0.01, 0.01, caption(run), fontsize=7, color="gray")
    fig.tight_layout(rect=(0, bottom, 1, 1))
    return fig


def grouped_bars(run, value_of, ylabel, title, scale=None):
    """Bars per instance, one per backend; a backend that did not run says so in its slot. With
    `scale` (the factor from seconds to the axis' unit), each time bar carries the interval of its
    median, and a bar whose interval is wide is faded."""
    backends, instances = backends_of(run), instances_of(run)
    by_key = {(c["instance"], c["backend"]): c for c in run["cells"]}
    fig, ax = plt.subplots(figsize=(min(17, max(8, 0.8 * len(instances) + 2)), 4.8))
    width = 0.8 / len(backends)
    for j, b in enumerate(backends):
        xs, ys, verified, lows, highs, wide = [], [], [], [], [], []
        for i, inst in enumerate(instances):
            c = by_key.get((inst, b))
            x = i + (j - (len(backends) - 1) / 2) * width
            if c is None:
                continue
            if c["status"] == "ok" and value_of(c):
                xs.append(x)
                ys.append(value_of(c))
                verified.append(c.get("verified", True))
                lo, hi = (c.get("median_interval_seconds") or [None, None])[:2]
                ok = scale and lo is not None and hi is not None
                lows.append(value_of(c) - lo * scale if ok else 0)
                highs.append(hi * scale - value_of(c) if ok else 0)
                wide.append(bool(c.get("wide")))
            else:
                ax.annotate(c["status"].replace("_", " "), (x, 0), xycoords=("data", "axes fraction"),
                            rotation=90, ha="center", va="bottom", fontsize=7,
                            color=COLORS.get(b, "gray"))
        bars = ax.bar(xs, ys, width, label=b, color=COLORS.get(b),
                      yerr=[lows, highs] if scale else None, capsize=2 if scale else 0,
                      error_kw=dict(elinewidth=0.8, ecolor="black"))
        for bar, ok, is_wide in zip(bars, verified, wide):
            if not ok:
                bar.set_hatch("//")
                bar.set_edgecolor("white")
                bar.set_gid("unverified")
            elif is_wide:
                bar.set_alpha(0.45)
                bar.set_gid("wide")
    ax.set_yscale("log")
    ax.set_xticks(range(len(instances)), [label(i) for i in instances], rotation=30, ha="right")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(axis="y", which="major", alpha=0.3)
    notes = []
    if scale:
        levels = {c.get("median_interval_level") for c in run["cells"] if c["status"] == "ok"}
        level = next((lv for lv in levels if lv), None)
        if level:
            notes.append(f"error bars: the {level:.1%} interval of each median (order statistics)"
                         + ("; faded: wider than 10% of the median"
                            if any(c.get("wide") for c in run["cells"]) else ""))
    if any(c["status"] == "ok" and not c.get("verified", True) for c in run["cells"]):
        notes.append("hatched: unverified, the check had nothing to compare it with")
    return finish(fig, run, note="\n".join(notes) or None)


def runtime_figure(run, phase):
    return grouped_bars(run, lambda c: c["median_seconds"] and c["median_seconds"] * 1e6,
                        "median time per step (µs, log)", f"Time per step, {PHASES[phase]}",
                        scale=1e6)


def memory_figure(run, phase):
    return grouped_bars(run, lambda c: c["max_rss_bytes"] and c["max_rss_bytes"] / 1e6,
                        "peak RSS of the process (MB, log)",
                        f"Peak memory of each benchmark's process (wait4), {phase} phase")


def speedup_figure(run, phase):
    ref = run["reference"]
    instances = [i for i in instances_of(run) if not i.endswith("/empty")]
    baselines = [b for b in backends_of(run) if b != ref]
    ratios = {(c["instance"], c["backend"]): c for c in run["cells"]
              if c["backend"] != ref and c["ratio_to_reference"] is not None}
    fig, ax = plt.subplots(figsize=(min(17, max(8, 0.8 * len(instances) + 2)), 4.8))
    width = 0.8 / max(1, len(baselines))
    for j, b in enumerate(baselines):
        pts = [(k, ratios[(inst, b)]) for k, inst in enumerate(instances) if (inst, b) in ratios]
        xs = [k + (j - (len(baselines) - 1) / 2) * width for k, _ in pts]
        ys = [c["ratio_to_reference"] for _, c in pts]
        bounds = [c.get("ratio_interval") or [None, None] for _, c in pts]
        lows = [y - lo if lo is not None else 0 for y, (lo, _) in zip(ys, bounds)]
        highs = [hi - y if hi is not None else 0 for y, (_, hi) in zip(ys, bounds)]
        ax.bar(xs, ys, width, label=f"{b} / {ref}", color=COLORS.get(b), yerr=[lows, highs],
               capsize=2, error_kw=dict(elinewidth=0.8, ecolor="black"))
        for x, y in zip(xs, ys):
            ax.annotate(f"{y:.2g}x" if y < 10 else f"{y:.0f}x", (x, y), ha="center",
                        va="bottom" if y >= 1 else "top", fontsize=8 if len(baselines) == 1 else 6)
    ax.set_yscale("log")
    ax.axhline(1, color="black", linewidth=0.8)
    ax.set_xticks(range(len(instances)), [label(i) for i in instances], rotation=30, ha="right")
    ax.set_ylabel(f"baseline time / {ref} time (log)")
    ax.set_title(f"Each baseline's time over {ref}'s ({phase}; above 1: {ref} is faster)")
    if ax.patches:  # room for the value labels on the log axis
        lo, hi = ax.get_ylim()
        ax.set_ylim(min(lo, 0.5) / 2, hi * 3)
    paired = any(c.get("ratio_paired") for c in ratios.values())
    return finish(fig, run, note="error bars: the interval of each ratio" + (
        " (order statistics of the ratios of repetitions that took turns)" if paired
        else " (from the two medians' intervals)"))


def line_figure(run, workloads, size_key, xlabel, title, per_item=False, note=None):
    """One line per (workload, backend): median time (or time per item) against the size."""
    fig, ax = plt.subplots(figsize=(8.5, 4.8))
    styles = ["o-", "s--", "^:"]
    for w_index, workload in enumerate(workloads):
        for b in backends_of(run):
            pts = sorted((c["size"], 1e9 / c["items_per_second"] if per_item
                          else c["median_seconds"] * 1e3)
                         for c in run["cells"]
                         if c["workload"] == workload and c["backend"] == b and c["status"] == "ok"
                         and c["size_key"] == size_key
                         and (c["items_per_second"] if per_item else c["median_seconds"]))
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], styles[w_index % 3],
                        label=f"{workload}, {b}" if len(workloads) > 1 else b, color=COLORS.get(b))
    if not ax.lines:
        plt.close(fig)
        return None
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("time per node (ns, log)" if per_item else "median time per step (ms, log)")
    ax.set_title(title)
    ax.grid(which="major", alpha=0.3)
    return finish(fig, run, note)


def chain_figure(run):
    return line_figure(run, ["scalar_chain"], "nodes", "nodes in the graph (log)",
                       "scalar_chain: cost per node as the graph grows", per_item=True)


def batch_figure(run):
    return line_figure(run, ["mini_gpt", "mini_gpt_wide"], "batch", "batch size (sequences, log)",
                       "mini_gpt: time per training step against batch size")


def crossover_lines(run, workload):
    """The runner's crossovers of one workload, as sentences."""
    return [f"{c['baseline']} faster than {run['reference']} from {c['size_key']} {c['from']}"
            if c["from"] is not None else
            f"{c['baseline']}: no crossover up to {c['size_key']} {c['largest']}"
            f" ({run['reference']} faster at every size)"
            for c in run["crossovers"] if c["workload"] == workload]


def width_figure(run):
    lines = crossover_lines(run, "mlp_width")
    fig = line_figure(run, ["mlp_width"], "width", "hidden width (log)",
                      "mlp_width: time per training step against width",
                      note="\n".join(lines) if lines else None)
    if fig is None:
        return None
    ax = fig.axes[0]
    for c in run["crossovers"]:
        if c["workload"] == "mlp_width" and c["from"] is not None:
            ax.axvline(c["from"], color=COLORS.get(c["baseline"], "gray"), linestyle=":",
                       linewidth=1)
    return fig


def loss_figure(run, instance="step/mini_gpt/batch:8"):
    """Training losses from the correctness check (same weights, same batches on every backend)."""
    curves = {}
    for wanted in [instance] + sorted({c["instance"] for c in run["cells"]
                                       if c["workload"] == "mini_gpt"}):
        curves = {c["backend"]: c["check_losses"] for c in run["cells"]
                  if c["instance"] == wanted and c.get("check_losses")}
        if curves:
            instance = wanted
            break
    if not curves:
        return None
    fig, ax = plt.subplots(figsize=(8.5, 4.8))
    for j, (b, losses) in enumerate(curves.items()):
        ax.plot(range(len(losses)), losses, ["-", "--", ":", "-."][j % 4], label=b,
                color=COLORS.get(b), linewidth=max(0.8, 2.5 - 0.6 * j))
    ax.set_xlabel("training step (same initial weights, same batches)")
    ax.set_ylabel("training loss (mean cross-entropy, nats)")
    ax.set_title(f"{label(instance)}: training loss on every backend (they overlap)")
    ax.grid(alpha=0.3)
    return finish(fig, run)


def memory_plan_figure(run):
    """Per model instance the compiled mode ran: the eager engine's arena, the compiled mode's (its
    planned step arena plus what both keep: parameters, gradients, optimizer state), and the same
    with the step arena at its lower bound. All three are counters of the result files."""
    by_key = {(c["instance"], c["backend"]): c for c in run["cells"] if c["status"] == "ok"}
    instances = [i for i in instances_of(run) if i.startswith("step/")
                 and "planned_arena_bytes" in by_key.get((i, "compiled"), {}).get("counters", {})]
    if not instances:
        return None
    series = [("eager engine's arena", COLORS["engine"],
               lambda i: by_key.get((i, "engine"), {}).get("counters", {}).get("arena_bytes")),
              ("compiled: planned arena", COLORS["compiled"],
               lambda i: by_key[(i, "compiled")]["counters"].get("arena_bytes")),
              ("compiled at the lower bound", "#a6761d",
               lambda i: (lambda k: k["arena_bytes"] - k["planned_arena_bytes"]
                          + k["lower_bound_bytes"])(by_key[(i, "compiled")]["counters"]))]
    fig, ax = plt.subplots(figsize=(min(17, max(8, 0.8 * len(instances) + 2)), 4.8))
    width = 0.8 / len(series)
    for j, (name, color, value_of) in enumerate(series):
        xs, ys = [], []
        for i, inst in enumerate(instances):
            v = value_of(inst)
            if v:
                xs.append(i + (j - (len(series) - 1) / 2) * width)
                ys.append(v / 1e6)
        ax.bar(xs, ys, width, label=name, color=color)
    ax.set_yscale("log")
    ax.set_xticks(range(len(instances)), [label(i) for i in instances], rotation=30, ha="right")
    ax.set_ylabel("arena bytes (MB, log)")
    ax.set_title("Memory of a training step: eager arena, compiled plan, lower bound")
    ax.grid(axis="y", which="major", alpha=0.3)
    return finish(fig, run, note="each arena holds parameters, gradients and optimizer state too; "
                                 "lower bound: the most bytes live at any instruction of the program")


def kernel_dialects_figure(run):
    """Per op shape of bench_compiled --kernel_rows, every dialect's GFLOP/s (forward and backward
    of the op), auto's choice hatched; the FMA peak and 80% of it as lines. None without kernels."""
    kernels = run.get("kernels")
    if not kernels or not kernels.get("shapes"):
        return None
    shapes = kernels["shapes"]
    dialects = list(dict.fromkeys(d for s in shapes for d in s["median_seconds"]))
    fig, ax = plt.subplots(figsize=(max(7.5, 1.6 * len(shapes) + 3), 4.8))
    width = 0.8 / len(dialects)
    for j, d in enumerate(dialects):
        xs, ys, chosen = [], [], []
        for i, s in enumerate(shapes):
            t = s["median_seconds"].get(d)
            if t:
                xs.append(i + (j - (len(dialects) - 1) / 2) * width)
                ys.append(s["flops"] / t * 1e-9)
                chosen.append(s.get("auto") == d)
        ax.bar(xs, ys, width, label=d, color=DIALECT_COLORS.get(d, "gray"))
        picked = [(x, y) for x, y, c in zip(xs, ys, chosen) if c]
        if picked:  # drawn over, unlabelled: the legend keeps plain colours
            ax.bar([x for x, _ in picked], [y for _, y in picked], width, fill=False, hatch="//",
                   edgecolor="black")
    peak = kernels.get("peak_gflops")
    if peak:
        ax.axhline(peak, color="black", linewidth=1, label=f"FMA peak {peak:.0f} GFLOP/s")
        ax.axhline(0.8 * peak, color="black", linewidth=1, linestyle=":", label="80% of peak")
    ax.set_xticks(range(len(shapes)))
    def tick(shape):  # "step/char_mlp/hidden:1024/linear[64x1024,...]" on three short lines
        where, op = shape.replace("step/", "").rsplit("/", 1)
        name, operands = op.rstrip("]").split("[", 1)
        return f"{where.replace('/', ' ')}\n{name}\n" + operands.replace(",", ", ")
    ax.set_xticklabels([tick(s["shape"]) for s in shapes], fontsize=7)
    ax.set_ylabel("GFLOP/s (forward + backward of the op)")
    ax.set_title("Matmul dialects per op shape (hatched: auto's choice)")
    ax.grid(axis="y", alpha=0.3)
    return finish(fig, run, note="each bar: the median of the kernel rows' repetitions; "
                                 "flops: 2MNK over the op's three products")


RECURRENT = ["char_rnn", "char_rnn_wide"]  # workloads/recurrent.h


def recurrent_lines(run, value_of, ylabel, title, note, ratio=False):
    """One line per (recurrent workload, backend) against the sequence length, log-log; a cell
    that ran out of memory is an x at its length, on the axis' floor."""
    fig, ax = plt.subplots(figsize=(9, 5))
    styles = {"char_rnn": "o-", "char_rnn_wide": "s--"}
    ooms = []
    for workload in RECURRENT:
        for b in backends_of(run):
            cells = [c for c in run["cells"] if c["workload"] == workload and c["backend"] == b]
            pts = sorted((c["size"], value_of(c)) for c in cells
                         if c["status"] == "ok" and value_of(c))
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], styles[workload],
                        label=f"{workload}, {b}", color=COLORS.get(b), markersize=4)
            ooms += [(c["size"], b) for c in cells if c["status"] == "out_of_memory"]
    if not ax.lines:
        plt.close(fig)
        return None
    ax.set_xscale("log")
    ax.set_yscale("log")
    if ooms:
        floor = ax.get_ylim()[0]
        for size, b in ooms:
            ax.plot([size], [floor], "x", color=COLORS.get(b), markersize=9, clip_on=False)
        note += "\nx on the floor: out of memory at that length (the runner's memory limit)"
    if ratio:  # 1.5x, not 1.5 x 10^0
        ticks = matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}x")
        ax.yaxis.set_major_formatter(ticks)
        ax.yaxis.set_minor_formatter(ticks)
    ax.set_xlabel("sequence length n (log)")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(which="major", alpha=0.3)
    return finish(fig, run, note=note)


def recurrent_memory_figure(run):
    return recurrent_lines(
        run, lambda c: c["peak_rss_bytes"] / 1e6 if c.get("peak_rss_bytes") else None,
        "peak RSS of the process (MB, log)",
        "Recurrent workloads: peak memory against sequence length",
        "solid: char_rnn (H=64, B=8); dashed: char_rnn_wide (H=512, B=32); "
        "engine, libtorch, pytorch, torchscript keep every state")


def recurrent_time_figure(run):
    ref = run["reference"]
    return recurrent_lines(
        run, lambda c: c.get("ratio_to_reference"),
        f"time per sequence / {ref}'s (log)",
        f"Recurrent workloads: time per sequence relative to {ref} (store-all)",
        "solid: char_rnn; dashed: char_rnn_wide; the reference keeps every state", ratio=True)


def intervals_figure(run):
    """The paper's experiment: multistage's time over store-all's against its checkpoint
    interval k, one line per state size; a star at the k it chose from its measured write and
    step times."""
    rows = run.get("intervals") or []
    if not rows:
        return None
    fig, ax = plt.subplots(figsize=(10, 5))
    styles = {"char_rnn": "o-", "char_rnn_wide": "s--"}
    for workload in dict.fromkeys(r["workload"] for r in rows):
        mine = [r for r in rows if r["workload"] == workload]
        swept = sorted((int(r["k"]), r["slowdown"]) for r in mine if r["k"] != "auto")
        chosen = [r for r in mine if r["k"] == "auto"]
        state = ""
        if mine[0].get("records") and mine[0].get("bytes_written"):
            state = f", {mine[0]['bytes_written'] / mine[0]['records'] / 1024:.0f} KiB a record"
        name = f"{workload}, n={mine[0]['length']}{state}"
        line = ax.plot([k for k, _ in swept], [v for _, v in swept], styles.get(workload, "o-"),
                       label=name, markersize=4)[0]
        for r in chosen:
            ax.plot([r["interval"]], [r["slowdown"]], "*", color=line.get_color(), markersize=14,
                    label=f"its choice, k={r['interval']:.0f}: write "
                          f"{r['write_seconds_measured'] * 1e6:.0f} us, step "
                          f"{r['step_seconds_measured'] * 1e6:.1f} us")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.axhline(1, color="gray", linewidth=0.8)
    ticks = matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}x")
    ax.yaxis.set_major_formatter(ticks)
    ax.yaxis.set_minor_formatter(ticks)
    ax.set_xlabel("checkpoint interval k: a state written to disk every k steps (log)")
    ax.set_ylabel("time per sequence / store-all's (log)")
    ax.set_title("Multistage: slowdown against checkpoint interval")
    ax.grid(which="major", alpha=0.3)
    return finish(fig, run, note="engine_multistage with 8 in-memory snapshots per interval; each "
                                 "point the median of 5 sequences over store-all's, taking turns; "
                                 "1x: store-all")


def figures(run):
    """{file name: figure} for everything this run has data for."""
    out = {}
    for phase in PHASES:
        sub = phase_of(run, phase)
        if sub:
            out[f"runtime_{phase}.png"] = runtime_figure(sub, phase)
            out[f"memory_{phase}.png"] = memory_figure(sub, phase)
            if len(backends_of(sub)) > 1:
                out[f"speedup_{phase}.png"] = speedup_figure(sub, phase)
    for name, make in [("scalar_chain.png", chain_figure), ("mini_gpt_batch.png", batch_figure),
                       ("mlp_width.png", width_figure), ("loss_curves.png", loss_figure),
                       ("memory_plan.png", memory_plan_figure),
                       ("kernel_dialects.png", kernel_dialects_figure),
                       ("recurrent_memory.png", recurrent_memory_figure),
                       ("recurrent_time.png", recurrent_time_figure),
                       ("intervals.png", intervals_figure)]:
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
    print(f"plots: {', '.join(drawn)} in {out_dir}")
    print(f"report: {report.write_report(argv[1])}")  # the page that shows them with the tables
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
