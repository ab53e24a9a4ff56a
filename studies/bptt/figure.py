"""studies/bptt/figure.py: the study bptt's figure, the ways back through a long sequence
(recurrent_memory.png, recurrent_time.png) and multistage against its checkpoint interval
(intervals.png). plots/plot.py finds this file and draws FIGURES for every run it is given; each
returns None where the run holds none of its data. A pure function of the run's summary.json, as
every figure is."""

import matplotlib.pyplot as plt
import matplotlib.ticker

from plot import WIDTH, backends_of, color_of, finish, label


RECURRENT = ["char_rnn", "char_rnn_wide"]  # workloads/recurrent.h


OURS = ["engine", "engine_revolve", "engine_multistage", "compiled"]


THEIRS = ["libtorch", "libtorch_segments", "pytorch", "pytorch_checkpoint", "torchscript"]


def recurrent_figure(run, value_of, ylabel, title, note, ratio=False):
    """Per recurrent workload, our strategies and the torch backends' in two panels, each line a
    backend against the sequence length, log-log; a cell that ran out of memory is an x at its
    length, on the axis' floor."""
    workloads = [w for w in RECURRENT if any(c["workload"] == w for c in run["cells"])]
    groups = [("ours", [b for b in OURS if b in backends_of(run)]),
              ("torch", [b for b in THEIRS if b in backends_of(run)])]
    groups = [(name, g) for name, g in groups if g]
    if not workloads or not groups or len(backends_of(run)) < 2:
        return None
    styles = run.get("backend_styles") or {}
    if styles and all(styles.get(b, {}).get("main") for b in backends_of(run)):
        return None  # no strategy to compare: the study bptt's figure
    fig, axes = plt.subplots(len(workloads), len(groups), figsize=(WIDTH, 3.4 * len(workloads)
                                                                   + 1.2), squeeze=False)
    ooms = False
    for r, w in enumerate(workloads):
        for k, (name, group) in enumerate(groups):
            ax = axes[r, k]
            for b in group:
                cells = [c for c in run["cells"] if c["workload"] == w and c["backend"] == b]
                pts = sorted((c["size"], value_of(c)) for c in cells
                             if c["status"] == "ok" and value_of(c))
                if pts:
                    ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-", label=b,
                            color=color_of(run, b), markersize=4)
                for c in cells:
                    if c["status"] == "out_of_memory":
                        ooms = True
                        ax.plot([c["size"]], [0], "x", color=color_of(run, b), markersize=9,
                                clip_on=False, transform=ax.get_xaxis_transform())
            ax.set_xscale("log")
            ax.set_yscale("log")
            if ratio:  # 1.5x, not 1.5 x 10^0
                ticks = matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}x")
                ax.yaxis.set_major_formatter(ticks)
                ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
            ax.set_title(f"{w}: {name}", fontsize=9, loc="left")
            ax.set_xlabel("sequence length n (log)", fontsize=8)
            ax.set_ylabel(ylabel, fontsize=8)
            ax.grid(which="major", alpha=0.3)
    if ooms:
        note += "\nx on the floor: out of memory at that length (the runner's memory limit)"
    fig.suptitle(title, fontsize=10, x=0.01, ha="left")
    return finish(fig, run, note)


def recurrent_memory_figure(run):
    return recurrent_figure(
        run, lambda c: c["peak_rss_bytes"] / 1e6 if c.get("peak_rss_bytes") else None,
        "peak RSS (MB, log)", "What memory does each way back through time take?",
        "engine, compiled and the torch backends keep every state; revolve, multistage, "
        "segments and checkpoint recompute")


def recurrent_time_figure(run):
    ref = run["reference"]
    return recurrent_figure(
        run, lambda c: c.get("ratio_to_reference"), f"time over {ref}'s (log)",
        f"What does each way back through time cost, against {ref} (store-all)?",
        "each point: the median of the ratios of repetitions that took turns", ratio=True)


def intervals_figure(run):
    """The paper's experiment: multistage's time over store-all's against its checkpoint
    interval k, one line per state size; a star at the k it chose from its measured write and
    step times."""
    rows = run.get("intervals") or []
    if not rows:
        return None
    fig, ax = plt.subplots(figsize=(WIDTH, 5))
    for workload in dict.fromkeys(r["workload"] for r in rows):
        mine = [r for r in rows if r["workload"] == workload]
        swept = sorted((int(r["k"]), r["slowdown"]) for r in mine if r["k"] != "auto")
        chosen = [r for r in mine if r["k"] == "auto"]
        state = ""
        if mine[0].get("records") and mine[0].get("bytes_written"):
            state = f", {mine[0]['bytes_written'] / mine[0]['records'] / 1024:.0f} KiB a record"
        line = ax.plot([k for k, _ in swept], [v for _, v in swept], "o-", markersize=4,
                       label=f"{workload}, n={mine[0]['length']}{state}")[0]
        for r in chosen:
            ax.plot([r["interval"]], [r["slowdown"]], "*", color=line.get_color(), markersize=14,
                    label=f"{workload}: its own k={r['interval']:.0f}")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.axhline(1, color="gray", linewidth=0.8)
    ticks = matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}x")
    ax.yaxis.set_major_formatter(ticks)
    ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.set_xlabel("checkpoint interval k: a state written to disk every k steps (log)")
    ax.set_ylabel("time per sequence / store-all's (log)")
    ax.set_title("Multistage: how does its cost fall as it writes less often?", fontsize=10)
    ax.grid(which="major", alpha=0.3)
    return finish(fig, run, note="engine_multistage with 8 in-memory snapshots per interval; each "
                                 "point the median of 5 sequences over store-all's, taking turns; "
                                 "1x: store-all")


FIGURES = [("recurrent_memory.png", recurrent_memory_figure), ("recurrent_time.png", recurrent_time_figure), ("intervals.png", intervals_figure)]
