"""studies/contention/figure.py: the study contention's figure (contention.png): per model row,
each backend's one-thread time over its two-thread time, on an idle machine and beside the busy
processes of bench_run --background. plots/plot.py finds this file and draws FIGURES for every run
it is given; each returns None where the run holds none of its data. A pure function of the run's
summary.json, as every figure is."""

from plot import backends_of, cell_map, dot_panels


def contention_figure(run):
    """Per instance, a dot per backend and load: one thread's time over two threads' (above 1:
    the second thread helps), idle (the backend's colour) and busy (its _busy row's)."""
    have = set(backends_of(run))
    bases = [b for b in backends_of(run)
             if {b + "_2t", b + "_busy", b + "_2t_busy"} <= have]
    if not bases:
        return None
    by_key = cell_map(run)
    cells = []
    for c in run["cells"]:
        for base in bases:
            for one in (base, base + "_busy"):
                two = by_key.get((c["instance"], one.replace(base, base + "_2t", 1)))
                if c["backend"] == one and c["status"] == "ok" and two and two["status"] == "ok":
                    cells.append(dict(c, speedup=c["median_seconds"] / two["median_seconds"]))
    if not cells:
        return None
    series = [b for base in bases for b in (base, base + "_busy")]

    def point(c):
        return c["speedup"], None, None, f"{c['speedup']:.2f}x"

    return dot_panels(dict(run, cells=cells), series, point,
                      "one thread's time over two threads' (above 1: faster on two)",
                      f"Do two threads pay beside other work? (_busy: {run['options']['background']})",
                      labels=True, log=False, reference_line=1)


FIGURES = [("contention.png", contention_figure)]
