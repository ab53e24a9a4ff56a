#!/bin/bash
# tools_in_turn.sh: GradBench's own C++ tools (`manual`, `adol-c`) and bp_gradbench on the same
# input file, run in turn, round after round, GradBench's C++ convention each (TOOL FILE FUNCTION:
# the output, then one timing a line); per tool the median `evaluate` over all rounds, and its
# time over `manual`'s. GradBench's tools are built outside this repository from a GradBench
# checkout (tools/<tool>/<module>.cpp, its cpp/ headers, and nlohmann's json.hpp, which Debian's
# nlohmann-json3-dev provides):
#   printf '#pragma once\n#include <nlohmann/json.hpp>\n' > gradbench/cpp/json.hpp
#   g++ -std=c++17 -O3 -march=native -Igradbench/cpp gradbench/tools/manual/lstm.cpp -o DIR/manual_lstm
#   g++ ... gradbench/tools/adol-c/lstm.cpp -ladolc -o DIR/adol-c_lstm
# Inputs: build/bp_gradbench --write-input lstm 1024 > in.json (add "min_runs": 30).
#   dev/gradbench/tools_in_turn.sh ROUNDS DIR MODULE FUNCTION INPUT 'BACKEND...'
#   e.g. dev/gradbench/tools_in_turn.sh 3 /tmp/gb lstm jacobian in.json 'compiled scalar'
R=$1; DIR=$2; MODULE=$3; FUNCTION=$4; INPUT=$5; BACKENDS=$6
here=$(cd "$(dirname "$0")/../.." && pwd)
for r in $(seq $R); do
  for tool in manual adol-c; do
    [ -x "$DIR/${tool}_$MODULE" ] && "$DIR/${tool}_$MODULE" "$INPUT" "$FUNCTION" |
      grep '"evaluate"' | sed "s/^/$tool /"
  done
  for backend in $BACKENDS; do
    "$here/build/bp_gradbench" --backend "$backend" --module "$MODULE" "$INPUT" "$FUNCTION" |
      grep '"evaluate"' | sed "s/^/$backend /"
  done
done | /usr/bin/python3 -c '
import json, sys, statistics as st
t = {}
for line in sys.stdin:
    tool, timing = line.split(" ", 1)
    t.setdefault(tool, []).append(json.loads(timing)["nanoseconds"] / 1e6)
manual = st.median(t["manual"]) if "manual" in t else None
for tool, v in t.items():
    ratio = f"  {st.median(v) / manual:.2f}x manual" if manual else ""
    print(f"{tool:16s} {st.median(v):9.3f} ms over {len(v)} evaluations{ratio}")'
