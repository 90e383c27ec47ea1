#!/usr/bin/env bash
# main.sh: the main job. Installs what is missing, builds (Release), then runs
# softmax of a 4096x1000 f32 matrix on the GPU through tj-softmax, checked
# against a float64 reference. Without a GPU or driver (tj-softmax exits 3)
# it says so and runs the same check through the CPU interpreter instead
# (tj-softmax --interp -m 64 -n 1000). Extra arguments go to tj-softmax.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/bootstrap.sh # may put a newer CMake first on PATH
cmake --preset default >/dev/null
cmake --build --preset default -j "$(nproc)" >/dev/null
if [ $# -gt 0 ]; then exec ./build/tools/tj-softmax "$@"; fi
rc=0
./build/tools/tj-softmax -m 4096 -n 1000 || rc=$?
if [ "$rc" -eq 3 ]; then
  echo "main.sh: no GPU here; running the CPU interpreter instead: tj-softmax --interp -m 64 -n 1000"
  exec ./build/tools/tj-softmax --interp -m 64 -n 1000
fi
exit "$rc"
