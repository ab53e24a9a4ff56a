#!/bin/bash
# compile_vs_taping.sh: our compiled scalar program's cold first step against ADOL-C's, in turn,
# each in a fresh process: ADOL-C tapes and differentiates (--taping=every_step, one step), ours
# captures, compiles and runs (--time_first_step, one step; compile_seconds is the capture and the
# compile alone). Medians over ROUNDS; each side's steady step too, for what taping adds, cold
# (the first step's) and warm (a step that tapes again into buffers a former step paged in).
#   dev/compile_vs_taping.sh ROUNDS BUILD INSTANCE...   e.g. 3 build workload=lstm,size=1024
R=$1; BUILD=$2; shift 2
one() {  # binary flags... -> real_time in ms and, if reported, compile_seconds in ms
  "$@" --benchmark_format=json 2>/dev/null | /usr/bin/python3 -c '
import json, sys
b = json.loads(sys.stdin.read())["benchmarks"][0]
print(b["real_time"] / 1e3, b.get("compile_seconds", 0) * 1e3)'
}
for instance in "$@"; do
  for r in $(seq $R); do
    echo adolc_first $(one $BUILD/bench_adolc --taping=every_step --warmup_steps=0 \
      --benchmark_min_time=0 --instance=$instance)
    echo compiled_first $(one $BUILD/bench_compiled --time_first_step --warmup_steps=0 \
      --benchmark_min_time=0 --instance=$instance)
    echo adolc_steady $(one $BUILD/bench_adolc --instance=$instance)
    echo adolc_retaping $(one $BUILD/bench_adolc --taping=every_step --instance=$instance)
    echo compiled_steady $(one $BUILD/bench_compiled --instance=$instance)
  done | /usr/bin/python3 -c '
import sys, statistics as st
d = {}
for line in sys.stdin:
    k, t, c = line.split()
    d.setdefault(k, []).append((float(t), float(c)))
m = {k: st.median(t for t, _ in v) for k, v in d.items()}
first_a, first_c = m["adolc_first"], m["compiled_first"]
taping = first_a - m["adolc_steady"]
warm = m["adolc_retaping"] - m["adolc_steady"]
compile_ms = st.median(c for _, c in d["compiled_first"])
print(f"{sys.argv[1]:26s} first step: ADOL-C {first_a:8.2f} ms, ours {first_c:8.2f} ms "
      f"({first_c / first_a:.2f}x); taping {taping:8.2f} ms, our capture and compile "
      f"{compile_ms:7.2f} ms ({compile_ms / taping:.2f}x; taping warm {warm:.2f} ms, "
      f"{compile_ms / warm:.2f}x)")' "$instance"
done
