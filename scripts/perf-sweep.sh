#!/usr/bin/env bash
# perf-sweep.sh [SET...]: on a GPU machine, builds the tools (Release, no
# tests) into $B (default build-perf-gpu; an existing build there is used as
# is) and times tj-softmax (f32, x = 256 MiB, the median of ITERS launches,
# the driver's JIT cache off) for the sets named: base (N = 512 ... 65536,
# the default) and ncu (a few Nsight Compute sections at N = 1024 and 32768).
# Each line: label, N, kernel us, GB/s, % of COPY_GBS (default 4160), driver
# JIT ms, PASS/FAIL. Full tool output goes to $OUT/runs.log (default
# ./gpu-out). The figures in src/codegen/README.md came from it.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-./gpu-out}
mkdir -p "$OUT"
B=${B:-build-perf-gpu}
if [ ! -x "$B/tools/tj-softmax" ] &&
  ! { cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=Release -DTJ_TESTS=OFF && cmake --build "$B" -j"$(nproc)"; } >"$OUT/build.log" 2>&1; then
  tail -30 "$OUT/build.log"
  exit 1
fi
export CUDA_CACHE_DISABLE=1
COPY=${COPY_GBS:-4160}
BYTES=$((256 << 20))

# one LABEL N [tj-softmax args...]; knobs come from the environment
one() {
  local label=$1 n=$2 o us gbs jit ok
  shift 2
  o=$($B/tools/tj-softmax -m $((BYTES / 4 / n)) -n "$n" --iters "${ITERS:-30}" --seed 1 "$@" 2>&1)
  printf '=== %s N=%s %s\n%s\n' "$label" "$n" "$*" "$o" >>"$OUT/runs.log"
  us=$(sed -n 's/.*kernel \([0-9.]*\) us.*/\1/p' <<<"$o")
  gbs=$(sed -n 's/.*), \([0-9.]*\) GB\/s.*/\1/p' <<<"$o")
  jit=$(sed -n 's/.*driver JIT \([0-9.]*\) ms.*/\1/p' <<<"$o")
  ok=$(tail -1 <<<"$o")
  printf '%-24s %6s %9s us %8s GB/s %5s%% jit %6s ms %s\n' "$label" "$n" "$us" "$gbs" \
    "$(awk -v g="${gbs:-0}" -v c="$COPY" 'BEGIN { printf "%.1f", 100 * g / c }')" "$jit" "$ok"
}

set_base() { for n in 512 1024 2048 4096 8192 16384 32768 65536; do one base "$n"; done; }
set_ncu() {
  for n in 1024 32768; do
    ncu --clock-control none --section SpeedOfLight --section Occupancy --section WarpStateStats \
      --section LaunchStats --section MemoryWorkloadAnalysis -k regex:tj_ -c 1 \
      $B/tools/tj-softmax -m $((BYTES / 16 / n)) -n $n --iters 2 --seed 1 >"$OUT/ncu-$n.txt" 2>&1
    grep -E "DRAM Throughput|Memory Throughput|Duration|Achieved Occupancy|Theoretical Occupancy|Registers Per|Block Limit|Issue Slots|Warp Cycles Per Issued|Stall" "$OUT/ncu-$n.txt" | head -20
  done
}
[ $# -gt 0 ] || set -- base
for s in "$@"; do "set_$s"; done
