#!/bin/sh
# harness/install-deps.sh: installs the Debian 12 packages backprop-bench needs, only the missing
# ones (as root with apt-get, otherwise with sudo). `make`, `make test` and `make bench` call it.
# wamerican provides /usr/share/dict/words, the default corpus of the model workloads;
# clang-format keeps the tree in its .clang-format style (make format; the format_check test);
# libasan8 and libubsan1 are the sanitizer runtimes of `make sanitize` (g++ pulls them in too);
# libbenchmark-tools is Google Benchmark's tools/compare.py (with python3-scipy, its U test), which
# the tests run on our result files; chromium opens each run's report.html in the tests.
# libopenblas-dev, libblis-dev, libxsmm-dev and libdnnl-dev are the compiled mode's matmul dialects
# (engine/kernels/library.h); the build goes on without any of them. libadolc-dev is ADOL-C, the
# operator-overloading baseline of baselines/adolc/ (the version GradBench's adol-c tool uses).
# nlohmann-json3-dev reads and writes every JSON file of the harness (harness/common/json.h).
# ninja-build builds the trees (the Makefile's CONFIGURE). openmpi-bin and libopenmpi-dev are Open
# MPI: mpirun and the library the ranks of engine/distributed/ talk through. libgloo-dev is Gloo's
# headers, which c10d's ProcessGroupGloo header includes (bench_libtorch's ranks; libtorch links
# Debian's libgloo0 already). libxbyak-dev is xbyak, the x86-64 assembler (headers only) both code
# generators emit through (engine/runtime/code_memory.h).
set -eu
PACKAGES="cmake g++ make git libtorch-dev python3-torch libbenchmark-dev libfmt-dev libgtest-dev
          python3-matplotlib python3-pytest libopenblas0-pthread wamerican clang-format libasan8
          libubsan1 libbenchmark-tools python3-scipy chromium libopenblas-dev libblis-dev
          libxsmm-dev libdnnl-dev libadolc-dev nlohmann-json3-dev ninja-build openmpi-bin
          libopenmpi-dev libgloo-dev libxbyak-dev"
missing=""
for p in $PACKAGES; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
  if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
  echo "install-deps: installing$missing"
  $SUDO apt-get update -qq
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing
fi
# libtorch calls whatever libblas.so.3 resolves to; the reference BLAS would make it unfairly slow.
blas=$(readlink -f /usr/lib/x86_64-linux-gnu/libblas.so.3 || true)
case "$blas" in
  *openblas*) ;;
  *) echo "install-deps: warning: libblas.so.3 is $blas, not OpenBLAS; run" \
          "'update-alternatives --config libblas.so.3-x86_64-linux-gnu' to pick openblas-pthread" >&2 ;;
esac
