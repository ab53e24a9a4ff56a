#!/bin/sh
# dev/keep_reference.sh: makes a finished run the tree's reference run, results/reference/, the
# one run git keeps (README.md's figures come from it): its summary, check, processes and run
# files, its figures and report.html, the kernel verdicts it chose with. Not its logs nor its
# per-benchmark result files (bench_run compare reads a run kept so from its summary.json).
#   dev/keep_reference.sh results/<run-id>
set -eu
run=${1:?usage: dev/keep_reference.sh results/<run-id>}
[ -f "$run/summary.json" ] && [ ! -e "$run/INCOMPLETE" ] || {
  echo "error: $run is not a finished run (no summary.json, or INCOMPLETE)" >&2; exit 2; }
here=$(cd "$(dirname "$0")/.." && pwd)
out="$here/results/reference"
rm -rf "$out"
mkdir -p "$out/plots"
for f in run.json summary.json summary.txt check.json processes.json report.html \
         dialect_verdicts.txt intervals.json kernels.json; do
  [ -f "$run/$f" ] && cp "$run/$f" "$out/$f"
done
cp "$run"/plots/*.png "$out/plots/"
echo "kept $(find "$out" -type f | wc -l) files, $(du -sh "$out" | cut -f1), in $out"
