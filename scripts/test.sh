#!/usr/bin/env bash
# test.sh [PRESET]: installs what is missing, builds the preset (default:
# "default"; also "debug" and "asan") and runs every test suite through CTest;
# "tsan" builds and runs only the suites that share handles between threads.
set -euo pipefail
cd "$(dirname "$0")/.."
preset=${1:-default}
source scripts/bootstrap.sh # may put a newer CMake first on PATH
cmake --preset "$preset" ${TJ_CMAKE_ARGS:-} >/dev/null
cmake --build --preset "$preset" -j "$(nproc)"
ctest --preset "$preset" -j "$(nproc)"
