#!/usr/bin/env bash
# stage_sweep.sh BUILD_DIR [OUT_DIR] [SET]: staged rows (STAGE, codegen/stream.c)
# against the plans without them, in one process per line, on the GPU
# machine. tj-bench --bandwidth prints % of the same-size copy measured in
# the same run and checks the rows against float64; every line is also
# appended to OUT_DIR/stage_sweep.csv. DTYPES (default "f32 bf16") and
# REPS (default 20) may be set.
#
#   old      --stage -1: the plan as it was before staging
#   plan     the default plan (staged where softmax_plan.c says so)
#   forced   STAGE 32 with the CTA shapes given, against both
# SET: rows (default: one CTA to a cluster of 16 a row), split (rows
# wider than 16 CTAs hold, and few huge rows, over the grid), stash (rows
# wider than the grid's shared memory: the plan's STASH against reading x
# twice and other stash shapes) or balance (splits that leave no round of
# rows half empty, against the plan's).
set -uo pipefail
build=${1:?usage: bench/stage_sweep.sh BUILD_DIR [OUT_DIR]}
out=${2:-.}
set=${3:-rows}
bench="$build/tools/tj-bench"
csv="$out/stage_sweep.csv"
export TILEJIT_CACHE_DISABLE=1
reps=${REPS:-20}
: >"$csv"

row() { # LABEL N DTYPE [tj-bench options]
  local label=$1 n=$2 dtype=$3
  shift 3
  local line
  line=$("$bench" --bandwidth -n "$n" --dtype "$dtype" --reps "$reps" "$@" 2>&1 |
    awk -v l="$label" '$2 ~ /^[0-9]+$/ && $4 == "ptx" { printf "%-8s %s\n", l, $0 }')
  echo "$line"
  echo "$label,$n,$dtype,$*,$line" >>"$csv"
}

if [ "$set" = stash ]; then
  for shape in "1 10000000 f32" "4 10000000 f32" "1 16777216 f32" "4 16777216 f32" \
    "1 16777216 bf16" "4 16777216 bf16" "1 50000000 f32" "1 50000000 bf16"; do
    read -r m n dtype <<<"$shape"
    row old "$n" "$dtype" -m "$m" --stage -1
    row plan "$n" "$dtype" -m "$m"
    row k16 "$n" "$dtype" -m "$m" --warps 8 --split 256 --stage 16 --stash 114688
    row w16k16 "$n" "$dtype" -m "$m" --warps 16 --split 264 --stage 16 --stash 114688
  done
  exit 0
fi
if [ "$set" = balance ]; then
  for shape in "64 1048576 bf16 36" "64 1048576 f16 36" "64 1048576 f32 66" \
    "128 524288 f32 33" "256 524288 bf16 16" "256 524288 f16 16" "256 524288 bf16 24"; do
    read -r m n dtype s <<<"$shape"
    row plan "$n" "$dtype" -m "$m"
    row "s$s" "$n" "$dtype" -m "$m" --warps 8 --split "$s" --stage 32
  done
  exit 0
fi
if [ "$set" = split ]; then
  for shape in "128 524288 f32 16 2" "64 1048576 f32 16 4" "64 1048576 bf16 16 2"; do
    read -r m n dtype c s <<<"$shape"
    row old "$n" "$dtype" -m "$m" --stage -1
    row "c${c}s${s}" "$n" "$dtype" -m "$m" --warps 8 --cluster "$c" --split "$s" --stage 32
    row "s$((c * s))" "$n" "$dtype" -m "$m" --warps 8 --split $((c * s)) --stage 32
  done
  for shape in "1 1000000 f32 128" "4 1000000 f32 96" "1 10000000 bf16 256" "4 1000000 bf16 96"; do
    read -r m n dtype s <<<"$shape"
    row old "$n" "$dtype" -m "$m" --stage -1
    row "s$s" "$n" "$dtype" -m "$m" --warps 8 --split "$s" --stage 32
  done
  exit 0
fi
for dtype in ${DTYPES:-f32 bf16}; do
  for n in 16384 32768; do
    row old "$n" "$dtype" --stage -1
    row plan "$n" "$dtype"
    row s256 "$n" "$dtype" --warps 8 --stage 32
    row s512 "$n" "$dtype" --warps 16 --stage 32
  done
  for n in 65536 131072 262144 524288 1048576; do
    row old "$n" "$dtype" --stage -1
    row plan "$n" "$dtype"
  done
done
# Cluster shapes around the plan's 64 KiB a CTA.
row c2x128k 65536 f32 --warps 8 --cluster 2 --stage 32
row c8x32k 65536 f32 --warps 8 --cluster 8 --stage 32
row c4x32k 65536 bf16 --warps 8 --cluster 4 --stage 32
row c1x128k 65536 bf16 --warps 8 --stage 32
row c8x128k 262144 f32 --warps 8 --cluster 8 --stage 32
row c8x128k 524288 bf16 --warps 8 --cluster 8 --stage 32
row c16x128k 524288 f32 --warps 8 --cluster 16 --stage 32
row c16x128k 1048576 bf16 --warps 8 --cluster 16 --stage 32
