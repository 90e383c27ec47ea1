#!/usr/bin/env bash
# gpu-probe.sh BUILD: a quick look at where time goes, for the working notes
# of bench/RESULTS.md: tj-bench over the wide and huge sets in f32 with the
# plan's strategy, then with other strategies forced, and Nsight Compute's
# DRAM and L2 traffic, occupancy and duration on a few shapes. Logs and CSV
# under $OUT (default ./gpu-out).
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:?usage: scripts/gpu-probe.sh BUILD}
OUT=${OUT:-./gpu-out}
mkdir -p "$OUT"
bench=$build/tools/tj-bench
reps=${REPS:-5}
row() { grep -E "^ +[0-9]+ +[0-9]+ (f32|f16|bf16)|device copy"; }
step() { echo "=== ${*:2}"; "$bench" --bandwidth --dtype f32 --reps "$reps" "$@" 2>&1 | tee -a "$OUT/probe.log" | row; }
step --set wide
step --set huge
step --n 65536 --warps 16 --cluster 4
step --n 65536 --warps 8 --cluster 8
step --n 131072 --warps 16 --cluster 8
step --n 262144 --warps 16 --cluster 16
step --n 524288,1048576 --warps 16 --cluster 16
step --n 1048576 --split 32
step --n 10000000,16777216 --m 1 --split 132
step --n 10000000,16777216 --m 1 --warps 16 --split 256
step --n 10000000,16777216 --m 1 --split 64
if command -v ncu >/dev/null; then
  metrics=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum,launch__grid_size,launch__registers_per_thread
  for shape in "-m 1024 -n 65536" "-m 256 -n 262144" "-m 1 -n 10000000" "-m 64 -n 1048576"; do
    echo "=== ncu $shape"
    ncu --clock-control none --metrics "$metrics" -k regex:tj_softmax -c 1 "$build/tools/tj-softmax" $shape --iters 1 \
      >"$OUT/ncu${shape// /}.txt" 2>&1
    grep -E "gpu__time|dram__bytes|lts__t_sector|sm__warps|smsp__inst|launch__" "$OUT/ncu${shape// /}.txt" | head -12
  done
fi
