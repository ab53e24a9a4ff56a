#!/bin/bash
# pairs.sh: builds pairs.cc over several engine trees and runs it on shapes.
#   pairs.sh NAME=TREE [NAME=TREE ...] -- "M N K ta tb" ...   (the first tree is the yardstick)
# LIBRARY=blis times BLIS's cblas_sgemm in place of OpenBLAS's (one cblas per process).
# A tree is a folder holding engine/kernels/products.h and engine/kernels/kernels.h (a worktree of a commit, or
# `git show <commit>:engine/kernels/products.h` copied into one). Flags as CMakeLists.txt builds the engine.
set -eu
here=$(cd "$(dirname "$0")" && pwd); out=$(mktemp -d); trap 'rm -rf "$out"' EXIT
flags="-O3 -DNDEBUG -std=c++20 -march=native -fopenmp-simd -fno-math-errno -fno-trapping-math"
declarations=""; list=""; objects=""
while [ "$1" != "--" ]; do
  name=${1%%=*}; tree=${1#*=}; shift
  g++ $flags -I"$tree" -Dbp=bp_$name -DVARIANT_RUN=run_$name -DVARIANT_SCRATCH=scratch_$name \
    -c "$here/variant.cc" -o "$out/$name.o"
  declarations="$declarations DECLARE($name)"; list="$list {\"$name\", scratch_$name, run_$name},"
  objects="$objects $out/$name.o"
done
shift
library=${LIBRARY:-openblas}
g++ $flags "-DVARIANT_DECLARATIONS=$declarations" "-DVARIANT_LIST=$list" "-DLIBRARY=\"$library\"" \
  "$here/pairs.cc" $objects -o "$out/pairs" -l$library
for shape in "$@"; do
  OPENBLAS_NUM_THREADS=1 BLIS_NUM_THREADS=1 "$out/pairs" $shape ${CALLS:-101}
done
