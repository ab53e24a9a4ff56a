"""studies/fusion/figure.py: the study fusion's figure, the compiled mode with its fused groups and
without (fusion.png). plots/plot.py finds this file and draws FIGURES for every run it is given;
each returns None where the run holds none of its data. A pure function of the run's
summary.json, as every figure is."""

import matplotlib.pyplot as plt

from plot import WIDTH, cell_map, color_of, finish, instances_of, label

PAIR = ["compiled_unfused", "compiled"]


def fusion_figure(run):
    """Per instance both ran: each one's time over our eager engine's (a linear axis: ratios near
    1), and the bytes its program moves per step (the bytes_moved counter; a log axis: rows from
    1 to 1000 MB); the fused groups written beside."""
    by_key = cell_map(run)
    instances = [i for i in instances_of(run)
                 if all(by_key.get((i, b), {}).get("status") == "ok" for b in PAIR + ["engine"])]
    if not instances:
        return None
    fig, axes = plt.subplots(1, 2, figsize=(WIDTH, 1.8 + 0.7 * len(instances)), squeeze=False)
    panels = [("time per step over engine's", lambda i, c: c["median_seconds"] /
               by_key[(i, "engine")]["median_seconds"], "{:.2f}x", False),
              ("bytes moved per step (MB, modelled)",
               lambda i, c: c.get("counters", {}).get("bytes_moved", 0) / 1e6, "{:.1f} MB", True)]
    for ax, (what, value_of, text, log) in zip(axes[0], panels):
        most, least = 0, float("inf")
        for j, b in enumerate(PAIR):
            ys = [k + (j - 0.5) * 0.36 for k in range(len(instances))]
            xs = [value_of(i, by_key[(i, b)]) for i in instances]
            most, least = max([most] + xs), min([least] + [x for x in xs if x > 0])
            ax.barh(ys, xs, 0.34, color=color_of(run, b), label=b)
            for y, x, inst in zip(ys, xs, instances):
                groups = by_key[(inst, b)].get("counters", {}).get("fused_groups", 0)
                note = (f", {groups:.0f} group{'s' if groups != 1 else ''}"
                        if j and groups and log else "")
                ax.text(x, y, " " + text.format(x) + note, va="center", fontsize=7, gid="value")
        if log:
            ax.set_xscale("log")
            ax.set_xlim(least / 2, most * 30)
        else:
            ax.set_xlim(0, most * 1.6)
        ax.set_yticks(range(len(instances)), [label(i) for i in instances], fontsize=8)
        ax.invert_yaxis()
        ax.set_xlabel(what, fontsize=8)
        ax.grid(axis="x", alpha=0.3)
    fig.suptitle("What do fused groups buy the compiled mode?", fontsize=10, x=0.01, ha="left")
    return finish(fig, run, note="fused: chains of elementwise and row-wise ops run tile by tile "
                                 "(engine/compiled/fusion.h); unfused: --fusion=off")


FIGURES = [("fusion.png", fusion_figure)]
