#!/bin/bash
# turns.sh: two bench binaries in turn, round after round; per benchmark the medians of A and B
# and the ratio B/A, its median and [min, max] over rounds.
#   turns.sh steps ROUNDS FILTER A B   step benchmarks matching FILTER (3 repetitions of 0.2 s)
#   turns.sh kernels ROUNDS A B        the kernel rows (engine dialect) and the FMA peak
mode=$1; R=$2; shift 2
if [ "$mode" = steps ]; then F=$1; shift; fi
A=$1; B=$2
run() {
  if [ "$mode" = steps ]; then
    $1 --data=/usr/share/dict/words --benchmark_filter="$F" --benchmark_repetitions=3 \
      --benchmark_min_time=0.2 --benchmark_report_aggregates_only=true 2>/dev/null |
      awk -v v=$2 '/_median/{sub("_median","",$1); n=split($1,p,"/"); print v, p[2]"/"p[4], $2}'
  else
    $1 --data=/usr/share/dict/words --instance=workload=char_mlp,size=1024 \
      --instance=workload=mlp_width,size=2048 --kernel_rows --benchmark_filter='engine|peak' \
      --benchmark_repetitions=3 --benchmark_min_time=0.1 --benchmark_report_aggregates_only=true \
      2>/dev/null | awk -v v=$2 '/_median/{sub("_median","",$1); print v, $1, $2}'
  fi
}
for r in $(seq $R); do run $A A; run $B B; done | /usr/bin/python3 -c '
import sys, statistics as st
d = {}
for line in sys.stdin:
    v, k, t = line.split()
    d.setdefault(k, {}).setdefault(v, []).append(float(t))
for k, x in d.items():
    a, b = x.get("A", []), x.get("B", [])
    r = [bb / aa for aa, bb in zip(a, b)]
    print(f"{k[-60:]:60s} A {st.median(a):9.1f}  B {st.median(b):9.1f}  B/A {st.median(r):.3f} [{min(r):.3f}, {max(r):.3f}]")
'
