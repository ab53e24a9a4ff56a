"""studies/amp/figure.py: the study amp's figure, each model's training loss in float32 and under
bf16, ours and libtorch's (amp.png): the check's losses, 200 steps in this study, from the same
weights and batches. plots/plot.py finds this file and draws FIGURES for every run it is given;
each returns None where the run holds none of its data. A pure function of the run's summary.json,
as every figure is."""

from plot import color_of, finish, label, panel_grid

# Four series a panel: ours and torch's C++ backend, each in float32 (solid) and bf16 (dashed).
SERIES = [("engine", "-"), ("engine_bf16", "--"), ("libtorch", "-"), ("libtorch_bf16", "--")]


def amp_figure(run):
    """Per model instance with a bf16 row, the check's training losses of SERIES."""
    curves = {}
    for c in run["cells"]:
        if c["backend"] in dict(SERIES) and c.get("check_losses"):
            curves.setdefault(c["instance"], {})[c["backend"]] = c["check_losses"]
    instances = [i for i, by in curves.items() if any(b.endswith("_bf16") for b in by)]
    if not instances:
        return None
    fig, axes = panel_grid(len(instances), 3.3)
    for ax, instance in zip(axes, instances):
        for b, style in SERIES:
            if b in curves[instance]:
                losses = curves[instance][b]
                ax.plot(range(len(losses)), losses, style, label=b, color=color_of(run, b),
                        linewidth=1.2)
        ax.set_title(label(instance), fontsize=9, loc="left")
        ax.set_xlabel("training step", fontsize=8)
        ax.set_ylabel("training loss (nats)", fontsize=8)
        ax.grid(alpha=0.3)
    fig.suptitle("Does bf16 train as float32 does? (dashed: bf16; same weights, same batches)",
                 fontsize=10)
    return finish(fig, run)


FIGURES = [("amp.png", amp_figure)]
