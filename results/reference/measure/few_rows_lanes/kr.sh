#!/bin/bash
# kr.sh ROUNDS BIN_A BIN_B: kernel rows (engine dialect + peak), alternating; medians and B/A
R=$1; A=$2; B=$3
for r in $(seq $R); do for v in A B; do bin=${!v}
  $bin --data=/usr/share/dict/words --instance=workload=char_mlp,size=1024 --instance=workload=mlp_width,size=2048 --kernel_rows --benchmark_filter='engine|peak' --benchmark_repetitions=3 --benchmark_min_time=0.1 --benchmark_report_aggregates_only=true 2>/dev/null | awk -v v=$v '/_median/{sub("_median","",$1); print v, $1, $2}'
done; done | python3 -c '
import sys, statistics as st
d={}
for line in sys.stdin:
    v,k,t=line.split(); d.setdefault(k,{}).setdefault(v,[]).append(float(t))
for k,x in d.items():
    a,b=x.get("A",[]),x.get("B",[])
    r=[bb/aa for aa,bb in zip(a,b)]
    print(f"{k[-60:]:60s} A {st.median(a):9.1f}  B {st.median(b):9.1f}  B/A {st.median(r):.3f} [{min(r):.3f}, {max(r):.3f}]")
'
