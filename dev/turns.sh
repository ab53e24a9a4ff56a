#!/bin/bash
# turns.sh: two bench binaries in turn, round after round; per benchmark the medians of A and B
# and the ratio B/A, its median and [min, max] over rounds.
#   turns.sh steps ROUNDS FILTER A B   step benchmarks matching FILTER (3 repetitions of 0.2 s)
#   turns.sh kernels ROUNDS A B        the kernel rows (engine dialect) and the FMA peak
#   turns.sh rows ROUNDS A B INSTANCE...  each instance in a process of its own (its peak RSS is
#                                      that row's alone), e.g. workload=lstm,size=1024; with the
#                                      largest peak RSS of each side
mode=$1; R=$2; shift 2
if [ "$mode" = steps ]; then F=$1; shift; fi
A=$1; B=$2; shift 2
run() {
  if [ "$mode" = steps ]; then
    $1 --data=/usr/share/dict/words --benchmark_filter="$F" --benchmark_repetitions=3 \
      --benchmark_min_time=0.2 --benchmark_report_aggregates_only=true 2>/dev/null |
      awk -v v=$2 '/_median/{sub("_median","",$1); n=split($1,p,"/"); print v, p[2]"/"p[4], $2}'
  elif [ "$mode" = rows ]; then
    for instance in "${@:3}"; do
      $1 --instance="$instance" --benchmark_format=json 2>/dev/null | /usr/bin/python3 -c '
import json, sys
b = json.loads(sys.stdin.read())["benchmarks"][0]
print(sys.argv[1], sys.argv[2], b["real_time"], b.get("peak_rss_bytes", 0))' "$2" "$instance"
    done
  else
    $1 --data=/usr/share/dict/words --instance=workload=char_mlp,size=1024 \
      --instance=workload=mlp_width,size=2048 --kernel_rows --benchmark_filter='engine|peak' \
      --benchmark_repetitions=3 --benchmark_min_time=0.1 --benchmark_report_aggregates_only=true \
      2>/dev/null | awk -v v=$2 '/_median/{sub("_median","",$1); print v, $1, $2}'
  fi
}
for r in $(seq $R); do run $A A "$@"; run $B B "$@"; done | /usr/bin/python3 -c '
import sys, statistics as st
d, rss = {}, {}
for line in sys.stdin:
    v, k, t, *m = line.split()
    d.setdefault(k, {}).setdefault(v, []).append(float(t))
    if m: rss.setdefault(k, {})[v] = max(rss.get(k, {}).get(v, 0), float(m[0]) / 1e6)
for k, x in d.items():
    a, b = x.get("A", []), x.get("B", [])
    r = [bb / aa for aa, bb in zip(a, b)]
    ma, mb = rss.get(k, {}).get("A", 0), rss.get(k, {}).get("B", 0)
    m = f"  peak RSS A {ma:.1f} B {mb:.1f} MB" if k in rss else ""
    print(f"{k[-60:]:60s} A {st.median(a):10.3f}  B {st.median(b):10.3f}  B/A {st.median(r):.3f} [{min(r):.3f}, {max(r):.3f}]{m}")
'
