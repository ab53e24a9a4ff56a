#!/usr/bin/python3
"""plots/history.py: every benchmark's median across the runs kept under results/, by commit.

Reads the summary.json of each finished run folder under the results folder (results/latest and
other links are followed once; unfinished runs, marked INCOMPLETE, are left out) and draws one
figure per workload, history_<phase>_<workload>.png in <results>/history/: a panel per size, a
line per backend, each run's median with its interval as an error bar. Runs are ordered by their
commit's place in the repository's history (git rev-list; a commit not in it goes by its date),
then by the time they ran, as airspeed velocity does. A change of processor between two runs is
marked on every panel, since a median moves with it whatever the code did. Runs made under other
conditions (precision, threads, instruction set, ranks) are never joined into one line: each
backend has a line per condition, named in its legend when the history holds more than one. What
cannot be read is named on one line each and skipped.

    /usr/bin/python3 plots/history.py results      # or: make history
Tests: plots/tests/test_plots.py.
"""
import os
import subprocess
import sys

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402

from plot import RunError, color_of, label, load_run, save  # noqa: E402

SOURCE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def load_runs(results):
    """[(summary, folder)] of the finished runs under `results`, each once; and the skipped."""
    runs, skipped, seen = [], [], set()
    for name in sorted(os.listdir(results)):
        folder = os.path.join(results, name)
        path = os.path.join(folder, "summary.json")
        if not os.path.isdir(folder) or not os.path.exists(path):
            continue
        if os.path.exists(os.path.join(folder, "INCOMPLETE")):
            skipped.append(f"{folder}: incomplete (interrupted or still running)")
            continue
        try:
            summary = load_run(folder)
            summary["run_id"], summary["machine"]["git_sha"]
        except RunError as e:
            skipped.append(f"{path}: unreadable ({e})")
            continue
        except (KeyError, TypeError) as e:
            skipped.append(f"{path}: unreadable ({type(e).__name__}: {e})")
            continue
        if summary["run_id"] not in seen:
            seen.add(summary["run_id"])
            runs.append((summary, folder))
    return runs, skipped


def commit_order(shas):
    """{sha: (place in `git rev-list`, commit time)}: older commits first."""
    git = ["git", "-C", SOURCE]
    try:
        listed = subprocess.run(git + ["rev-list", "--topo-order", "--reverse", "HEAD"],
                                capture_output=True, text=True, check=True).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        listed = []
    order = {}
    for sha in shas:
        place = next((i for i, full in enumerate(listed) if full.startswith(sha)), len(listed))
        try:
            when = int(subprocess.run(git + ["show", "-s", "--format=%ct", sha],
                                      capture_output=True, text=True, check=True).stdout.strip())
        except (OSError, subprocess.CalledProcessError, ValueError):
            when = 0
        order[sha] = (place, when)
    return order


def ordered(runs):
    shas = {s["machine"]["git_sha"].replace("-dirty", "") for s, _ in runs}
    order = commit_order(shas)
    return sorted(runs, key=lambda r: (order[r[0]["machine"]["git_sha"].replace("-dirty", "")],
                                       r[0]["run_id"]))


def processor(summary):
    env = summary["machine"].get("environment", {})
    if not env:
        return summary["machine"].get("cpu_model", "?")
    return f"family {env.get('cpu_family', '?')} model {env.get('cpu_model_number', '?')}"


def condition(summary):
    """What a run's times depend on besides the code and the processor, as a short label:
    precision, threads, instruction set, and ranks for a data-parallel run."""
    o = summary.get("options") or {}
    threads = o.get("threads", 1)
    parts = [str(o.get("precision", "fp32")), f"{threads} thread{'s' if threads != 1 else ''}",
             str(o.get("isa", "?"))]
    if o.get("study") == "ranks" or o.get("hostfile"):
        parts.append(f"{o.get('ranks', 1)} ranks")
    return ", ".join(parts)


LINE_STYLES = ["-", "--", "-.", ":"]


def figures(runs):
    """{file name: figure}, one per workload present in any run."""
    runs = ordered(runs)
    ticks = [f"{s['machine']['git_sha']}\n{s['run_id'][:8]}" for s, _ in runs]
    changes = [i for i in range(1, len(runs)) if processor(runs[i][0]) != processor(runs[i - 1][0])]
    conditions = sorted({condition(s) for s, _ in runs})
    workloads = {}  # (phase, workload) -> {instance: {(backend, condition): [(x, m, lo, hi)]}}
    for x, (summary, _) in enumerate(runs):
        for row in summary["rows"]:
            panels = workloads.setdefault((row["phase"], row["workload"]), {})
            for backend, cell in row["backends"].items():
                if cell.get("status") != "ok" or cell.get("median_seconds") is None:
                    continue
                lo, hi = cell.get("median_interval_seconds") or [None, None]
                m = cell["median_seconds"]
                panels.setdefault(row["instance"], {}).setdefault(
                    (backend, condition(summary)), []).append(
                    (x, m, m if lo is None else lo, m if hi is None else hi))
    out = {}
    for (phase, workload), panels in workloads.items():
        if not panels:
            continue
        fig, axes = plt.subplots(len(panels), 1, figsize=(max(6, 1.2 * len(runs) + 3),
                                                          1.1 + 2.2 * len(panels)), squeeze=False)
        for ax, (instance, lines) in zip(axes[:, 0], panels.items()):
            for (backend, cond), points in lines.items():
                xs, ms, los, his = zip(*points)
                ax.errorbar(xs, [m * 1e6 for m in ms],
                            yerr=[[(m - lo) * 1e6 for m, lo in zip(ms, los)],
                                  [(hi - m) * 1e6 for m, hi in zip(ms, his)]],
                            fmt="o", linestyle=LINE_STYLES[conditions.index(cond) % 4],
                            color=color_of(runs[-1][0], backend), markersize=3, capsize=2,
                            label=backend if len(conditions) == 1 else f"{backend} ({cond})")
            for i in changes:
                ax.axvline(i - 0.5, color="black", linestyle=":", linewidth=1)
            ax.set_yscale("log")
            ax.set_ylabel("µs per step", fontsize=8)
            ax.set_title(label(instance), fontsize=9)
            ax.set_xticks(range(len(runs)))
            ax.set_xticklabels(ticks, fontsize=6)
            ax.set_xlim(-0.5, len(runs) - 0.5)
            ax.grid(alpha=0.3)
        axes[0, 0].legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0, fontsize=8)
        note = "runs in commit order (short sha, date); median with its interval"
        if len(conditions) == 1:
            note += f"; every run at {conditions[0]}"
        if changes:
            note += "; dotted: the processor changed (" + ", ".join(
                f"{processor(runs[i - 1][0])} -> {processor(runs[i][0])}" for i in changes) + ")"
        fig.text(0.01, 0.005, note, fontsize=7, color="gray")
        fig.tight_layout(rect=(0, 0.02, 1, 1))
        out[f"history_{phase}_{workload}.png"] = fig
    return out


def main(argv):
    if len(argv) != 2:
        print("usage: history.py RESULTS_DIR   (e.g. results)", file=sys.stderr)
        return 2
    results = argv[1]
    if not os.path.isdir(results):
        print(f"error: {results}: no such results folder", file=sys.stderr)
        return 2
    runs, skipped = load_runs(results)
    for s in skipped:
        print(f"skipped: {s}", file=sys.stderr)
    if not runs:
        print(f"error: {results} holds no finished run with a summary.json", file=sys.stderr)
        return 2
    out_dir = os.path.join(results, "history")
    drawn = save(figures(runs), out_dir, dpi=100)
    print(f"history of {len(runs)} runs: {len(drawn)} figures in {out_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
