#!/bin/sh
# libchorus-nccl exports exactly the functions nccl.h declares (ncclX and
# pncclX), read from the header itself: a function NCCL adds is a failure
# here until Chorus serves it, and nothing of Chorus's own leaks out.
# usage: exports_test.sh NCCL_H LIBRARY
set -eu
header=$1 lib=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# Declarations: the header through the C preprocessor (no comments, no
# macros), then every "<type> [p]ncclName(...)" statement.
${CC:-cc} -E -P -x c -I"$(dirname "$header")" "$header" | tr '\n' ' ' | tr ';{}' '\n\n\n' |
  sed -n -e 's/^ *\(__attribute__ *((.*)) *\)*\(ncclResult_t\|const char *\*\|void\) *\*\? *\(p\?nccl[A-Za-z0-9_]*\) *(.*/\3/p' |
  sort -u > "$tmp/declared"
nm -D --defined-only "$lib" | awk '$2 == "T" || $2 == "W" || $2 == "i" { print $3 }' | sort -u \
  > "$tmp/exported"
count=$(wc -l < "$tmp/declared")
if [ "$count" -lt 40 ]; then
  echo "FAIL: read only $count declarations from $header (the parser, not the library?)"
  exit 1
fi
if ! diff "$tmp/declared" "$tmp/exported" > "$tmp/diff"; then
  echo "FAIL: exports differ from $header ('<' declared, not exported; '>' exported, not declared):"
  cat "$tmp/diff"
  exit 1
fi
echo "ok: $count functions, exactly those nccl.h declares"
