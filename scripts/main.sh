#!/usr/bin/env bash
# main.sh: the main job. Installs what is missing, builds (Release), then runs
# softmax: on the GPU when a driver is there, otherwise through the CPU
# interpreter. Extra arguments go to tj-softmax.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
cmake --preset default >/dev/null
cmake --build --preset default -j "$(nproc)" >/dev/null
if [ $# -gt 0 ]; then exec ./build/tools/tj-softmax "$@"; fi
exec ./build/tools/tj-softmax --interp -m 64 -n 1000
