"""studies/gradbench/figure.py: GradBench's evals, a panel per eval: a gradient's time against the
eval's size on every backend, an eval's tensor form (workloads/gradbench_tensor.h) in the same
panel as "<backend> tensor" (gradbench.png). plots/plot.py finds this file and draws FIGURES for
every run it is given, the main run's included; None where the run holds no eval."""

from plot import MAX_SERIES, size_panels, workloads_in_family

FAMILY = "GradBench evals"  # the evals' family in the registry (workloads/gradbench.h)
TENSOR_FORM = "_tensor"
# Ours first, eager and compiled, scalar and tensor; then libtorch's tensor code and ADOL-C.
FIRST = ["engine", "compiled", "engine tensor", "compiled tensor", "libtorch tensor", "adolc"]


def gradbench_figure(run):
    """A panel per GradBench eval: a gradient's time against the eval's size, every backend; an
    eval's tensor form in the same panel, as "<backend> tensor"."""
    cells = []
    for c in run["cells"]:
        if c["workload"].endswith(TENSOR_FORM):
            c = dict(c, workload=c["workload"][:-len(TENSOR_FORM)],
                     backend=c["backend"] + " tensor")
        cells.append(c)
    evals = workloads_in_family(dict(run, cells=cells), FAMILY)
    present = {c["backend"] for c in cells if c["workload"] in evals}
    series = [b for b in FIRST if b in present] + sorted(present - set(FIRST))
    run = dict(run, cells=cells, crossovers=[x for x in run["crossovers"]
                                             if not x["workload"].endswith(TENSOR_FORM)])
    return size_panels(run, evals, series[:MAX_SERIES],
                       lambda c: c["median_seconds"] and c["median_seconds"] * 1e3,
                       "time per gradient (ms, log)",
                       "GradBench's evals: how does a gradient's time grow with the eval's size?")


FIGURES = [("gradbench.png", gradbench_figure)]
