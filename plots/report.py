#!/usr/bin/python3
"""plots/report.py: one self-contained HTML page per run, <run>/report.html, to open and read.

The summary table with every median's interval and every ratio's, the peak memory, the
crossovers, every figure of <run>/plots (embedded, so the page is one file that can be mailed or
archived), the check's verdicts, the failures, and the environment the numbers depend on. Like
plot.py it computes nothing: it lays out summary.json, check.json and processes.json. plot.py
writes it after the figures (so `make plots RUN=...` redraws both).

    /usr/bin/python3 plots/report.py results/latest
Tests: plots/tests/test_report.py (rendered in Debian's headless chromium: every image loads,
nothing overlaps).
"""
import base64
import html
import json
import os
import sys

STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em auto; max-width: 1200px; padding: 0 1em;
       color: #222; }
h1 { font-size: 1.4em; margin-bottom: 0.2em; } h2 { font-size: 1.15em; margin-top: 1.6em; }
.scroll { overflow-x: auto; }
table { border-collapse: collapse; font-size: 12px; margin: 0.5em 0; }
th, td { border: 1px solid #ccc; padding: 2px 6px; text-align: right; white-space: nowrap; }
th:first-child, td:first-child { text-align: left; }
td.bad { background: #fde0dc; } td.wide { background: #fff4d6; } td.text { text-align: left;
white-space: normal; max-width: 60em; overflow-wrap: anywhere; }
.interval { color: #777; font-size: 11px; }
figure { margin: 1em 0; } figure img { display: block; max-width: 100%; height: auto; }
figcaption { font-size: 12px; color: #555; }
.banner { padding: 0.5em 0.8em; border-radius: 4px; background: #e3f4e1; }
.banner.noisy { background: #fff4d6; } .banner.bad { background: #fde0dc; }
td.name { text-align: left; white-space: nowrap; }
th:first-child, td.name { position: sticky; left: 0; background: #fff; }
td.tie { color: #888; }
"""


def esc(x):
    return html.escape(str(x))


def load(path, default=None):
    return load_saying(path, default)[0]


def load_saying(path, default=None):
    """(the file's JSON, None), or (default, why it could not be read): a file that is missing or
    unreadable is said on the page, never taken for an empty one."""
    try:
        with open(path) as f:
            return json.load(f), None
    except OSError as e:
        return default, f"{os.path.basename(path)} cannot be read ({e.strerror})"
    except ValueError as e:
        return default, f"{os.path.basename(path)} is not valid JSON ({e})"


def human_time(s):
    if s is None:
        return "-"
    for unit, scale in (("s", 1), ("ms", 1e-3), ("us", 1e-6)):
        if s >= scale:
            return f"{s / scale:.3g} {unit}"
    return f"{s * 1e9:.3g} ns"


def human_ratio(r):
    """As summary.txt writes ratios: 412x, 32.3x, 2.5x, 0.23x (never 1.81e+03x)."""
    if r is None:
        return "-"
    return f"{r:.0f}x" if r >= 100 else f"{r:.1f}x" if r >= 1 else f"{r:.2f}x"


def table(head, rows, classes=None):
    out = ["<div class='scroll'><table><tr>" + "".join(f"<th>{esc(h)}</th>" for h in head)
           + "</tr>"]
    for i, row in enumerate(rows):
        cls = classes[i] if classes else [""] * len(row)
        out.append("<tr>" + "".join(f"<td class='{c}'>{v}</td>" for v, c in zip(row, cls))
                   + "</tr>")
    return "\n".join(out) + "</table></div>"


def planned(c):
    """A cell not run by design: skipped (a backend that does not run the workload, a size out of
    its sweep), or estimated above the memory limit before it ran. Not a failure."""
    return c["status"] == "skipped" or (
        c["status"] == "out_of_memory" and c.get("message", "").startswith("not run: estimated"))


def mostly_wide(s):
    """(wide, ok): how many medians have an interval wider than 10% of them. When they are most,
    the machine was noisy: one banner says so, and no cell is marked (a mark on every cell says
    nothing)."""
    ok = [c for row in s["rows"] for c in row["backends"].values() if c["status"] == "ok"]
    return sum(1 for c in ok if c.get("wide")), len(ok)


def summary_section(s):
    backends, ref = s["backends"], s["reference"]
    wide, ok = mostly_wide(s)
    mark_wide = not (ok and wide * 2 > ok)
    times, time_classes, ratios, ratio_classes = [], [], [], []
    for row in s["rows"]:
        cells, cls = [esc(row["instance"])], ["name"]  # never wrapped inside a name
        for b in backends:
            c = row["backends"].get(b)
            if c is None:
                cells.append("-"), cls.append("")
            elif c["status"] != "ok":
                cells.append(esc(c["status"].replace("_", " ")))
                cls.append("" if planned(c) else "bad")
            else:
                lo, hi = c.get("median_interval_seconds") or [None, None]
                interval = (f"<br><span class='interval'>{esc(human_time(lo))} to "
                            f"{esc(human_time(hi))}</span>" if lo is not None else "")
                mark = "" if c.get("verified", True) else " ?"
                cells.append(esc(human_time(c["median_seconds"]) + mark) + interval)
                cls.append("wide" if mark_wide and c.get("wide") else "")
        times.append(cells), time_classes.append(cls)
        cells, cls = [esc(row["instance"])], ["name"]
        for b in backends:
            if b == ref:
                continue
            c = row["backends"].get(b) or {}
            r = c.get("ratio_to_reference")
            lo, hi = c.get("ratio_interval") or [None, None]
            interval = (f"<br><span class='interval'>{human_ratio(lo)} to {human_ratio(hi)}"
                        "</span>" if lo is not None else "")
            cells.append("-" if r is None else human_ratio(r) + interval)
            # an interval holding 1: this run cannot say which of the two is faster
            cls.append("tie" if lo is not None and hi is not None and lo <= 1 <= hi else "")
        ratios.append(cells), ratio_classes.append(cls)
    memory = [[esc(row["instance"])] + [
        esc(f"{c['max_rss_bytes'] / 1e6:.1f} MB") if c and c.get("max_rss_bytes") else "-"
        for c in (row["backends"].get(b) for b in backends)] for row in s["rows"]]
    crossovers = "".join(
        f"<li>{esc(c['workload'])}: {esc(c['baseline'])} " + (
            f"faster from {esc(c['size_key'])}={c['from']}" if c["from"] is not None
            else f"not faster up to {esc(c['size_key'])}={c['largest']}") + "</li>"
        for c in s.get("crossovers", []))
    others = [b for b in backends if b != ref]
    return ("<h2>Median time per step</h2>"
            "<p>Each median with its interval under it (order statistics of the repetitions)"
            + ("; a yellow cell's interval is wider than 10% of its median" if mark_wide else "")
            + "; ? unverified; a red cell did not run as it should (see Failures).</p>"
            + table(["instance"] + backends, times, time_classes)
            + f"<h2>Time over {esc(ref)}'s</h2>"
            "<p>Each ratio with its interval (from the repetitions' pairs: the backends of a row "
            f"took turns); below 1x faster than {esc(ref)}; grey: the interval holds 1x, so this "
            "run cannot say which is faster.</p>"
            + (table(["instance"] + [f"{b}/{ref}" for b in others], ratios, ratio_classes)
               if others else "<p>One backend: no ratio.</p>")
            + "<h2>Peak RSS of each benchmark's process</h2>"
            + table(["instance"] + backends, memory,
                    [["name"] + [""] * len(backends)] * len(memory))
            + (f"<h2>Crossovers</h2><ul>{crossovers}</ul>" if crossovers else ""))


# The headline first (the README's figure), then time and memory, then the rest by name.
FIGURE_ORDER = ["speedup.png", "time.png", "memory.png", "model_sizes.png"]


def figure_order(names):
    return sorted(names, key=lambda n: (FIGURE_ORDER.index(n) if n in FIGURE_ORDER
                                        else len(FIGURE_ORDER), n))


def figures_section(run_dir):
    folder = os.path.join(run_dir, "plots")
    names = figure_order(n for n in os.listdir(folder) if n.endswith(".png")) if os.path.isdir(
        folder) else []
    parts = []
    for name in names:
        with open(os.path.join(folder, name), "rb") as f:
            data = base64.b64encode(f.read()).decode()
        parts.append(f"<figure><img alt='{esc(name)}' src='data:image/png;base64,{data}'>"
                     f"<figcaption>{esc(name)}</figcaption></figure>")
    return "<h2>Figures</h2>" + ("".join(parts) or "<p>No figures were drawn.</p>")


def unreadable(why):
    return f"<p class='banner bad'>{esc(why)}</p>"


def check_section(run_dir):
    doc, why = load_saying(os.path.join(run_dir, "check.json"), {})
    if why:
        return "<h2>Correctness check</h2>" + unreadable(why + ": the verdicts cannot be shown")
    check = doc.get("results", [])
    rows, classes = [], []
    for c in check:
        rel = c.get("max_rel_diff")
        rows.append([esc(c["instance"]), esc(c["backend"]), esc(c["status"]),
                     esc(c.get("reference", "")), "-" if rel is None else f"{rel:.2e}",
                     f"{c.get('tolerance', 0):.3g}", esc(c.get("message", ""))])
        classes.append(["text", "", "" if c["status"] in ("ok", "skipped") else "bad", "", "",
                        "", "text"])
    return ("<h2>Correctness check</h2>" + (table(["instance", "backend", "status", "reference",
                                                    "max rel diff", "tolerance", "message"],
                                                   rows, classes) if rows else "<p>none</p>"))


def failures_section(run_dir, cells_not_ok):
    doc, why = load_saying(os.path.join(run_dir, "processes.json"), {})
    if why:
        return "<h2>Failures</h2>" + unreadable(why + ": the processes cannot be listed")
    processes = doc.get("processes", [])
    bad = [p for p in processes if p.get("status") not in ("ok", "skipped")]
    if not bad and cells_not_ok:
        return "<h2>Failures</h2>" + unreadable(
            f"{cells_not_ok} benchmark(s) did not run, and processes.json names no process "
            "that failed: see the table above and the run's logs")
    if not bad:
        return "<h2>Failures</h2><p>None: every process ended well.</p>"
    rows = [[esc(p.get("backend")), esc(p.get("phase")), esc(p.get("benchmark")),
             esc(p.get("status")), esc(p.get("message")), esc(p.get("log"))] for p in bad]
    return "<h2>Failures</h2>" + table(["backend", "phase", "benchmark", "status", "why", "log"],
                                       rows, [["", "", "text", "bad", "text", "text"]] * len(rows))


def environment_section(s):
    env = (s["machine"] or {}).get("environment", {})
    rows = [[esc(k), esc(v)] for k, v in env.items()]
    rows += [[esc(k), esc(v)] for k, v in (s["machine"] or {}).items() if not isinstance(v, dict)]
    rows += [[esc("option " + k), esc(v)] for k, v in s.get("options", {}).items()]
    for backend, ctx in s.get("backend_contexts", {}).items():
        rows += [[esc(f"{backend} {k}"), esc(ctx[k])] for k in
                 ("backend_version", "compiler", "cxx_flags", "blas", "blas_threads", "matmul")
                 if k in ctx]
    return "<h2>Environment</h2>" + table(["what", "value"], rows, [["text", "text"]] * len(rows))


def counted(others):
    """As summary.txt says them: one process itself, more as "N processes: program count, ..."."""
    if len(others) == 1:
        return others[0]
    count = {}
    for o in others:
        program = o.split(" ", 1)[-1]
        count[program] = count.get(program, 0) + 1
    return f"{len(others)} processes: " + ", ".join(
        f"{p} {n}" for p, n in sorted(count.items(), key=lambda x: (-x[1], x[0])))


def report(run_dir):
    s = load(os.path.join(run_dir, "summary.json"))
    if not s or "rows" not in s:
        raise ValueError(f"{run_dir}/summary.json missing or unreadable")
    cells = [c for row in s["rows"] for c in row["backends"].values()]
    statuses = [c["status"] for c in cells]
    failed = [c["status"] for c in cells if c["status"] != "ok" and not planned(c)]
    not_run = sum(1 for c in cells if c["status"] != "ok" and planned(c))
    m = s["machine"] or {}  # none in a run imported from GradBench's logs alone
    env = m.get("environment", {})
    others = m.get("other_benchmarks") or []
    warnings = []
    if others:  # as summary.txt says it
        warnings.append(
            f"warning: other benchmarks ran on this machine during this run ({counted(others)}); "
            f"load average {m.get('load_average_start', -1):.2f} at the start, "
            f"{m.get('load_average_end', -1):.2f} at the end: timings may be inflated")
    for name in ("check.json", "processes.json"):
        if load_saying(os.path.join(run_dir, name))[1]:
            warnings.append(load_saying(os.path.join(run_dir, name))[1])
    bad = failed or warnings  # a failure, another benchmark, a file unreadable: red
    # Wide intervals on most cells: the numbers are there, but a loaded machine made them.
    wide, ok = mostly_wide(s)
    if ok and wide * 2 > ok:
        warnings.append(f"{wide} of {ok} medians have an interval wider than 10%: "
                        "the machine was noisy (load, other processes); compare ratios within "
                        "this run, or run again on a quieter machine or with more repetitions")
    level = " bad" if bad else " noisy" if warnings else ""
    banner = (f"<p class='banner{level}'>{len(statuses)} benchmarks: "
              f"{statuses.count('ok')} ran"
              + (f", {not_run} not run by design (skipped, or estimated above the memory limit)"
                 if not_run else "")
              + (f", {len(failed)} did not ({esc(', '.join(sorted(set(failed))))})" if failed
                 else "") + "".join(f"<br>{esc(w)}" for w in warnings) + "</p>")
    by_threads = {}
    for b, n in s["threads"].items():
        by_threads.setdefault(n, []).append(b)
    threads = "; ".join(f"{n} thread{'s' if n != 1 else ''}: {', '.join(bs)}"
                        for n, bs in sorted(by_threads.items()))
    o = s.get("options") or {}
    conditions = [f"precision {o.get('precision', 'fp32')}",
                  f"instruction set {o.get('isa', '?')}"]
    if o.get("study") == "ranks" or o.get("hostfile"):
        conditions.append(f"{o.get('ranks', 1)} ranks")
    if o.get("precision") == "bf16":  # which bf16 path each backend took on this processor
        paths = {}
        for b, ctx in (s.get("backend_contexts") or {}).items():
            if ctx.get("bf16_products"):
                paths.setdefault(ctx["bf16_products"], []).append(b)
        if paths:
            conditions.append("bf16 products: " + "; ".join(
                f"{p} ({', '.join(bs)})" for p, bs in sorted(paths.items())))
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>backprop-bench run {esc(s['run_id'])}</title><style>{STYLE}</style></head>
<body>
<h1>backprop-bench run {esc(s['run_id'])}</h1>
<p>git {esc(m.get('git_sha', '?'))}; {esc(m.get('cpu_model', '?'))} (family
{esc(env.get('cpu_family', '?'))} model {esc(env.get('cpu_model_number', '?'))} stepping
{esc(env.get('cpu_stepping', '?'))}), {esc(m.get('cpus', '?'))} CPUs; study
{esc(s.get('study', 'main'))}</p>
<p>Every backend at {esc(', '.join(conditions))}; {esc(threads)}</p>
{banner}
{summary_section(s)}
{figures_section(run_dir)}
{check_section(run_dir)}
{failures_section(run_dir, len(failed))}
{environment_section(s)}
</body></html>
"""


def write_report(run_dir):
    path = os.path.join(run_dir, "report.html")
    text = report(run_dir)
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.replace(path + ".tmp", path)
    return path


def main(argv):
    if len(argv) != 2:
        print("usage: report.py RUN_DIR   (e.g. results/latest)", file=sys.stderr)
        return 2
    try:
        print(f"report: {write_report(argv[1])}")
    except (OSError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
