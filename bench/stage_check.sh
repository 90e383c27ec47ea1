#!/usr/bin/env bash
# stage_check.sh DEPS_DIR: on the GPU machine, the checks and figures of
# staged rows (STAGE, codegen/stream.c) in one call: build with the tests,
# the GPU suites of the row ops (TJ_GPU_QUICK=1), compute-sanitizer memcheck
# and racecheck on a staged one-CTA row, cluster and grid split, then
# tj-bench's wide set with and without staging (--stage -1) and its huge
# set, and bench/compare.py's wide set beside torch and Triton. A summary
# goes to stdout; the logs to $OUT/logs.tgz. DEPS_DIR holds Check (see
# scripts/gpu-check.sh); the driver's JIT cache and tilejit's disk cache
# are off, so every kernel is compiled in the run.
set -u
cd "$(dirname "$0")/.."
deps=${1:?usage: bench/stage_check.sh DEPS_DIR}
OUT=${OUT:-./gpu-out}
logs="$OUT/logs"
mkdir -p "$logs"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
# shellcheck disable=SC1091
source "$deps/env.sh"
build=build-gpu
{ cmake -S . -B $build -DCMAKE_BUILD_TYPE=Release -DTJ_TESTS=ON >/dev/null &&
  cmake --build $build -j "$(nproc)" >"$logs/build.log" 2>&1; } || echo "BUILD FAILED"
export TILEJIT_CACHE_DISABLE=1 CUDA_CACHE_DISABLE=1
for t in gpu_masked_softmax gpu_softmax gpu_softmax_backward gpu_errors gpu_function; do
  s=$(date +%s)
  TJ_GPU_QUICK=1 timeout 150 $build/tests/$t >"$logs/$t.log" 2>&1
  rc=$?
  echo "$t rc=$rc $(($(date +%s) - s))s: $(grep -E '^[0-9]+%:' "$logs/$t.log" | tail -1)"
  grep -E ":F:|:E:" "$logs/$t.log" | head -3
done
for a in "-m 64 -n 65536 --dtype bf16" "-m 2 -n 1000000" "-m 16 -n 32768 --dtype bf16"; do
  for tool in memcheck racecheck; do
    r=$(compute-sanitizer --tool $tool $build/tools/tj-softmax $a 2>&1 |
      grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|^PASS|^FAIL' | tr '\n' ' ')
    echo "$tool $a: $r"
  done
done
bench=$build/tools/tj-bench
$bench --bandwidth --set wide --dtype all --reps 10 >"$logs/wide.txt" 2>&1
$bench --bandwidth --set wide --dtype all --reps 10 --stage -1 >"$logs/wide-old.txt" 2>&1
$bench --bandwidth --set huge --dtype all --reps 10 >"$logs/huge.txt" 2>&1
for f in wide wide-old huge; do
  echo "== $f"
  grep -E "copy, best| ptx " "$logs/$f.txt"
done
timeout 200 python3 bench/compare.py --sets wide --all-dtypes --budget 120 --out "$logs" \
  >"$logs/compare.log" 2>&1
tail -45 "$logs/compare.log"
tar czf "$OUT/logs.tgz" -C "$OUT" logs && rm -rf "$logs"
