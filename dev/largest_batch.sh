#!/bin/bash
# dev/largest_batch.sh: RAF's other claim for mixed precision, a larger batch in the same memory:
# the largest mini_gpt_wide batch whose training step runs under a memory limit, float32 and bf16,
# ours (compiled) and libtorch's (autocast). The limit is bench_run's --memory-limit, an address
# space (prlimit --as), so libtorch's mapped but untouched library pages count against it too.
# Doubles the batch until a step fails, then bisects; each try is a check of 2 training steps.
# Prints: backend precision largest_batch.
#   dev/largest_batch.sh BUILD_DIR DATA_FILE [LIMIT]   e.g. build /usr/share/dict/words 1G
set -u
B=$1; DATA=$2; LIMIT=${3:-1G}
fits() {  # backend precision batch
  local extra=""
  [ "$1" = compiled ] && extra="--no-cache"
  prlimit --as="$(numfmt --from=iec "$LIMIT")" "$B/bench_$1" $extra --precision="$2" \
    --data="$DATA" --instance="workload=mini_gpt_wide,size=$3,check_steps=2" \
    --check_out=/dev/stdout 2>/dev/null | grep -q '"status": "ok"'
}
for backend in compiled libtorch; do
  for precision in fp32 bf16; do
    lo=0 hi=1
    while fits $backend $precision $hi; do lo=$hi hi=$((hi * 2)); [ $hi -gt 4096 ] && break; done
    while [ $((hi - lo)) -gt 1 ]; do
      mid=$(((lo + hi) / 2))
      if fits $backend $precision $mid; then lo=$mid; else hi=$mid; fi
    done
    echo "$backend $precision $lo"
  done
done
