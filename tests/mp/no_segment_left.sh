#!/usr/bin/env bash
# A multi-process job leaves no shared-memory segment behind, whether it ends
# normally or a rank is killed mid-collective.
set -uo pipefail
chorus=$1
before=$(ls /dev/shm | grep -c '^chorus-' || true)
"$chorus" launch -n 4 -- "$chorus" perf allreduce -b 64K -e 4M -f 8 -n 3 -w 1 --check >/dev/null || exit 1
# Rank 3 is killed while the others are in a collective; the launcher stops the rest.
CHORUS_TIMEOUT_S=5 "$chorus" launch -n 4 -- sh -c \
  'if [ "$CHORUS_RANK" = 3 ]; then (sleep 1; kill -9 $$) & fi; exec "$0" perf allreduce -b 16M -e 16M -n 100000 -w 0' \
  "$chorus" >/dev/null 2>&1
rc=$?
[[ $rc -ne 0 ]] || { echo "FAIL: the job with a killed rank succeeded"; exit 1; }
after=$(ls /dev/shm | grep -c '^chorus-' || true)
if [[ $after -gt $before ]]; then
  echo "FAIL: $((after - before)) segment(s) left in /dev/shm:"; ls /dev/shm | grep '^chorus-'; exit 1
fi
echo "ok: no segment left (exit $rc for the killed job)"
