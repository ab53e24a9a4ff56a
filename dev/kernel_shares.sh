#!/bin/bash
# kernel_shares.sh BUILD INSTANCE...: each compiled step's time by kind of kernel (products,
# attention, elementwise, row-wise, memset/memmove, optimizer, the rest), from perf's cpu-clock
# samples of bench_compiled on that instance alone, e.g.
#   dev/kernel_shares.sh build workload=mini_gpt,size=32 workload=lstm_tensor,size=1024
# What fusion can buy at most: the products' and attention's share stays. (BP_PERF_MAP=1: the
# generated products are named in /tmp/perf-<pid>.map, so perf counts them as products.)
build=$1; shift
for inst in "$@"; do
BP_PERF_MAP=1 perf record -q -e cpu-clock -o /tmp/perf.row "$build"/bench_compiled --data=/usr/share/dict/words --instance=$inst --benchmark_min_time=1.5 >/dev/null 2>&1
perf report -i /tmp/perf.row --no-children --sort symbol 2>/dev/null | grep -v "^#" | grep "%" | /usr/bin/python3 -c '
import sys,re
cats={"products":0,"attention":0,"elementwise":0,"rowwise":0,"memory":0,"optimizer":0,"other":0}
for line in sys.stdin:
    m=re.match(r"\s*([\d.]+)%\s+\[.\]\s+(.*)",line)
    if not m: continue
    p=float(m.group(1)); s=m.group(2)
    if re.search(r"gemm|linear|matmul|transpose|sgemm|product|dnnl|xsmm|blis|bli_",s): c="products"
    elif "attention" in s: c="attention"
    elif re.search(r"add_|mul_|tanh|relu|gelu|exp_|log_|sigmoid|axpy|__exp|__log|expf|logf|erf",s): c="elementwise"
    elif re.search(r"layernorm|softmax|cross_entropy|logsumexp|sum_rows|sum_|mean_|embedding",s): c="rowwise"
    elif re.search(r"mem(set|move|cpy)",s): c="memory"
    elif re.search(r"optimizer|adam|finite",s): c="optimizer"
    else: c="other"
    cats[c]+=p
tot=sum(cats.values())
print(sys.argv[1].ljust(36), " ".join(f"{k[:6]} {100*v/tot:4.0f}%" for k,v in cats.items()))
' "$inst"
done
