#!/usr/bin/env bash
# run_compare.sh: the binding test, then tilejit vs torch vs Triton, on a GPU
# machine with torch and Triton installed.
#
#   bench/run_compare.sh [BUILD_DIR] [compare.py options, e.g. --all-dtypes --quick]
#
# BUILD_DIR (default build) must hold libtilejit.so; when it does not, the
# library alone is built there (Release, tests off). Runs the binding's
# tests (tests/python/run_tests.py, through pytest when installed), then
# bench/compare.py --out bench/results, which writes DATE-GPU.md, .csv and
# .png (or .svg) there. When OUT is set, those files and both logs are
# copied under $OUT too. PYTHON picks the interpreter (default python3).
#
# Exit status: 0 when both passed; 77 when there is no GPU or torch; 1 else.
set -uo pipefail
cd "$(dirname "$0")/.."

build=build
if [ $# -gt 0 ] && [[ $1 != -* ]]; then
  build=$1
  shift
fi
python=${PYTHON:-python3}

if [ ! -f "$build/libtilejit.so" ]; then
  echo "run_compare: $build/libtilejit.so is missing: building it"
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DTJ_TESTS=OFF >/dev/null &&
    cmake --build "$build" -j "$(nproc)" --target tilejit >/dev/null ||
    { echo "run_compare: building libtilejit.so failed"; exit 1; }
fi
TILEJIT_LIBRARY="$(cd "$build" && pwd)/libtilejit.so"
export TILEJIT_LIBRARY PYTHONUNBUFFERED=1

# Without a system libnvrtc, point tilejit's NVRTC backend at the one the
# CUDA wheels of torch bring, if any (only the tests use that backend).
if [ -z "${TILEJIT_LIBNVRTC:-}" ] && ! ldconfig -p 2>/dev/null | grep -q 'libnvrtc\.so'; then
  nvrtc=$("$python" -c '
import glob, os, site
for root in site.getsitepackages():
    pattern = os.path.join(root, "nvidia", "**", "libnvrtc.so*")
    for path in sorted(glob.glob(pattern, recursive=True)):
        if "builtins" not in path and ".alt." not in path:
            print(path)
            raise SystemExit
' 2>/dev/null)
  if [ -n "$nvrtc" ]; then
    export TILEJIT_LIBNVRTC=$nvrtc
    echo "run_compare: NVRTC from the torch wheels: $(basename "$nvrtc")"
  fi
fi

logs=$(mktemp -d)
marker="$logs/started"
touch "$marker"
if command -v nvidia-smi >/dev/null; then
  nvidia-smi --query-gpu=name,driver_version,temperature.gpu,clocks.sm,clocks.max.sm,power.draw \
    --format=csv 2>&1 | tee "$logs/nvidia-smi.txt"
fi

echo "== tests/python/run_tests.py"
"$python" tests/python/run_tests.py 2>&1 | tee "$logs/test_binding.log"
test_status=${PIPESTATUS[0]}

echo "== bench/compare.py --out bench/results $*"
"$python" bench/compare.py --out bench/results "$@" 2>&1 | tee "$logs/compare.log"
compare_status=${PIPESTATUS[0]}

if [ -n "${OUT:-}" ]; then
  mkdir -p "$OUT"
  cp "$logs"/*.log "$logs"/*.txt "$OUT/" 2>/dev/null
  if [ -d bench/results ]; then
    find bench/results -maxdepth 1 -type f -newer "$marker" -exec cp {} "$OUT/" \;
  fi
  echo "run_compare: copied results and logs to \$OUT"
fi
rm -rf "$logs"

echo "run_compare: test_binding exit $test_status, compare exit $compare_status (77: skipped)"
if [ "$test_status" -eq 0 ] && [ "$compare_status" -eq 0 ]; then exit 0; fi
if [ "$test_status" -eq 77 ] && [ "$compare_status" -eq 77 ]; then exit 77; fi
exit 1
