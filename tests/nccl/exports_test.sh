#!/bin/sh
# libchorus-nccl exports exactly NCCL's functions: those nccl.h declares
# (ncclX and pncclX, read from the header itself) and, where NCCL's own
# library is given, every name it exports (its device API, nccl_device.h,
# and internal names such as ncclResetDebugInitInternal that programs link
# against). A function NCCL adds is a failure here until Chorus serves it,
# and nothing of Chorus's own leaks out.
# usage: exports_test.sh NCCL_H LIBRARY [NCCL_LIBRARY]
set -eu
header=$1 lib=$2 real=${3:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# Declarations: the header through the C preprocessor (no comments, no
# macros), then every "<type> [p]ncclName(...)" statement.
${CC:-cc} -E -P -x c -I"$(dirname "$header")" "$header" | tr '\n' ' ' | tr ';{}' '\n\n\n' |
  sed -n -e 's/^ *\(__attribute__ *((.*)) *\)*\(ncclResult_t\|const char *\*\|void\) *\*\? *\(p\?nccl[A-Za-z0-9_]*\) *(.*/\3/p' |
  sort -u > "$tmp/declared"
functions() {  # the functions a shared library defines and exports
  nm -D --defined-only "$1" | awk '$2 == "T" || $2 == "W" || $2 == "i" { sub(/@.*/, "", $3); print $3 }' |
    sort -u
}
functions "$lib" > "$tmp/exported"
count=$(wc -l < "$tmp/declared")
if [ "$count" -lt 40 ]; then
  echo "FAIL: read only $count declarations from $header (the parser, not the library?)"
  exit 1
fi
cp "$tmp/declared" "$tmp/want"
what="nccl.h declares"
if [ -n "$real" ] && [ -f "$real" ]; then
  functions "$real" > "$tmp/real"
  if [ "$(wc -l < "$tmp/real")" -lt "$count" ]; then
    echo "FAIL: $real exports fewer functions than nccl.h declares (not NCCL?)"
    exit 1
  fi
  sort -u "$tmp/declared" "$tmp/real" > "$tmp/want"
  what="nccl.h declares and $real exports"
else
  # Without NCCL's library the device API's names cannot be read from it:
  # accept them by name (src/nccl/device_api.cc serves them).
  grep -E '^p?nccl(DevComm|Team|LsaBarrier|GinBarrier|LLA2A)|^ncclResetDebugInitInternal$' \
    "$tmp/exported" | sort -u "$tmp/declared" - > "$tmp/want"
  what="nccl.h declares, and the device API by name (no NCCL library given)"
fi
if ! diff "$tmp/want" "$tmp/exported" > "$tmp/diff"; then
  echo "FAIL: exports differ from what $what ('<' missing, '>' exported, not NCCL's):"
  cat "$tmp/diff"
  exit 1
fi
echo "ok: $(wc -l < "$tmp/want") functions, exactly what $what"
