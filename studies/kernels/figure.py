"""studies/kernels/figure.py: the study kernels's figure, each matmul dialect per op shape against
the FMA loop timed in turn (kernel_dialects.png). plots/plot.py finds this file and draws
FIGURES for every run it is given; each returns None where the run holds none of its data. A
pure function of the run's summary.json, as every figure is."""

import matplotlib.pyplot as plt

from plot import finish, label


# The compiled mode's matmul dialects (engine/dialects/dialects.h), in kernel_dialects.png.
DIALECT_COLORS = {"engine": "#1b9e77", "generated": "#66a61e", "blis": "#e6ab02",
                  "openblas": "#d95f02", "onednn": "#7570b3", "libxsmm": "#e7298a"}


def kernel_dialects_figure(run):
    """Per op shape of bench_compiled --kernel_rows, every dialect's GFLOP/s per thread (forward and
    backward of the op) as a fraction of the FMA loop timed in turn with it, auto's choice
    hatched, 85% and 80% as lines. (A run from before the in-turn loop: GFLOP/s against the FMA
    peak row.)"""
    kernels = run.get("kernels")
    if not kernels or not kernels.get("shapes"):
        return None
    shapes = kernels["shapes"]
    in_turn = any(s.get("fraction_of_fma") for s in shapes)
    dialects = list(dict.fromkeys(d for s in shapes for d in s["median_seconds"]))
    fig, ax = plt.subplots(figsize=(max(7.5, 1.8 * len(shapes) + 3), 5.2))
    width = 0.8 / len(dialects)
    for j, d in enumerate(dialects):
        xs, ys, chosen = [], [], []
        for i, s in enumerate(shapes):
            t = s["median_seconds"].get(d)
            y = s.get("fraction_of_fma", {}).get(d) if in_turn else t and s["flops"] / t * 1e-9
            if y:
                xs.append(i + (j - (len(dialects) - 1) / 2) * width)
                ys.append(y)
                chosen.append(s.get("auto") == d)
        ax.bar(xs, ys, width, label=d, color=DIALECT_COLORS.get(d, "gray"))
        picked = [(x, y) for x, y, c in zip(xs, ys, chosen) if c]
        if picked:  # drawn over, unlabelled: the legend keeps plain colours
            ax.bar([x for x, _ in picked], [y for _, y in picked], width, fill=False, hatch="//",
                   edgecolor="black")
    peak = kernels.get("peak_gflops")
    if in_turn:
        ax.axhline(1, color="black", linewidth=1, label="the FMA loop in turn", gid="reference")
        ax.axhline(0.85, color="black", linewidth=1, linestyle=":", label="85% of it",
                   gid="reference")
    elif peak:
        ax.axhline(peak, color="black", linewidth=1, label=f"FMA peak {peak:.0f} GFLOP/s",
                   gid="reference")
        ax.axhline(0.8 * peak, color="black", linewidth=1, linestyle=":", label="80% of peak",
                   gid="reference")
    ax.set_xticks(range(len(shapes)))

    def tick(shape):  # "step/char_mlp/hidden:1024/linear[64x1024,...]" on three short lines
        where, op = shape.replace("step/", "").rsplit("/", 1)
        name, operands = op.rstrip("]").split("[", 1)
        return f"{where.replace('/', ' ')}\n{name}\n" + operands.replace(",", ", ")

    ax.set_xticklabels([tick(s["shape"]) for s in shapes], fontsize=7)
    ax.set_ylabel("GFLOP/s per thread over the FMA loop's, timed in turn" if in_turn
                  else "GFLOP/s (forward + backward of the op)")
    ax.set_title("Which matmul kernel is fastest on each op shape? (hatched: auto's choice)",
                 fontsize=10)
    ax.grid(axis="y", alpha=0.3)
    return finish(fig, run, note="each bar: the median of the kernel rows' repetitions; "
                                 "flops: 2MNK over the op's three products")


FIGURES = [("kernel_dialects.png", kernel_dialects_figure)]
