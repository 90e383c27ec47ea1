#!/usr/bin/env bash
# gpu-check.sh DEPS_DIR [STEP...]: the check to run on a machine with a GPU.
#
# DEPS_DIR holds Check and libsubunit unpacked from their Debian packages,
# with an env.sh that points pkg-config and the loader at them (sourced, for
# machines without package access; "none" where Check is installed). STEPs,
# in order, default all but tsan:
#   build      configure and build build-gpu (Release, tests on)
#   test       ctest -L gpu: the GPU suites (tests/gpu_*.c), verbose
#   memcheck   compute-sanitizer --tool memcheck over each GPU suite
#   racecheck  compute-sanitizer --tool racecheck over each GPU suite
#   softmax    tj-softmax -m 4096 -n 1000, and a few other shapes (driver JIT
#              cache off, so the compile time printed is a cold one)
#   tsan       (only when named) gpu_concurrency built with ThreadSanitizer
# and, only when named:
#   across     gpu_softmax's rows-across-CTAs cases alone (CK_RUN_CASE=across)
#   synccheck  compute-sanitizer --tool synccheck over each GPU suite
#   bench      tj-bench: the large, wide and huge sets (f32, bf16, f16) and
#              latency, CSV under $OUT
#   explore    tj-bench over the wide and huge sets with strategies forced
#              (clusters, splits), to compare them with the plan's
#   compare    bench/compare.py: tilejit, torch and Triton side by side
# compute-sanitizer does not count CUDA API errors (gpu_errors makes some
# on purpose, such as loading invalid PTX). Under compute-sanitizer the suites run in one process (CK_FORK=no, since
# CUDA does not survive Check's fork) and with TJ_GPU_QUICK=1 (subsets of
# the sweeps). Logs go to $OUT (default ./gpu-out), one per step and suite;
# a summary table comes last. Exit status: 0 when every step passed.
# TJ_GPU_CHECK_ALL=1 makes the test step run every suite, CPU ones too.
set -uo pipefail
deps=${1:?usage: scripts/gpu-check.sh DEPS_DIR [build|test|memcheck|racecheck|softmax ...]}
shift
steps=("$@")
[ ${#steps[@]} -gt 0 ] || steps=(build test memcheck racecheck softmax)
cd "$(dirname "$0")/.."
OUT=${OUT:-./gpu-out}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
# shellcheck disable=SC1091
[ "$deps" = none ] || source "$deps/env.sh"
build=build-gpu
jobs=$(nproc 2>/dev/null || echo 4)

results=()
# run NAME LOG COMMAND...: runs the command, its output to the screen and
# $OUT/LOG; records PASS, SKIP (exit 77) or FAIL (exit status).
run() {
  local name=$1 log=$2 rc=0
  shift 2
  echo "=== $name" | tee "$OUT/$log"
  if "$@" 2>&1 | tee -a "$OUT/$log"; then rc=0; else rc=$?; fi
  local status=PASS
  [ "$rc" -eq 0 ] || status="FAIL ($rc)"
  [ "$rc" -ne 77 ] || status=SKIP
  results+=("$(printf '%-34s %-10s %s' "$name" "$status" "$log")")
}

find_sanitizer() {
  local c
  for c in "$(command -v compute-sanitizer 2>/dev/null)" "${CUDA_HOME:-/usr/local/cuda}/bin/compute-sanitizer" \
           /usr/local/cuda/bin/compute-sanitizer; do
    [ -n "$c" ] && [ -x "$c" ] && { echo "$c"; return 0; }
  done
  return 1
}

# gpu_softmax first: its kernels hold the shared-memory reductions racecheck is for.
gpu_suites() { (cd "$build/tests" && ls gpu_* 2>/dev/null | grep -v '\.' | sort -r) ; }

sanitize() {
  local tool=$1 sanitizer suite
  if ! sanitizer=$(find_sanitizer); then
    results+=("$(printf '%-34s %-10s %s' "$tool" "SKIP" "no compute-sanitizer")")
    return
  fi
  for suite in $(gpu_suites); do
    run "$tool $suite" "$tool-$suite.log" env CK_FORK=no TJ_GPU_QUICK=1 \
      "$sanitizer" --tool "$tool" --report-api-errors no --error-exitcode 99 $([ "$tool" = memcheck ] && echo --leak-check full) \
      "$build/tests/$suite"
  done
}

for step in "${steps[@]}"; do
  case $step in
    build)
      run "configure" configure.log cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DTJ_TESTS=ON
      run "build" build.log cmake --build "$build" -j "$jobs" ;;
    test)
      command -v nvidia-smi >/dev/null && nvidia-smi > "$OUT/nvidia-smi.log" 2>&1
      if [ "${TJ_GPU_CHECK_ALL:-0}" = 1 ]; then label=(); else label=(-L gpu); fi
      run "ctest ${label[*]:-all}" ctest.log ctest --test-dir "$build" ${label[@]+"${label[@]}"} -V -j 1 ;;
    memcheck | racecheck | synccheck)
      sanitize "$step" ;;
    across)
      run "gpu_softmax across CTAs" across.log env CK_RUN_CASE=across TJ_GPU_PROGRESS=1 \
        "$build/tests/gpu_softmax" ;;
    bench)
      run "tj-bench latency" bench-latency.log "$build/tools/tj-bench" --latency --csv "$OUT/latency.csv"
      for set in wide huge; do
        run "tj-bench $set" "bench-$set.log" "$build/tools/tj-bench" --bandwidth --set "$set" \
          --dtype all --reps "${REPS:-20}" --csv "$OUT/bench-$set.csv"
      done
      run "tj-bench large f32" bench-large.log "$build/tools/tj-bench" --bandwidth --set large \
        --reps "${REPS:-20}" --csv "$OUT/bench-large.csv" ;;
    explore)
      for opt in "--cluster 4" "--cluster 8" "--cluster 16" "--split 16" "--split 32"; do
        run "tj-bench wide $opt" "explore-wide${opt// /}.log" "$build/tools/tj-bench" --bandwidth \
          --set wide --dtype "${DTYPE:-f32}" --reps 10 $opt
      done
      for opt in "--split 32" "--split 64" "--split 128" "--split 132"; do
        run "tj-bench huge $opt" "explore-huge${opt// /}.log" "$build/tools/tj-bench" --bandwidth \
          --set huge --dtype "${DTYPE:-f32}" --reps 10 $opt
      done ;;
    compare)
      run "compare.py" compare.log env OUT="$OUT" bash bench/run_compare.sh "$build" \
        --sets "${SETS:-large,wide,huge}" ${COMPARE_ARGS:-} ;;
    softmax)
      # The driver's JIT cache off, so "compile" is a cold compile.
      run "tj-softmax -m 4096 -n 1000" tj-softmax.log env CUDA_CACHE_DISABLE=1 \
        "$build/tools/tj-softmax" -m 4096 -n 1000 --iters 100
      run "tj-softmax bf16 -m 1024 -n 65536" tj-softmax-bf16.log env CUDA_CACHE_DISABLE=1 \
        "$build/tools/tj-softmax" -m 1024 -n 65536 --dtype bf16 --iters 50
      run "tj-softmax f16 -m 65536 -n 128" tj-softmax-f16.log env CUDA_CACHE_DISABLE=1 \
        "$build/tools/tj-softmax" -m 65536 -n 128 --dtype f16 --iters 50 ;;
    tsan)
      run "configure tsan" configure-tsan.log cmake -S . -B build-gpu-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        -DTJ_TESTS=ON -DCMAKE_C_FLAGS=-fsanitize=thread -DCMAKE_EXE_LINKER_FLAGS=-fsanitize=thread
      run "build tsan" build-tsan.log cmake --build build-gpu-tsan -j "$jobs" --target gpu_concurrency test_cache
      run "tsan test_cache" tsan-test_cache.log env CK_FORK=no TSAN_OPTIONS=halt_on_error=1 \
        build-gpu-tsan/tests/test_cache
      run "tsan gpu_concurrency" tsan-gpu_concurrency.log env CK_FORK=no TSAN_OPTIONS=halt_on_error=1 \
        build-gpu-tsan/tests/gpu_concurrency ;;
    *)
      echo "gpu-check: unknown step $step" >&2
      exit 2 ;;
  esac
done

echo
echo "gpu-check summary ($(date -u '+%Y-%m-%d %H:%M UTC'), logs in $OUT)"
printf '%-34s %-10s %s\n' "step" "status" "log"
failed=0
for line in "${results[@]}"; do
  echo "$line"
  case $line in *"FAIL ("*) failed=1 ;; esac
done
exit $failed
