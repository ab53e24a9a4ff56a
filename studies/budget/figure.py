"""studies/budget/figure.py: the study budget's figure, the compiled mode with and without a memory
budget (budget.png). plots/plot.py finds this file and draws FIGURES for every run it is given;
each returns None where the run holds none of its data. A pure function of the run's
summary.json, as every figure is."""

import matplotlib.pyplot as plt

from plot import WIDTH, cell_map, color_of, finish, instances_of, label


def budget_figure(run):
    """Per instance the budgeted compiled mode ran: the peak RSS and planned arena of compiled
    with and without the budget, in MB on a linear axis; the time ratio written beside."""
    by_key = cell_map(run)
    instances = [i for i in instances_of(run)
                 if by_key.get((i, "compiled_budget"), {}).get("status") == "ok"
                 and by_key.get((i, "compiled"), {}).get("status") == "ok"]
    if not instances:
        return None
    fig, axes = plt.subplots(1, 2, figsize=(WIDTH, 1.8 + 0.9 * len(instances)), squeeze=False)
    for ax, (what, value_of) in zip(axes[0], [
            ("peak RSS of the process (MB)", lambda c: c.get("max_rss_bytes")),
            ("planned arena (MB)", lambda c: c.get("counters", {}).get("planned_arena_bytes"))]):
        for j, b in enumerate(["compiled", "compiled_budget"]):
            ys = [i + (j - 0.5) * 0.36 for i in range(len(instances))]
            xs = [(value_of(by_key[(i, b)]) or 0) / 1e6 for i in instances]
            ax.barh(ys, xs, 0.34, color=color_of(run, b), label=b)
            for y, x, inst in zip(ys, xs, instances):
                ratio = by_key[(inst, b)]["median_seconds"] / by_key[(inst, "compiled")][
                    "median_seconds"]
                ax.text(x, y, f" {x:.1f} MB" + (f", {ratio:.2f}x the time" if j else ""),
                        va="center", fontsize=7, gid="value")
        ax.set_xlim(0, max((value_of(by_key[(i, b)]) or 0) / 1e6 for i in instances
                           for b in ["compiled", "compiled_budget"]) * 1.6)
        ax.set_yticks(range(len(instances)), [label(i) for i in instances], fontsize=8)
        ax.invert_yaxis()
        ax.set_xlabel(what, fontsize=8)
        ax.grid(axis="x", alpha=0.3)
    fig.suptitle("What does planning under half its memory cost the compiled mode?", fontsize=10,
                 x=0.01, ha="left")
    return finish(fig, run, note="the budget: half the unbudgeted plan's peak; activations are "
                                 "recomputed to meet it (engine/compiled/program.h)")


FIGURES = [("budget.png", budget_figure)]
