#!/usr/bin/env bash
# bootstrap.sh: installs what building and testing tilejit needs and is
# missing (a C compiler, CMake >= 3.25, pkg-config, Check and libsubunit),
# through apt-get, as root or through sudo. The presets need CMake 3.25:
# where the distribution's CMake is older, it installs CMake from PyPI
# (pip install --target, no root needed) into $TJ_CMAKE_DIR (default
# ~/.cache/tilejit/cmake), says so, and puts that CMake first on PATH.
# Safe to run again: it installs nothing when everything is present.
# main.sh and test.sh source it, so that the PATH it sets holds for them;
# run on its own, it prints the PATH to set.
set -euo pipefail

# tj_cmake_ok CMAKE: CMAKE runs and is at least 3.25.
tj_cmake_ok() {
  local version
  version=$("$1" --version 2>/dev/null | sed -n '1s/^cmake version \([0-9][0-9.]*\).*/\1/p') || return 1
  [ -n "$version" ] && [ "$(printf '3.25\n%s\n' "$version" | sort -V | head -1)" = 3.25 ]
}

# tj_apt_install PACKAGE...: apt-get install, as root or through sudo.
tj_apt_install() {
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "bootstrap: installing $*" >&2
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

# tj_pip_cmake DIR: the bin/ of a CMake >= 3.25 installed from PyPI under
# DIR, installing it when there is none.
tj_pip_cmake() {
  local dir=$1 bin
  bin=$(find "$dir" -path '*/data/bin/cmake' -type f 2>/dev/null | head -1)
  if [ -z "$bin" ] || ! tj_cmake_ok "$bin"; then
    python3 -m pip --version >/dev/null 2>&1 || tj_apt_install python3-pip
    echo "bootstrap: installing CMake >= 3.25 from PyPI into $dir" >&2
    rm -rf "$dir"
    PIP_ROOT_USER_ACTION=ignore python3 -m pip install --quiet --disable-pip-version-check \
      --target "$dir" 'cmake>=3.25' >&2
    bin=$(find "$dir" -path '*/data/bin/cmake' -type f | head -1)
  fi
  tj_cmake_ok "$bin" || { echo "bootstrap: no CMake >= 3.25 under $dir" >&2; return 1; }
  dirname "$bin"
}

tj_bootstrap() {
  local need=() bin
  command -v cc >/dev/null 2>&1 || need+=(gcc libc6-dev)
  command -v cmake >/dev/null 2>&1 || need+=(cmake)
  command -v pkg-config >/dev/null 2>&1 || need+=(pkg-config)
  if ! pkg-config --exists check 2>/dev/null; then need+=(check libsubunit-dev); fi
  [ ${#need[@]} -eq 0 ] || tj_apt_install "${need[@]}"
  tj_cmake_ok cmake && return 0
  echo "bootstrap: $(command -v cmake) is $(cmake --version | head -1), older than 3.25" >&2
  bin=$(tj_pip_cmake "${TJ_CMAKE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/tilejit/cmake}")
  export PATH="$bin:$PATH"
  echo "bootstrap: using $(cmake --version | head -1) from $bin" >&2
  if [ "${BASH_SOURCE[0]}" = "$0" ]; then
    echo "bootstrap: put it first on PATH: export PATH=\"$bin:\$PATH\"" >&2
  fi
}

tj_bootstrap
unset -f tj_bootstrap tj_pip_cmake tj_apt_install tj_cmake_ok
