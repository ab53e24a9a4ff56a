#!/bin/bash
# dev/amp_sweep.sh: the study amp's compiled rows at 1 to MAX_THREADS threads, float32, bf16 on the
# processor's best path and bf16 on the widened path (BP_BF16_PATH=widened), in turn; then the
# bf16 products alone (dev/products/bf16_products.cc). Needs only bench_compiled and
# bf16_products (no torch), so a bare machine with the two and their libraries runs it
# (dev/notes.md, "bf16 on an Intel Xeon"). One line per process: instance, threads, path, median
# step in us, peak RSS in MB.
#   dev/amp_sweep.sh BUILD_DIR DATA_FILE [MAX_THREADS]   e.g. build /usr/share/dict/words 16
set -u
B=$1; DATA=$2; MAX=${3:-$(nproc)}
grep -m1 "model name" /proc/cpuinfo
echo "bf16 instructions: $(grep -m1 -o 'avx512_bf16\|amx_bf16' /proc/cpuinfo | sort -u | tr '\n' ' ')"
median() {
  /usr/bin/env python3 -c '
import json, sys
m = next(b for b in json.load(sys.stdin)["benchmarks"] if b.get("aggregate_name") == "median")
print(*sys.argv[1:], "%.0f" % m["real_time"], "%.1f" % (m.get("peak_rss_bytes", 0) / 1e6))' "$@"
}
SECONDS=0
for inst in char_mlp,size=1024 mlp_width,size=2048 mini_gpt_wide,size=32 char_rnn_wide,size=100; do
  for t in 1 2 4 8 16 32; do
    [ "$t" -le "$MAX" ] || continue
    for p in fp32 bf16 widened; do
      prec=$p path=""
      [ $p = widened ] && prec=bf16 path=widened
      BP_BF16_PATH=$path timeout 120 "$B/bench_compiled" --no-cache --threads="$t" --precision=$prec \
        --data="$DATA" --instance="workload=$inst" --benchmark_repetitions=3 \
        --benchmark_min_time=0.2 --benchmark_format=json 2>/dev/null |
        median "$inst" "$t" "$p" || echo "$inst $t $p failed"
    done
  done
  echo "# ${SECONDS}s" >&2
done
products=$B/dev/bf16_products
[ -x "$products" ] || products=$B/bf16_products
"$products" 3
