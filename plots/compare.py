#!/usr/bin/python3
"""plots/compare.py: draws one comparison of two runs (bench_run compare) as a figure.

A pure function of the <baseline>-vs-<new>.json that bench_run compare writes (harness/runner/compare.h): each
benchmark's change new / baseline in percent with its interval, coloured by its verdict, the threshold band
shaded; benchmarks that could not be compared are listed by name at the right, not dropped, and
those only one run holds are counted there.

    /usr/bin/python3 plots/compare.py results/compare/<baseline>-vs-<new>.json out.png
Tests: harness/tests/test_compare.py (from real runs), plots/tests/test_plots.py.
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402

VERDICT_COLORS = {"slower": "#d62728", "faster": "#2ca02c", "same": "#7f7f7f"}


def figure(report):
    rows = [r for r in report["rows"] if r["ratio"] is not None]
    others = [r for r in report["rows"] if r["ratio"] is None]
    fig, ax = plt.subplots(figsize=(10, 1.2 + 0.22 * max(len(rows), 4)))
    threshold = report["threshold"] * 100
    ax.axvspan(-threshold, threshold, color="#eeeeee", zorder=0,
               label=f"within the threshold (±{threshold:.0f}%)")
    ax.axvline(0, color="black", linewidth=0.8, zorder=1)
    for y, r in enumerate(rows):
        change = (r["ratio"] - 1) * 100
        lo, hi = (((v - 1) * 100) if v is not None else change for v in r["ratio_interval"])
        color = VERDICT_COLORS.get(r["verdict"], "black")
        ax.errorbar(change, y, xerr=[[change - lo], [hi - change]], fmt="o", color=color,
                    markersize=4, capsize=2, zorder=2)
    for verdict, color in VERDICT_COLORS.items():  # legend entries for the verdicts present
        if any(r["verdict"] == verdict for r in rows):
            ax.plot([], [], "o", color=color, label=verdict)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([f"{r['instance']} {r['backend']}" for r in rows], fontsize=7)
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.set_xlabel("change of the median time per step, new / baseline - 1 (%), with its interval")
    counts = ", ".join(f"{n} {v}" for v, n in report["counts"].items())
    ax.set_title(f"{report['b']}\nagainst {report['a']}: {counts}", fontsize=9)
    ax.grid(axis="x", alpha=0.3)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0, fontsize=8)
    notes = [f"{r['instance']} {r['backend']}: {r['verdict']}" + (f" ({r['note']})" if r["note"]
                                                                  else "") for r in others]
    notes += [f"unreadable: {u}" for u in report["unreadable"]]
    if report.get("only_in_a") or report.get("only_in_b"):  # counted, as the table counts them
        notes.append(f"not compared: {report.get('only_in_a', 0)} only in the baseline, "
                     f"{report.get('only_in_b', 0)} only in the new run")
    if notes:  # to the right, under the legend: outside the data
        fig.text(0.80, 0.5, "\n".join(n[:60] for n in notes[:30]), fontsize=6, va="top")
    m = report["machine"]
    env = m.get("environment", {})
    fig.text(0.01, 0.005, f"{m['cpu_model']} (family {env.get('cpu_family', '?')} model "
             f"{env.get('cpu_model_number', '?')}), {m['cpus']} CPUs", fontsize=7, color="gray")
    fig.tight_layout(rect=(0, 0.02, 0.8 if notes else 1, 1))
    return fig


def main(argv):
    if len(argv) != 3:
        print("usage: compare.py COMPARE_JSON OUT_PNG", file=sys.stderr)
        return 2
    try:
        with open(argv[1]) as f:
            report = json.load(f)
        report["rows"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        print(f"error: {argv[1]} cannot be read as a comparison: {type(e).__name__}: {e}",
              file=sys.stderr)
        return 2
    fig = figure(report)
    fig.savefig(argv[2], dpi=110)
    plt.close(fig)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
