"""studies/optim/figure.py: the study optim's figure, the optimizer alone against the memory
bandwidth its bytes need (optimizer.png). plots/plot.py finds this file and draws FIGURES for
every run it is given; each returns None where the run holds none of its data. A pure function
of the run's summary.json, as every figure is."""

import matplotlib.pyplot as plt

from plot import WIDTH, color_of, finish, label, main_backends, marker_of


def optimizer_figure(run):
    """The optimizer alone: time per update against the parameters, log-log, one line per
    backend and the memory-bandwidth bound of its bytes (the `bound` row) dashed."""
    cells = [c for c in run["cells"] if c["workload"] == "adamw" and c["status"] == "ok"]
    if not any(c["backend"] == "bound" for c in cells):
        return None
    fig, ax = plt.subplots(figsize=(WIDTH * 0.75, 4.2))
    for b in [b for b in main_backends(run) if b != "torchscript"] + ["bound"]:
        pts = sorted((max(1, c["size"] // 1000) * 1000, c["median_seconds"] * 1e3) for c in cells
                     if c["backend"] == b)
        if not pts:
            continue
        style = dict(color="black", linestyle="--", marker="") if b == "bound" else dict(
            color=color_of(run, b), marker=marker_of(run, b), markersize=4)
        ax.plot([p[0] for p in pts], [p[1] for p in pts],
                label="memory-bandwidth bound" if b == "bound" else b, **style)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("parameters (log)", fontsize=8)
    ax.set_ylabel("time per AdamW update (ms, log)", fontsize=8)
    ax.grid(which="major", alpha=0.3)
    fig.suptitle("What does the optimizer alone cost, against the memory bandwidth its bytes "
                 "need?", fontsize=10, x=0.01, ha="left")
    return finish(fig, run, note="bound: the same bytes moved without the arithmetic (16 read, "
                                 "12 written per parameter), timed in the same run; engine and "
                                 "compiled also read every gradient once more to check it")


FIGURES = [("optimizer.png", optimizer_figure)]
