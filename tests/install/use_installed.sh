#!/usr/bin/env bash
# Uses an installed Chorus as a user would; shared by install_test.sh (a
# fresh prefix) and scripts/deb_check.sh (the .deb in /usr). Builds
# consumer/ with find_package(Chorus) and the C program with pkg-config
# alone, runs them, verifies the XML the installed library wrote with the
# installed command, and, where the Python package is installed, imports it
# and runs a checked call from the prefix.
# Usage: use_installed.sh PREFIX WORKDIR
set -euo pipefail
prefix=$1
work=$2
src=$(cd "$(dirname "$0")/../.." && pwd)
fail() { echo "use_installed: $*" >&2; exit 1; }
so=$(find "$prefix"/lib* -maxdepth 2 -name libchorus.so 2>/dev/null | head -1)
[[ -n $so ]] || fail "no libchorus.so under $prefix/lib*"
lib=$(dirname "$so")

# CMake: find_package(Chorus) -> Chorus::chorus.
cmake -S "$src/tests/install/consumer" -B "$work/cmake-build" -G Ninja \
      -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$work/cmake-build" >/dev/null
LD_LIBRARY_PATH="$lib" "$work/cmake-build/consumer_c"
LD_LIBRARY_PATH="$lib" "$work/cmake-build/consumer_lang" "$work/ag.xml"
"$prefix/bin/chorus" verify "$work/ag.xml"

# pkg-config alone.
export PKG_CONFIG_PATH="$lib/pkgconfig"
want=$(sed -n 's/^project(chorus VERSION \([0-9.]*\).*/\1/p' "$src/CMakeLists.txt")
[[ $(pkg-config --modversion chorus) == "$want" ]] ||
  fail "pkg-config --modversion chorus: $(pkg-config --modversion chorus), want $want"
# shellcheck disable=SC2046
cc -std=c11 -Wall -Werror -o "$work/consumer_pc" "$src/tests/install/consumer/consumer.c" \
   $(pkg-config --cflags --libs chorus) -Wl,-rpath,"$lib"
"$work/consumer_pc"

pydir=$(find "$prefix"/lib* -maxdepth 4 -type d -path '*-packages/chorus' 2>/dev/null | head -1)
if [[ -n $pydir ]]; then
  (cd "$work" && PYTHONPATH=$(dirname "$pydir") /usr/bin/python3 -c \
    'import chorus, msccl.language; chorus.gen("ring_allreduce", ranks=4).run(); print("python: chorus", chorus.__version__, "from", chorus.__file__)')
fi
