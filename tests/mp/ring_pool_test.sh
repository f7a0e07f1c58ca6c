#!/usr/bin/env bash
# The ring pool (docs/processes.md, "Memory"): a communicator keeps the rings
# of the algorithms it used within CHORUS_RING_MB_PER_PEER. A checked soak
# of 22 collective x algorithm ways on 4 processes at 1 MiB per peer
# releases the least recently used algorithms' rings every few calls, and
# every rank must release and remake the same ones at the same call (or the
# ranks wait on rings the others no longer have): over shared memory, and
# over TCP (where a peer's last credits for released rings still arrive).
# It must also hold less: rank 0's resident memory at least 16 MiB below
# the same soak's with no limit. Usage: ring_pool_test.sh CHORUS
set -uo pipefail
chorus=$1
soak() {  # soak MIB_PER_PEER TRANSPORT: prints rank 0's MiB after the replay
  local out
  out=$(CHORUS_RING_MB_PER_PEER=$1 CHORUS_TRANSPORT=$2 "$chorus" soak --procs 4 --calls 300 \
        --max-bytes 256K --seed 5 2>&1) || { echo "soak at $1 MiB per peer over $2 failed:" >&2;
                                             echo "$out" | tail -20 >&2; return 1; }
  sed -n 's/^\[0\] rank 0: .* -> \([0-9.]*\) MiB after its replay.*/\1/p' <<<"$out"
}
small=$(soak 1 shm) || exit 1
large=$(soak 1000000 shm) || exit 1
soak 1 tcp >/dev/null || exit 1
echo "rank 0 resident: $small MiB at 1 MiB per peer, $large MiB unlimited"
if ! awk -v s="$small" -v l="$large" 'BEGIN { exit !(s != "" && l != "" && l - s >= 16) }'; then
  echo "FAIL: the pool did not release rings ($small MiB against $large MiB)" >&2
  exit 1
fi
echo "ok"
