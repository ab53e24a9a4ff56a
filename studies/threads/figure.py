"""studies/threads/figure.py: the study threads's figure, two threads over one, per backend
(threads.png). plots/plot.py finds this file and draws FIGURES for every run it is given; each
returns None where the run holds none of its data. A pure function of the run's summary.json, as
every figure is."""

from plot import backends_of, cell_map, dot_panels


def threads_figure(run):
    """Per instance and backend with a two-thread variant, its one-thread time over its
    two-thread time (above 1: the second thread helps)."""
    pairs = [b[:-3] for b in backends_of(run) if b.endswith("_2t") and b[:-3] in backends_of(run)]
    if not pairs:
        return None
    by_key = cell_map(run)
    cells = []
    for c in run["cells"]:
        two = by_key.get((c["instance"], c["backend"] + "_2t"))
        if c["backend"] in pairs and c["status"] == "ok" and two and two["status"] == "ok":
            cells.append(dict(c, speedup=c["median_seconds"] / two["median_seconds"]))
    if not cells:
        return None
    view = dict(run, cells=cells)

    def point(c):
        return c["speedup"], None, None, f"{c['speedup']:.2f}x"

    return dot_panels(view, pairs, point, "one thread's time over two threads' (above 1: faster "
                      "on two)", "What do two threads buy each backend?", labels=True, log=False,
                      reference_line=1)


FIGURES = [("threads.png", threads_figure)]
