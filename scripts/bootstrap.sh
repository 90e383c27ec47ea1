#!/usr/bin/env bash
# bootstrap.sh: installs what building and testing tilejit needs and is
# missing (a C compiler, CMake >= 3.25, pkg-config, Check and libsubunit),
# through apt-get, as root or through sudo. Safe to run again: it installs
# nothing when everything is present. Sourced by main.sh and test.sh.
set -euo pipefail
need=()
command -v cc >/dev/null 2>&1 || need+=(gcc libc6-dev)
command -v cmake >/dev/null 2>&1 || need+=(cmake)
command -v pkg-config >/dev/null 2>&1 || need+=(pkg-config)
if ! pkg-config --exists check 2>/dev/null; then need+=(check libsubunit-dev); fi
if [ ${#need[@]} -gt 0 ]; then
  echo "bootstrap: installing ${need[*]}" >&2
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
