#!/bin/bash
# ab.sh ROUNDS FILTER BIN_A BIN_B [extra args]: alternate A and B; print per-benchmark medians and ratio B/A
R=$1; F=$2; A=$3; B=$4; shift 4
for r in $(seq $R); do
  for v in A B; do bin=${!v}
    $bin --data=/usr/share/dict/words --benchmark_filter="$F" --benchmark_repetitions=3 --benchmark_min_time=0.2 --benchmark_report_aggregates_only=true "$@" 2>/dev/null | awk -v v=$v '/_median/{sub("_median","",$1); n=split($1,p,"/"); print v, p[2]"/"p[4], $2}'
  done
done | python3 -c '
import sys, statistics as st
d={}
for line in sys.stdin:
    v,k,t=line.split(); d.setdefault(k,{}).setdefault(v,[]).append(float(t))
for k,x in d.items():
    a,b=x.get("A",[]),x.get("B",[])
    r=[bb/aa for aa,bb in zip(a,b)]
    print(f"{k:28s} A {st.median(a):9.1f}  B {st.median(b):9.1f}  B/A {st.median(r):.3f} [{min(r):.3f}, {max(r):.3f}]")
'
