#!/usr/bin/env bash
# Installs a built tree into a fresh prefix, checks what is there (files,
# soname, only the C API and the public C++ language exported) and uses it
# from outside as a user would (use_installed.sh: CMake, pkg-config, the
# installed command, the Python package). With CHORUS_PYTHON=1 the Python
# package must be there.
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
# (grep reads a variable: grep -q on nm's pipe would stop nm mid-write, and
# pipefail would count its SIGPIPE as a failure once the list passes 4 KiB.)
symbols=$(nm -D --defined-only "$lib/libchorus.so")
grep -q ' T chorusAllReduce$' <<<"$symbols" || fail "chorusAllReduce not exported"

"$src/tests/install/use_installed.sh" "$prefix" "$work"
if [[ ${CHORUS_PYTHON:-0} == 1 ]]; then
  [[ -n $(find "$prefix" -type d -path '*-packages/chorus') ]] || fail "no Python package chorus under $prefix"
fi
echo "install_test: ok ($prefix)"
