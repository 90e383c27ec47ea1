#!/usr/bin/env bash
# run.sh CMAKE CC BUILD_DIR SOURCE_DIR VERSION [C_FLAGS]: the packaging test
# (CTest's test_consumer). Installs the build in BUILD_DIR into a temporary
# prefix with CMAKE, checks what was installed (headers, the shared library
# with its soname, the static one, the tools, the CMake package, tilejit.pc),
# then builds consumer.c and runs it:
#   find-shared    find_package(tilejit), tilejit::tilejit
#   find-static    find_package(tilejit), tilejit::tilejit_static
#   pkg-config     CC with `pkg-config --cflags --libs tilejit`
#   subdirectory   add_subdirectory(SOURCE_DIR), tilejit::tilejit
# C_FLAGS go to every compile and link (the sanitizer flags of an ASan
# build, whose installed library needs them). Exits 1 with the failing
# step's log when any check fails.
set -euo pipefail
cmake=$1 cc=$2 build=$3 source=$4 version=$5 flags=${6:-}
work=$(mktemp -d "${TMPDIR:-/tmp}/tilejit-consumer.XXXXXX")
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix
failed=0

fail() {
  echo "FAIL: $1" >&2
  [ -z "${2:-}" ] || sed 's/^/  | /' "$2" >&2
  failed=1
}

# step NAME COMMAND...: runs the command, its output to $work/NAME.log.
step() {
  local name=$1
  shift
  if ! "$@" >"$work/$name.log" 2>&1; then fail "$name: $*" "$work/$name.log"; return 1; fi
}

needs() { # needs ELF LIBRARY: ELF's NEEDED entries name LIBRARY
  readelf -d "$1" | grep -q "NEEDED.*\[$2\]"
}

# --- the install
step install "$cmake" --install "$build" --prefix "$prefix" || exit 1
pc=$(find "$prefix" -name tilejit.pc)
libdir=$(dirname "$(dirname "$pc")")
for f in include/tilejit.h bin/dump-ptx bin/tj-softmax bin/tj-bench bin/tj-run; do
  [ -f "$prefix/$f" ] || fail "not installed: $f"
done
for f in libtilejit.a "libtilejit.so.$version" cmake/tilejit/tilejitConfig.cmake \
  cmake/tilejit/tilejitConfigVersion.cmake cmake/tilejit/tilejitTargets.cmake; do
  [ -f "$libdir/$f" ] || fail "not installed: ${libdir#"$prefix"/}/$f"
done
[ "$(readlink "$libdir/libtilejit.so.0")" = "libtilejit.so.$version" ] ||
  fail "libtilejit.so.0 is not a link to libtilejit.so.$version"
[ "$(readlink "$libdir/libtilejit.so")" = libtilejit.so.0 ] || fail "libtilejit.so is not a link to libtilejit.so.0"
readelf -d "$libdir/libtilejit.so.$version" | grep -q 'SONAME.*\[libtilejit\.so\.0\]' ||
  fail "the shared library's soname is not libtilejit.so.0"
step dump-ptx "$prefix/bin/dump-ptx" softmax -n 100 &&
  { grep -q '\.entry tj_softmax(' "$work/dump-ptx.log" || fail "installed dump-ptx: no entry" "$work/dump-ptx.log"; }

# --- find_package, shared and static; add_subdirectory
# consumer NAME CMAKE_ARGS...: configures, builds and runs tests/consumer.
consumer() {
  local name=$1
  shift
  step "$name-configure" "$cmake" -S "$source/tests/consumer" -B "$work/$name" \
    -DCMAKE_C_COMPILER="$cc" -DCMAKE_C_FLAGS="$flags" "$@" || return 1
  step "$name-build" "$cmake" --build "$work/$name" -j 2 || return 1
  step "$name-run" "$work/$name/consumer" || return 1
  echo "$name: $(cat "$work/$name-run.log")"
}
if consumer find-shared -DCMAKE_PREFIX_PATH="$prefix" -DTILEJIT_EXPECT_VERSION="$version"; then
  needs "$work/find-shared/consumer" libtilejit.so.0 || fail "find-shared: consumer does not need libtilejit.so.0"
fi
if consumer find-static -DCMAKE_PREFIX_PATH="$prefix" -DTILEJIT_EXPECT_VERSION="$version" \
  -DTILEJIT_TARGET=tilejit::tilejit_static; then
  ! needs "$work/find-static/consumer" 'libtilejit[^]]*' || fail "find-static: consumer needs a shared libtilejit"
fi
consumer subdirectory -DTILEJIT_SOURCE_DIR="$source" || true

# --- pkg-config
export PKG_CONFIG_PATH=$libdir/pkgconfig
if step pkg-config-query pkg-config --modversion tilejit; then
  [ "$(cat "$work/pkg-config-query.log")" = "$version" ] || fail "pkg-config: version is not $version"
  [ "$(pkg-config --variable=includedir tilejit)" -ef "$prefix/include" ] ||
    fail "pkg-config: includedir is not the prefix's: $(pkg-config --variable=includedir tilejit)"
  pkg-config --static --libs tilejit | grep -q -- '-lm' || fail "pkg-config --static: no -lm"
  # shellcheck disable=SC2046,SC2086 # the flags are lists of words
  if step pkg-config-build "$cc" $flags -DCONSUMER_DEFINES_BUF_INIT -o "$work/consumer-pc" \
    "$source/tests/consumer/consumer.c" $(pkg-config --cflags --libs tilejit) -lm \
    -Wl,-rpath,"$(pkg-config --variable=libdir tilejit)" &&
    step pkg-config-run "$work/consumer-pc"; then
    echo "pkg-config: $(cat "$work/pkg-config-run.log")"
  fi
fi
exit "$failed"
