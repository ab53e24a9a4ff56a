#!/usr/bin/python3
"""dev/ranks/model.py: a model of data-parallel scaling (weak: each rank a whole batch), checked
against what this machine measures, then carried to 8, 64 and 512 ranks. The figure says it is a
model. dev/notes.md, "A model of data parallel past 4 ranks", holds its findings.

The model of one step at N ranks, one rank a host, the gradients G bytes in k buckets of 1 MB,
summed by a ring (engine/distributed/ring.h: 2(N-1) messages a bucket, 2(N-1)/N of the bytes):
    T(N) = C * max(1, N / cores) + k 2 (N-1) alpha + 2 (N-1) / N * G / beta
with C the compute of one rank's step (measured at one rank), `cores` the cores the ranks share
(the check here; 1 rank a host beyond it), alpha and beta the link's latency and bandwidth
(measured with build/dev/ring_link at 2 ranks: t(bytes) = 2 alpha + bytes / beta). The
gradients' sums are taken as not hidden under the backward (on this machine the overlap hides
2-4%, dev/notes.md); a dashed line gives the bound with all of it hidden, max(compute, sums).
Speedup S(N) = N C / T(N): N ranks' samples in the time of one step.

    dev/ranks/model.py [BUILD] [OUT]     (default build and /tmp/ranks_model; root for the link
                                          emulated by dev/two_hosts.sh, else only this host's)
"""
import json
import math
import os
import subprocess
import sys

BUILD = sys.argv[1] if len(sys.argv) > 1 else "build"
OUT = sys.argv[2] if len(sys.argv) > 2 else "/tmp/ranks_model"
HERE = os.path.dirname(os.path.abspath(__file__))
TWO_HOSTS = os.path.join(HERE, "..", "two_hosts.sh")
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_btl_vader_single_copy_mechanism="none", OMPI_MCA_rmaps_base_oversubscribe="1")
MODELS = ["workload=char_mlp,size=1024", "workload=mlp_width,size=2048",
          "workload=mini_gpt_wide,size=32"]
CLUSTER = dict(name="10 Gb/s, 10 us (modelled)", alpha=10e-6, beta=10e9 / 8)
BUCKET = 1 << 20


def out(argv, env=ENV):
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600).stdout


def fit_link(prefix=()):
    """alpha, beta from ring_link at 2 ranks: least squares of t = a + bytes b."""
    line = out(list(prefix) + ["mpirun", "-n", "2", f"{BUILD}/dev/ring_link"]).strip()
    d = json.loads(line.splitlines()[-1])
    x, y = d["bytes"], d["seconds"]
    n, mx, my = len(x), sum(x) / len(x), sum(y) / len(y)
    b = sum((xi - mx) * (yi - my) for xi, yi in zip(x, y)) / sum((xi - mx) ** 2 for xi in x)
    a = max(my - b * mx, y[0])  # the smallest message is latency alone
    return dict(alpha=a / 2, beta=1 / b)


def step(ranks, instance, prefix=()):
    """The compiled mode's step at `ranks` ranks of weak scaling: seconds, gradient bytes."""
    argv = list(prefix) + ["mpirun", "-n", str(ranks)]
    if prefix:
        argv += ["--hostfile", os.environ.get("HOSTS", "/tmp/backprop-bench-two-hosts")]
    text = out(argv + [f"{BUILD}/bench_ranks", f"--ranks={ranks}", "--mode=compiled",
                       "--scaling=weak", f"--instance={instance}", "--benchmark_repetitions=3",
                       "--benchmark_format=json"])
    runs = json.loads(text[text.index("{"):])["benchmarks"]
    median = [r for r in runs if r.get("aggregate_name") == "median"][0]
    return median["step_seconds_slowest_rank"], median["gradient_bytes"]


def model(c, g, n, link, cores):
    sums = math.ceil(g / BUCKET) * 2 * (n - 1) * link["alpha"] + 2 * (n - 1) / n * g / link["beta"]
    compute = c * max(1.0, n / cores)
    return compute + sums, max(compute, sums)


def main():
    os.makedirs(OUT, exist_ok=True)
    cores = len(os.sched_getaffinity(0))
    here = fit_link()
    links = [("this host (shared memory)", here, (), [1, 2, 3, 4], cores)]
    emulated = None
    if os.geteuid() == 0 and subprocess.run([TWO_HOSTS, "up", "10gbit"], capture_output=True).returncode == 0:
        try:
            emulated = fit_link((TWO_HOSTS, "run"))
            links.append(("two hosts, veth at 10 Gb/s (emulated)", emulated, (TWO_HOSTS, "run"),
                          [2], cores))
            rows = measure(links)
        finally:
            subprocess.run([TWO_HOSTS, "down"], capture_output=True)
    else:
        rows = measure(links)
    report(rows, links, cores)


def measure(links):
    rows = {}
    for instance in MODELS:
        c, g = step(1, instance)
        rows[instance] = dict(compute=c, grad_bytes=g, measured={})
        for name, link, prefix, counts, cores in links:
            for n in counts:
                if n > 1:
                    rows[instance]["measured"][(name, n)] = step(n, instance, prefix)[0]
    return rows


def report(rows, links, cores):
    print(f"links (ring_link at 2 ranks): " + "; ".join(
        f"{name}: alpha {l['alpha'] * 1e6:.1f} us, beta {l['beta'] / 1e9:.2f} GB/s"
        for name, l, *_ in links))
    print(f"{'instance':<28} {'link':<40} {'N':>3} {'measured':>10} {'model':>10} {'off':>6}")
    for instance, r in rows.items():
        for (name, n), t in r["measured"].items():
            link = next(l for nm, l, *_ in links if nm == name)
            m = model(r["compute"], r["grad_bytes"], n, link, cores)[0]
            print(f"{instance[9:]:<28} {name:<40} {n:>3} {t * 1e3:>8.2f}ms {m * 1e3:>8.2f}ms "
                  f"{(m / t - 1) * 100:>+5.0f}%")
    print(f"speedup at 8, 64, 512 ranks, one rank a host, link {CLUSTER['name']} "
          f"(no overlap / all of the sums hidden):")
    for instance, r in rows.items():
        cells = []
        for n in (8, 64, 512):
            t, best = model(r["compute"], r["grad_bytes"], n, CLUSTER, n)
            cells.append(f"{n}: {n * r['compute'] / t:.1f} / {n * r['compute'] / best:.1f}")
        print(f"  {instance[9:]:<26} " + ", ".join(cells))
    draw(rows, links, cores)


def draw(rows, links, cores):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (check, far) = plt.subplots(1, 2, figsize=(11, 4.2))
    colors = ["#1b9e77", "#d95f02", "#7570b3"]
    for color, (instance, r) in zip(colors, rows.items()):
        label = instance[9:].replace(",size=", " ")
        ns = [1, 2, 3, 4]
        here_name, here_link = links[0][0], links[0][1]
        check.plot(ns, [model(r["compute"], r["grad_bytes"], n, here_link, cores)[0] * 1e3
                        for n in ns], "-", color=color, label=label)
        check.plot([1] + [n for (nm, n) in r["measured"] if nm == here_name],
                   [r["compute"] * 1e3] + [t * 1e3 for (nm, n), t in r["measured"].items()
                                           if nm == here_name],
                   "o", color=color)
        big = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]
        far.plot(big, [n * r["compute"] / model(r["compute"], r["grad_bytes"], n, CLUSTER, n)[0] / n
                       for n in big], "-", color=color, label=label)
        far.plot(big, [n * r["compute"] / model(r["compute"], r["grad_bytes"], n, CLUSTER, n)[1] / n
                       for n in big], "--", color=color, linewidth=0.9)
    check.set_xticks([1, 2, 3, 4])
    check.set_xlabel(f"ranks on this host ({cores} cores shared)")
    check.set_ylabel("time per step, weak scaling (ms)")
    check.set_yscale("log")
    check.set_title("The model checked here: dots measured, lines modelled", fontsize=9, loc="left")
    check.legend(fontsize=7, loc="upper left")
    far.set_xscale("log", base=2)
    far.set_ylim(0, 1.05)
    far.set_xlabel("ranks, one a host (log)")
    far.set_ylabel("speedup over one rank / ranks")
    far.set_title(f"Modelled beyond: link {CLUSTER['name']}; dashed: every sum hidden",
                  fontsize=9, loc="left")
    far.legend(fontsize=7, loc="lower left", bbox_to_anchor=(0.4, 0.3))
    far.grid(alpha=0.3)
    fig.suptitle("A MODEL of data-parallel scaling (ring all-reduce), measured only up to 4 ranks",
                 fontsize=10)
    fig.tight_layout()
    path = os.path.join(OUT, "ranks_model.png")
    fig.savefig(path, dpi=110)
    print(f"figure: {path}")


if __name__ == "__main__":
    main()
