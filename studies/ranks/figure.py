"""studies/ranks/figure.py: the study ranks's figure, data parallel (ranks.png): per instance, the
time per step of one rank of two threads and of each row of ranks (its slowest rank's), ours and
the torch peers. plots/plot.py finds this file and draws FIGURES for every run it is given; each
returns None where the run holds none of its data. A pure function of the run's summary.json, as
every figure is."""

from plot import backends_of, dot_panels

# One rank of two threads, then the rows of ranks (at most plot.MAX_SERIES).
SERIES = ["compiled_2t", "engine_ranks", "compiled_ranks", "libtorch_ranks", "pytorch_ranks"]


def ranks_figure(run):
    series = [b for b in SERIES if b in backends_of(run)]
    if not any(b.endswith("_ranks") for b in series):
        return None
    ranks = run.get("options", {}).get("ranks", "N")

    def point(c):
        m = c.get("median_seconds")
        if not m:
            return None
        lo, hi = (c.get("median_interval_seconds") or [None, None])[:2]
        return m * 1e3, lo and lo * 1e3, hi and hi * 1e3, f"{m * 1e3:.3g} ms"

    return dot_panels(run, series, point,
                      "median time per step (ms, log; a row of ranks: its slowest rank's)",
                      f"Data parallel: {ranks} ranks of one thread against one rank of two threads",
                      labels=True)


FIGURES = [("ranks.png", ranks_figure)]
