#!/usr/bin/python3
"""plots/plot.py: draws the figures of one run folder (what bench_run wrote) into <run>/plots/.

A pure function of the run's files: processes.json (what the runner saw of each process) and the
Google Benchmark JSON each backend process wrote. It never edits them and computes nothing but
ratios and unit changes of the medians they hold.

    /usr/bin/python3 plots/plot.py results/latest        # or: make plots RUN=results/<run-id>

Figures: runtime.png (median time per step), memory.png (peak RSS per process), speedup.png (our
engine's speedup over each baseline), scalar_chain.png (time per node against graph size).
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
    return {"rows": rows, "context": context, "run_id": processes["run_id"]}


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
    return instance.split("/", 1)[1]  # drop the phase: every scalar workload's is `grad`


def grouped_bars(run, value_of, ylabel, title):
    """Bars per instance, one per backend; a backend that did not run says why above its slot."""
    backends, instances = backends_of(run), instances_of(run)
    by_key = {(r["instance"], r["backend"]): r for r in run["rows"]}
    fig, ax = plt.subplots(figsize=(max(7, 1.2 * len(instances)), 4.8))
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


def runtime_figure(run):
    return grouped_bars(run, lambda r: r["median_seconds"] * 1e6, "median time per step (µs, log)",
                        "Time per step: build graph, forward, backward, read gradients")


def memory_figure(run):
    return grouped_bars(run, lambda r: r["process_peak_rss_bytes"] / 1e6,
                        "peak RSS of the process (MB, log)",
                        "Peak memory: one process per benchmark (wait4 ru_maxrss)")


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


def speedup_figure(run):
    data = speedups(run)
    instances = [i for i in instances_of(run) if not i.endswith("/empty")]
    fig, ax = plt.subplots(figsize=(max(7, 1.2 * len(instances)), 4.8))
    width = 0.8 / max(1, len(data))
    for j, (b, pairs) in enumerate(data.items()):
        pos = {inst: k for k, inst in enumerate(instances)}
        xs = [pos[i] + (j - (len(data) - 1) / 2) * width for i, _ in pairs]
        ys = [s for _, s in pairs]
        ax.bar(xs, ys, width, label=f"vs {b}", color=COLORS.get(b))
        for x, y in zip(xs, ys):
            ax.annotate(f"{y:.0f}x", (x, y), ha="center", va="bottom", fontsize=8)
    ax.set_yscale("log")
    ax.axhline(1, color="black", linewidth=0.8)
    ax.set_xticks(range(len(instances)), [label(i) for i in instances], rotation=30, ha="right")
    ax.set_ylabel("baseline time / engine time (log)")
    ax.set_title("How many times faster our engine computes the same gradients")
    if data:
        ax.legend(loc="lower right")
    fig.text(0.01, 0.01, caption(run), fontsize=7, color="gray")
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    return fig


def chain_figure(run):
    fig, ax = plt.subplots(figsize=(7, 4.8))
    for b in backends_of(run):
        pts = sorted((int(r["keys"]["nodes"]), 1e9 / r["items_per_second"]) for r in run["rows"]
                     if r["workload"] == "scalar_chain" and r["backend"] == b
                     and r["status"] == "ok" and r["items_per_second"])
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-", label=b, color=COLORS.get(b))
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("nodes in the graph (log)")
    ax.set_ylabel("time per node (ns, log)")
    ax.set_title("scalar_chain: cost per node as the graph grows")
    if ax.lines:
        ax.legend()
    ax.grid(which="major", alpha=0.3)
    fig.text(0.01, 0.01, caption(run), fontsize=7, color="gray")
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    return fig


FIGURES = {"runtime.png": runtime_figure, "memory.png": memory_figure,
           "speedup.png": speedup_figure, "scalar_chain.png": chain_figure}


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
    for name, make in FIGURES.items():
        fig = make(run)
        fig.savefig(os.path.join(out_dir, name), dpi=110)
        plt.close(fig)
    print(f"plots: {', '.join(FIGURES)} in {out_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
