#!/usr/bin/env bash
# gpu-probe.sh BUILD: a quick look at where time goes, for the working notes
# of bench/RESULTS.md: tj-bench over the wide and huge sets in f32 with the
# plan's strategy, then with other strategies forced, and Nsight Compute's
# DRAM and L2 traffic, occupancy and duration on a few shapes (NCU=0: none).
# EXTRA: other build folders whose tj-bench runs the wide set too. Logs and CSV
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
# PROBE_STEPS: tj-bench arguments per step, separated by ';', instead of
# the list below.
if [ -n "${PROBE_STEPS:-}" ]; then
  IFS=';' read -r -a steps <<<"$PROBE_STEPS"
  # shellcheck disable=SC2086
  for s in "${steps[@]}"; do step $s; done
else
  step --set wide
  step --set wide --dtype bf16
  step --n 65536 --warps 4 --cluster 16
  step --n 65536 --warps 16 --cluster 4
  step --n 65536 --warps 32 --cluster 2
  step --n 131072 --warps 8 --cluster 16
  step --n 131072 --warps 32 --cluster 4
  step --n 262144 --warps 16 --cluster 16
  step --n 1048576 --warps 32 --split 8
  step --set huge
  step --set huge --dtype bf16
  step --n 10000000,16777216 --m 1 --warps 16 --split 264
  step --n 10000000,16777216 --m 1 --split 128
fi
[ -z "${EXTRA:-}" ] || for b in $EXTRA; do bench=$b/tools/tj-bench; echo "=== build $b"; step --set wide; done
bench=$build/tools/tj-bench
# NCU_SHAPES: tj-bench arguments per shape, separated by ';'. NCU_SECTIONS:
# Nsight Compute sections instead of the few metrics below.
if [ "${NCU:-1}" != 0 ] && command -v ncu >/dev/null; then
  metrics=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum,launch__grid_size,launch__registers_per_thread
  what=(--metrics "$metrics")
  if [ -n "${NCU_SECTIONS:-}" ]; then
    what=()
    for s in $NCU_SECTIONS; do what+=(--section "$s"); done
  fi
  IFS=';' read -r -a shapes <<<"${NCU_SHAPES:---m 1024 --n 65536;--m 1 --n 10000000}"
  i=0
  for shape in "${shapes[@]}"; do
    i=$((i + 1))
    echo "=== ncu $shape"
    # shellcheck disable=SC2086
    ncu --clock-control none "${what[@]}" -k regex:tj_softmax -c 1 "$bench" --reps 1 $shape \
      >"$OUT/ncu$i.txt" 2>&1
    grep -E "gpu__time|dram__bytes|lts__t_sector|sm__warps|smsp__inst|launch__|Duration|Throughput|Stall|Warp Cycles|Eligible|Issued|Active Warps|Hit Rate|Registers|Block Limit" "$OUT/ncu$i.txt" | head -${NCU_LINES:-40}
  done
fi
