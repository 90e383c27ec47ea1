#!/usr/bin/env bash
# ab_bench.sh A_BUILD B_BUILD [ROUNDS]: the same shapes timed by two builds
# of tj-bench on the GPU machine, alternating A B A B (ROUNDS times, default
# 2) so that neither gets the warmer machine. Shapes come on stdin, one a
# line: "M N DTYPE [tj-bench options]". Each line printed is tj-bench
# --bandwidth's (% of the same-size copy measured in the same process, the
# rows checked against float64), prefixed with its build's label. Both
# caches are off, so each build compiles its own kernels.
set -uo pipefail
a=${1:?usage: bench/ab_bench.sh A_BUILD B_BUILD [ROUNDS] < shapes}
b=${2:?usage: bench/ab_bench.sh A_BUILD B_BUILD [ROUNDS] < shapes}
rounds=${3:-2}
export TILEJIT_CACHE_DISABLE=1 CUDA_CACHE_DISABLE=1
while read -r m n dtype opts; do
  [ -z "${m:-}" ] && continue
  for ((r = 0; r < rounds; r++)); do
    for side in A B; do
      build=$a
      [ "$side" = B ] && build=$b
      # shellcheck disable=SC2086
      "$build/tools/tj-bench" --bandwidth -m "$m" -n "$n" --dtype "$dtype" --reps "${REPS:-10}" \
        $opts 2>&1 | awk -v l="$side ${opts:-plan}" '$2 ~ /^[0-9]+$/ && $4 == "ptx" {
          printf "%-24s %s\n", l, $0 }'
    done
  done
done
