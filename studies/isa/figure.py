"""studies/isa/figure.py: the study isa's figure, libtorch's time over ours at each
instruction-set level (isa.png). plots/plot.py finds this file and draws FIGURES for every run it
is given; each returns None where the run holds none of its data. A pure function of the run's
summary.json, as every figure is."""

from plot import backends_of, cell_map, dot_panels

LEVELS = ("avx2", "avx512")


def isa_figure(run):
    """Per instance, ours (eager and compiled) at avx2 and at avx512: libtorch's time at the same
    level over ours (above 1: ours faster)."""
    present = backends_of(run)
    series = [f"{b}_{level}" for b in ("engine", "compiled") for level in LEVELS
              if f"{b}_{level}" in present and f"libtorch_{level}" in present]
    if not series:
        return None
    by_key = cell_map(run)
    cells = []
    for c in run["cells"]:
        if c["backend"] not in series or c["status"] != "ok":
            continue
        torch = by_key.get((c["instance"], "libtorch_" + c["backend"].rsplit("_", 1)[1]))
        if torch and torch["status"] == "ok":
            cells.append(dict(c, ratio=torch["median_seconds"] / c["median_seconds"]))
    if not cells:
        return None

    def point(c):
        return c["ratio"], None, None, f"{c['ratio']:.2f}x"

    return dot_panels(dict(run, cells=cells), series, point,
                      "libtorch's time over ours at the same instruction-set level (above 1: ours "
                      "faster)", "Ours against libtorch at AVX2 and at AVX-512", labels=True,
                      log=False, reference_line=1)


FIGURES = [("isa.png", isa_figure)]
