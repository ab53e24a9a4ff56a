"""studies/first_step/figure.py: the study first_step's figure, a cold start to the first step,
with and without a cached plan (first_step.png). plots/plot.py finds this file and draws FIGURES
for every run it is given; each returns None where the run holds none of its data. A pure
function of the run's summary.json, as every figure is."""

from plot import backends_of, dot_panels


def first_step_figure(run):
    if not any(c["backend"] == "compiled_first_step" and c["status"] == "ok"
               for c in run["cells"]):
        return None

    def point(c):
        m = c.get("median_seconds")
        return (m * 1e3, None, None, None) if m else None

    series = [b for b in ["compiled", "compiled_first_step", "compiled_warm_start",
                          "torchscript_first_step"] if b in backends_of(run)]
    fig = dot_panels(run, series, point, "time (ms, log)",
                     "How long from a cold start to the first step, against a step?",
                     note="compiled_first_step: a cold start each time: the backend made, the "
                          "workload set up, its step captured, its kernels chosen by timing them, "
                          "the program planned and run once; compiled_warm_start: the same with "
                          "the plan in the plan cache (nothing timed or planned); "
                          "torchscript_first_step: the model built, scripted or traced, one step")
    return fig


FIGURES = [("first_step.png", first_step_figure)]
