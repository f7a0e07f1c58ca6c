#!/usr/bin/env bash
# Installs a built tree into a fresh prefix and uses it from outside, as a
# user would: the consumer project (consumer/) with find_package(Chorus),
# the C program with pkg-config alone, the installed `chorus` command, and
# the library's exported symbols (the C API and the public C++ language
# only). With CHORUS_PYTHON=1 also `import chorus` from the prefix.
# Usage: install_test.sh BUILD_DIR SOURCE_DIR [PREFIX]   (PREFIX: a fresh one in /tmp)
set -euo pipefail
build=$1
src=$2
work=$(mktemp -d /tmp/chorus-install.XXXXXX)
trap 'rm -rf "$work"' EXIT
prefix=${3:-$work/prefix}
fail() { echo "install_test: $*" >&2; exit 1; }

cmake --install "$build" --prefix "$prefix" >/dev/null
lib=$(ls -d "$prefix"/lib*/ | head -1)
lib=${lib%/}
for f in "$prefix/bin/chorus" "$prefix/include/chorus/chorus.h" "$prefix/include/chorus/lang.hpp" \
         "$lib/libchorus.so" "$lib/cmake/Chorus/ChorusConfig.cmake" "$lib/pkgconfig/chorus.pc"; do
  [[ -e $f ]] || fail "missing $f"
done
soname=$(objdump -p "$lib/libchorus.so" | awk '/SONAME/ {print $2}')
[[ $soname == libchorus.so.0 ]] || fail "soname is '$soname', want libchorus.so.0"
# Exported: chorus* C functions and chorus::lang::{Program,Chunk}, chorus::generate.
leaked=$(nm -D --defined-only -C "$lib/libchorus.so" | awk '{ $1=""; $2=""; print substr($0, 3) }' |
         grep -v -E '^chorus[A-Z]|^chorus::lang::(Program|Chunk)::|^chorus::generate\(' || true)
[[ -z $leaked ]] || fail "libchorus.so exports internal symbols:
$(echo "$leaked" | head -20)"
nm -D --defined-only "$lib/libchorus.so" | grep -q ' T chorusAllReduce$' || fail "chorusAllReduce not exported"

# CMake: find_package(Chorus) -> Chorus::chorus.
cmake -S "$src/tests/install/consumer" -B "$work/cmake-build" -G Ninja \
      -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$work/cmake-build" >/dev/null
LD_LIBRARY_PATH="$lib" "$work/cmake-build/consumer_c"
LD_LIBRARY_PATH="$lib" "$work/cmake-build/consumer_lang" "$work/ag.xml"
# The XML the installed library wrote is verified by the installed command.
"$prefix/bin/chorus" verify "$work/ag.xml"

# pkg-config alone.
export PKG_CONFIG_PATH="$lib/pkgconfig"
[[ $(pkg-config --modversion chorus) == "$(sed -n 's/^project(chorus VERSION \([0-9.]*\).*/\1/p' "$src/CMakeLists.txt")" ]] ||
  fail "pkg-config --modversion chorus: $(pkg-config --modversion chorus)"
# shellcheck disable=SC2046
cc -std=c11 -Wall -Werror -o "$work/consumer_pc" "$src/tests/install/consumer/consumer.c" \
   $(pkg-config --cflags --libs chorus) -Wl,-rpath,"$lib"
"$work/consumer_pc"

if [[ ${CHORUS_PYTHON:-0} == 1 ]]; then
  pydir=$(find "$prefix" -type d -path '*-packages/chorus' | head -1)
  [[ -n $pydir ]] || fail "no Python package chorus under $prefix"
  PYTHONPATH=$(dirname "$pydir") /usr/bin/python3 -c \
    'import chorus, msccl.language; print("python: chorus", chorus.__version__, "from", chorus.__file__)'
fi
echo "install_test: ok ($prefix)"
