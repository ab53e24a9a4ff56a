#!/bin/bash
# dev/threads_sweep.sh: the engine past two cores, and its split thresholds swept
# (dev/notes.md, "Split thresholds"). Prints one line per process: part, backend, instance,
# threads, BP_SPLIT, median step in us, peak RSS in MB. Needs only bench_engine and
# bench_compiled (no torch), so a bare machine with the two and their libraries runs it.
#   dev/threads_sweep.sh BUILD_DIR DATA_FILE [MAX_THREADS]   e.g. build /usr/share/dict/words 16
set -u
B=$1; DATA=$2; MAX=${3:-$(nproc)}
threads_list() { for t in 1 2 4 8 16 32; do [ "$t" -le "$MAX" ] && echo "$t"; done; }
run() {  # part backend instance threads split
  local bin=$B/bench_$2 extra=""
  [ "$2" = compiled ] && extra="--dialect=priority --no-cache"
  BP_SPLIT=$5 $bin $extra --threads="$4" --data="$DATA" --instance="workload=$3" \
    --benchmark_repetitions=3 --benchmark_min_time=0.2 --benchmark_format=json 2>/dev/null |
    /usr/bin/env python3 -c '
import json, sys
runs = [b for b in json.load(sys.stdin)["benchmarks"] if b.get("run_type") == "aggregate"]
med = next(b for b in runs if b["aggregate_name"] == "median")
print(*sys.argv[1:], "%.1f" % med["real_time"], "%.1f" % (med.get("peak_rss_bytes", 0) / 1e6))
' "$1" "$2" "$3" "$4" "${5:--}" || echo "$1 $2 $3 $4 ${5:--} failed"
}
echo "# part backend instance threads split median_us peak_rss_mb"
SECONDS=0
for inst in mini_gpt,size=8 mini_gpt,size=64 char_mlp,size=1024 mlp_width,size=2048 \
  mini_gpt_wide,size=32; do
  for t in $(threads_list); do
    for be in engine compiled; do run scaling $be "$inst" "$t" ""; done
  done
done
echo "# scaling took ${SECONDS}s" >&2
for round in 1 2; do
  for t in 2 4; do
    [ "$t" -le "$MAX" ] || continue
    for inst in mini_gpt,size=8 mini_gpt,size=32 mini_gpt,size=64; do
      for e in 11 12 13 14 15; do
        for m in 17 19; do
          run "sweep$round" compiled "$inst" "$t" "elems=$((1 << e)),macs=$((1 << m))"
        done
      done
    done
  done
done
echo "# all took ${SECONDS}s" >&2
