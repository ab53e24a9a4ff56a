#!/usr/bin/python3
"""plots/plot.py: draws the figures of one run folder (what bench_run wrote) into <run>/plots/.

A pure function of the run's files: processes.json (what the runner saw of each process), the
Google Benchmark JSON each backend process wrote, and check/<backend>.json (the training losses).
It never edits them and computes nothing but ratios and unit changes of the numbers they hold.

    /usr/bin/python3 plots/plot.py results/latest        # or: make plots RUN=results/<run-id>

Figures, for what the run contains: runtime_<phase>.png (median time per step), memory_<phase>.png
(peak RSS per process), speedup_<phase>.png (our engine's speedup over each baseline), for
phase grad (scalar graphs) and step (training steps); scalar_chain.png (time per node against
graph size); mini_gpt_batch.png (time per step against batch size); mlp_width.png (time against
width, crossover marked); loss_curves.png (mini_gpt's training loss on every backend, overlaid).
Tests: plots/tests/test_plots.py, on a small real run kept in plots/tests/fixture_run/.
"""
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402

REFERENCE = "engine"
COLORS = {"engine": "#1b9e77", "libtorch": "#d95f02", "pytorch": "#7570b3", "torchscript": "#e7298a"}
SCALE_TO_SECONDS = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}


class RunError(Exception):
    """A run folder that cannot be plotted; the message says why and what to do."""


def parse_name(name):
    """Splits `<phase>/<workload>/<backend>/<key>:<value>...` (harness/names.h) into a dict."""
    parts = name.split("/")
    if len(parts) < 3:
        raise RunError(f"benchmark name {name!r} is not <phase>/<workload>/<backend>/...")
    keys = dict(p.split(":", 1) for p in parts[3:])
    instance = "/".join([parts[0], parts[1]] + [f"{k}:{v}" for k, v in keys.items() if k != "threads"])
    return {"phase": parts[0], "workload": parts[1], "backend": parts[2], "keys": keys,
            "instance": instance}


def load_run(run_dir):
    """One row per benchmark process: backend, instance, status, and (if it ran) its medians."""
    path = os.path.join(run_dir, "processes.json")
    if not os.path.isfile(path):
        raise RunError(f"{path} not found: is {run_dir} a folder written by bench_run?")
    with open(path) as f:
        processes = json.load(f)
    rows, context = [], {}
    for p in processes["processes"]:
        if p["phase"] != "bench":
            continue
        row = dict(parse_name(p["benchmark"]), status=p["status"], message=p["message"],
                   process_peak_rss_bytes=p["max_rss_bytes"], median_seconds=None,
                   items_per_second=None, benchmark_peak_rss_bytes=None)
        if p["status"] == "ok":
            with open(os.path.join(run_dir, p["file"])) as f:
                result = json.load(f)
            context[row["backend"]] = result["context"]
            medians = [b for b in result["benchmarks"] if b.get("aggregate_name") == "median"]
            m = medians[0] if medians else result["benchmarks"][0]
            row["median_seconds"] = m["real_time"] * SCALE_TO_SECONDS[m["time_unit"]]
            row["items_per_second"] = m.get("items_per_second")
            row["benchmark_peak_rss_bytes"] = m.get("peak_rss_bytes")
        rows.append(row)
    if not rows:
        raise RunError(f"{path} lists no benchmark process yet")
    losses = {}  # backend -> instance -> training losses, from the correctness check
    for p in processes["processes"]:
        check_file = os.path.join(run_dir, p["file"])
        if p["phase"] == "check" and p["status"] == "ok" and os.path.isfile(check_file):
            with open(check_file) as f:
                for r in json.load(f)["results"]:
                    if r.get("losses"):
                        losses.setdefault(p["backend"], {})[r["instance"]] = r["losses"]
    return {"rows": rows, "context": context, "run_id": processes["run_id"], "losses": losses}


def backends_of(run):
    return list(dict.fromkeys(r["backend"] for r in run["rows"]))  # first-seen order


def instances_of(run):
    return list(dict.fromkeys(r["instance"] for r in run["rows"]))


def caption(run):
    ctx = next(iter(run["context"].values()), {})
    threads = ", ".join(f"{b} {c.get('threads', '?')}" for b, c in run["context"].items())
    return (f"{ctx.get('cpu_model', 'unknown CPU')} ({ctx.get('num_cpus', '?')} CPUs); "
            f"threads: {threads}; run {run['run_id']}")


def label(instance):
    return instance.split("/", 1)[1]  # the phase is in the figure's name


PHASES = {"grad": "scalar graphs: build, forward, backward, read gradients",
          "step": "training steps: zero grads, forward, loss, backward, update"}


def phase_of(run, phase):
    """The run restricted to one phase, or None if it has none of it."""
    rows = [r for r in run["rows"] if r["phase"] == phase]
    return dict(run, rows=rows) if rows else None


def grouped_bars(run, value_of, ylabel, title):
    """Bars per instance, one per backend; a backend that did not run says why above its slot."""
    backends, instances = backends_of(run), instances_of(run)
    by_key = {(r["instance"], r["backend"]): r for r in run["rows"]}
    fig, ax = plt.subplots(figsize=(min(16, max(7, 0.8 * len(instances))), 4.8))
    width = 0.8 / len(backends)
    for j, b in enumerate(backends):
        xs, ys = [], []
        for i, inst in enumerate(instances):
            r = by_key.get((inst, b))
            x = i + (j - (len(backends) - 1) / 2) * width
            if r is None:
                continue
            if r["status"] == "ok" and value_of(r):
                xs.append(x)
                ys.append(value_of(r))
            else:
                ax.annotate(r["status"], (x, 0), xycoords=("data", "axes fraction"), rotation=90,
                            ha="center", va="bottom", fontsize=8, color=COLORS.get(b, "gray"))
        ax.bar(xs, ys, width, label=b, color=COLORS.get(b))
    ax.set_yscale("log")
    ax.set_xticks(range(len(instances)), [label(i) for i in instances], rotation=30, ha="right")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend()
    ax.grid(axis="y", which="major", alpha=0.3)
    fig.text(0.01, 0.01, caption(run), fontsize=7, color="gray")
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    return fig


def runtime_figure(run, phase):
    return grouped_bars(run, lambda r: r["median_seconds"] * 1e6, "median time per step (µs, log)",
                        f"Time per step, {PHASES[phase]}")


def memory_figure(run, phase):
    return grouped_bars(run, lambda r: r["process_peak_rss_bytes"] / 1e6,
                        "peak RSS of the process (MB, log)",
                        f"Peak memory of each benchmark's process (wait4), {phase} phase")


def speedups(run):
    """{baseline: [(instance, baseline time / engine time)]} over instances where both ran."""
    by_key = {(r["instance"], r["backend"]): r for r in run["rows"] if r["status"] == "ok"}
    out = {}
    for b in backends_of(run):
        if b == REFERENCE:
            continue
        out[b] = [(inst, by_key[(inst, b)]["median_seconds"] / by_key[(inst, REFERENCE)]["median_seconds"])
                  for inst in instances_of(run)
                  if (inst, b) in by_key and (inst, REFERENCE) in by_key
                  and by_key[(inst, REFERENCE)]["median_seconds"] > 0
                  and not inst.endswith("/empty")]
    return out


def speedup_figure(run, phase):
    data = speedups(run)
    instances = [i for i in instances_of(run) if not i.endswith("/empty")]
    fig, ax = plt.subplots(figsize=(min(16, max(7, 0.8 * len(instances))), 4.8))
    width = 0.8 / max(1, len(data))
    for j, (b, pairs) in enumerate(data.items()):
        pos = {inst: k for k, inst in enumerate(instances)}
        xs = [pos[i] + (j - (len(data) - 1) / 2) * width for i, _ in pairs]
        ys = [s for _, s in pairs]
        ax.bar(xs, ys, width, label=f"vs {b}", color=COLORS.get(b))
        for x, y in zip(xs, ys):
            ax.annotate(f"{y:.1f}x" if y < 10 else f"{y:.0f}x", (x, y), ha="center", va="bottom",
                        fontsize=8 if len(data) == 1 else 6)
    ax.set_yscale("log")
    ax.axhline(1, color="black", linewidth=0.8)
    ax.set_xticks(range(len(instances)), [label(i) for i in instances], rotation=30, ha="right")
    ax.set_ylabel("baseline time / engine time (log)")
    ax.set_title(f"How many times faster our engine is ({phase}: same work, same numbers)")
    if data:  # room above the bars for the legend, on the log axis
        ax.set_ylim(top=ax.get_ylim()[1] * 4)
        ax.legend(loc="upper right", ncol=len(data))
    fig.text(0.01, 0.01, caption(run), fontsize=7, color="gray")
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    return fig


def line_figure(run, workloads, key, xlabel, title, per_item=False):
    """One line per (workload, backend): median time against the size `key`, log-log."""
    fig, ax = plt.subplots(figsize=(7, 4.8))
    styles = ["o-", "s--", "^:"]
    for w_index, workload in enumerate(workloads):
        for b in backends_of(run):
            pts = sorted((int(r["keys"][key]),
                          1e9 / r["items_per_second"] if per_item else r["median_seconds"] * 1e3)
                         for r in run["rows"]
                         if r["workload"] == workload and r["backend"] == b and r["status"] == "ok"
                         and key in r["keys"] and (r["items_per_second"] or not per_item))
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], styles[w_index % 3],
                        label=f"{workload}, {b}" if len(workloads) > 1 else b, color=COLORS.get(b))
    if not ax.lines:
        plt.close(fig)
        return None
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("time per node (ns, log)" if per_item else "median time per step (ms, log)")
    ax.set_title(title)
    ax.legend()
    ax.grid(which="major", alpha=0.3)
    fig.text(0.01, 0.01, caption(run), fontsize=7, color="gray")
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    return fig


def chain_figure(run):
    return line_figure(run, ["scalar_chain"], "nodes", "nodes in the graph (log)",
                       "scalar_chain: cost per node as the graph grows", per_item=True)


def batch_figure(run):
    return line_figure(run, ["mini_gpt", "mini_gpt_wide"], "batch", "batch size (sequences, log)",
                       "mini_gpt: time per training step against batch size")


def crossovers(run, workload="mlp_width", key="width"):
    """{baseline: the smallest size from which the baseline is faster than our engine at every
    measured size, or None}, over the sizes both ran."""
    by_key = {(r["backend"], int(r["keys"][key])): r["median_seconds"] for r in run["rows"]
              if r["workload"] == workload and r["status"] == "ok" and key in r["keys"]}
    out = {}
    for b in backends_of(run):
        if b == REFERENCE:
            continue
        sizes = sorted(s for (bb, s) in by_key if bb == b and (REFERENCE, s) in by_key)
        if not sizes:
            continue
        faster = [by_key[(b, s)] < by_key[(REFERENCE, s)] for s in sizes]
        first = None
        for i in range(len(sizes)):
            if all(faster[i:]):
                first = sizes[i]
                break
        out[b] = (first, sizes[-1])
    return out


def crossover_text(run):
    lines = []
    for b, (first, largest) in crossovers(run).items():
        lines.append(f"mlp_width crossover vs {b}: " +
                     (f"{b} is faster from width {first}" if first is not None
                      else f"none up to {largest} (our engine is faster at every width)"))
    return lines


def width_figure(run):
    fig = line_figure(run, ["mlp_width"], "width", "hidden width (log)",
                      "mlp_width: time per training step against width")
    if fig is None:
        return None
    ax = fig.axes[0]
    for b, (first, _) in crossovers(run).items():
        if first is not None:
            ax.axvline(first, color=COLORS.get(b, "gray"), linestyle=":", linewidth=1)
            ax.annotate(f"{b} faster from {first}", (first, ax.get_ylim()[1]), rotation=90,
                        va="top", ha="right", fontsize=8)
    ax.text(0.98, 0.03, "\n".join(crossover_text(run)), transform=ax.transAxes, ha="right",
            va="bottom", fontsize=8, bbox=dict(facecolor="white", edgecolor="gray", alpha=0.9))
    return fig


def loss_figure(run, instance="step/mini_gpt/batch:8"):
    curves = {b: c[instance] for b, c in run["losses"].items() if instance in c}
    if not curves:
        candidates = sorted({i for c in run["losses"].values() for i in c if "/mini_gpt/" in i})
        if not candidates:
            return None
        instance = candidates[0]
        curves = {b: c[instance] for b, c in run["losses"].items() if instance in c}
    fig, ax = plt.subplots(figsize=(7, 4.8))
    for j, (b, losses) in enumerate(curves.items()):
        ax.plot(range(len(losses)), losses, ["-", "--", ":"][j % 3], label=b, color=COLORS.get(b),
                linewidth=max(0.8, 2.5 - 0.6 * j))
    ax.set_xlabel("training step (same initial weights, same batches)")
    ax.set_ylabel("training loss (mean cross-entropy, nats)")
    ax.set_title(f"{label(instance)}: training loss on every backend (they overlap)")
    ax.legend()
    ax.grid(alpha=0.3)
    fig.text(0.01, 0.01, caption(run), fontsize=7, color="gray")
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    return fig


def figures(run):
    """{file name: figure} for everything this run has data for."""
    out = {}
    for phase in PHASES:
        sub = phase_of(run, phase)
        if sub:
            out[f"runtime_{phase}.png"] = runtime_figure(sub, phase)
            out[f"memory_{phase}.png"] = memory_figure(sub, phase)
            out[f"speedup_{phase}.png"] = speedup_figure(sub, phase)
    for name, make in [("scalar_chain.png", chain_figure), ("mini_gpt_batch.png", batch_figure),
                       ("mlp_width.png", width_figure), ("loss_curves.png", loss_figure)]:
        fig = make(run)
        if fig is not None:
            out[name] = fig
    return out


def main(argv):
    if len(argv) != 2:
        print("usage: plot.py RUN_DIR   (e.g. results/latest)", file=sys.stderr)
        return 2
    try:
        run = load_run(argv[1])
    except RunError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    out_dir = os.path.join(argv[1], "plots")
    os.makedirs(out_dir, exist_ok=True)
    drawn = figures(run)
    for name, fig in drawn.items():
        fig.savefig(os.path.join(out_dir, name), dpi=110)
        plt.close(fig)
    for line in crossover_text(run):
        print(line)
    print(f"plots: {', '.join(drawn)} in {out_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
