#!/usr/bin/env bash
# gpu-probe.sh BUILD: a quick look at where time goes, for the working notes
# of bench/RESULTS.md: tj-bench over the wide and huge sets in f32 with the
# plan's strategy and a few forced ones, and Nsight Compute's speed-of-light,
# occupancy and warp-state sections on one wide and one huge shape. Logs and
# CSV under $OUT (default ./gpu-out).
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:?usage: scripts/gpu-probe.sh BUILD}
OUT=${OUT:-./gpu-out}
mkdir -p "$OUT"
bench=$build/tools/tj-bench
reps=${REPS:-10}
step() { echo "=== $*"; "$@" 2>&1 | tee -a "$OUT/probe.log" | grep -v "^ *$"; }
step "$bench" --bandwidth --set wide --dtype f32 --reps "$reps" --csv "$OUT/probe-wide.csv"
step "$bench" --bandwidth --set huge --dtype f32 --reps "$reps" --csv "$OUT/probe-huge.csv"
for opt in "--warps 16 --cluster 4" "--warps 16 --cluster 8" "--warps 8 --cluster 8"; do
  step "$bench" --bandwidth --n 65536,131072 --dtype f32 --reps "$reps" $opt
done
for opt in "--split 64" "--split 132" "--warps 16 --split 256"; do
  step "$bench" --bandwidth --n 10000000 --m 1 --dtype f32 --reps "$reps" $opt
done
if command -v ncu >/dev/null; then
  for shape in "-m 1024 -n 65536" "-m 1 -n 10000000"; do
    ncu --clock-control none --section SpeedOfLight --section Occupancy --section WarpStateStats \
      --section LaunchStats -k regex:tj_softmax -c 2 "$build/tools/tj-softmax" $shape --iters 2 \
      >"$OUT/ncu${shape// /}.txt" 2>&1
    grep -E "Duration|DRAM Throughput|Memory Throughput|Achieved Occupancy|Registers Per|Stall|Warp Cycles|Cluster|Block Size|Grid Size|Issue" "$OUT/ncu${shape// /}.txt" | head -40
  done
fi
