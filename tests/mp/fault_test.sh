#!/usr/bin/env bash
# A rank dies (SIGKILL) or stops answering (SIGSTOP) mid-collective: every
# other rank's call must fail with chorusRemoteError or chorusTimeout naming
# the rank, well before the deadline, and no segment may be left behind.
set -uo pipefail
chorus=$1 probe=$2
out=$(mktemp)
before=$(ls /dev/shm | grep -c '^chorus-' || true)
fails=0
check() {  # NAME PATTERN
  if grep -qE -- "$2" "$out"; then echo "ok: $1"; else echo "FAIL: $1"; cat "$out"; fails=$((fails + 1)); fi
}

# SIGKILL of rank 2 mid-collective (a few ms after its 20th call, however
# long start-up took): the others learn from the bootstrap monitor (and over
# TCP from the data sockets too; whichever notices first), not from the
# 60 s timeout, and the error names rank 2.
for t in auto tcp; do
  start=$(date +%s)
  PROBE_KILL_RANK=2 CHORUS_TRANSPORT=$t CHORUS_TIMEOUT_S=60 timeout 50 "$chorus" launch \
    --keep-going -n 3 -- "$probe" > "$out" 2>&1
  took=$(( $(date +%s) - start ))
  for r in 0 1; do
    check "$t: sigkill rank $r fails" \
      "^\\[$r\\] rank $r: call [0-9]+ failed after [0-9.]+ s: remote process exited.*rank 2"
  done
  if (( took > 20 )); then echo "FAIL: $t: the ranks took $took s to notice"; fails=$((fails + 1)); fi
done

# SIGSTOP: nothing closes, so the timeout (3 s here) must end it.
start=$(date +%s)
CHORUS_TIMEOUT_S=3 timeout 50 "$chorus" launch --keep-going -n 3 -- sh -c \
  'if [ "$CHORUS_RANK" = 1 ]; then (sleep 1; kill -STOP $$; sleep 15; kill -9 $$) & fi; exec "$0"' \
  "$probe" > "$out" 2>&1
took=$(( $(date +%s) - start ))
# Rank 0 times out itself, or first hears of a rank that did (it leaves
# saying so).
check "sigstop rank 0 times out" '^\[0\] rank 0: call [0-9]+ failed after [0-9.]+ s: (timeout|remote process exited.*no progress for)'
check "sigstop rank 2 fails" '^\[2\] rank 2: call [0-9]+ failed'
if (( took > 30 )); then echo "FAIL: took $took s"; fails=$((fails + 1)); fi

# Arguments that disagree across processes (rank 1 passes another count):
# clear errors or the timeout, on both transports, never a crash.
for t in shm tcp; do
  PROBE_ODD_RANK=1 CHORUS_TRANSPORT=$t CHORUS_TIMEOUT_S=5 timeout 50 "$chorus" launch --keep-going \
    -n 3 -- "$probe" > "$out" 2>&1
  check "$t: mismatched counts, rank 0 fails" '^\[0\] rank 0: call 0 failed'
  check "$t: mismatched counts, rank 1 fails" '^\[1\] rank 1: call 0 failed'
  check "$t: mismatched counts, rank 2 fails" '^\[2\] rank 2: call 0 failed'
  check "$t: mismatched counts named" 'sent [0-9]+ bytes where this step expects|slices of its call left'
  if grep -q "internal error" "$out"; then echo "FAIL: $t: a rank crashed"; cat "$out"; fails=$((fails + 1)); fi
  # The same bytes of another type: each message's mark names both.
  PROBE_ODD_TYPE=1 CHORUS_TRANSPORT=$t CHORUS_TIMEOUT_S=5 timeout 50 "$chorus" launch --keep-going \
    -n 3 -- "$probe" > "$out" 2>&1
  for r in 0 1 2; do check "$t: mismatched types, rank $r fails" "^\\[$r\\] rank $r: call 0 failed"; done
  check "$t: mismatched types named" "call is on (int32, sum where this rank's is on fp32|fp32, sum where this rank's is on int32)"
done

# A peer killed while this rank reads its memory directly (cross-memory
# attach) fails the call naming it, never returns success with the data
# unread (found by bench/fault_inject.sh: the failed read's status was
# replaced by the communicator's asynchronous error, not yet set). The kill
# lands at different moments of the read, so ten tries.
for i in $(seq 10); do
  CHORUS_TIMEOUT_S=5 CHORUS_TRANSPORT=shm timeout 30 "$chorus" launch --keep-going -n 2 -- sh -c \
    'if [ "$CHORUS_RANK" = 1 ]; then export CHORUS_FAILPOINT="peer.read@4=kill"; fi; exec "$0" "$@"' \
    "$chorus" soak --calls 34 --max-bytes 1M --seed 1000031 > "$out" 2>&1
  if grep -q "wrong elements" "$out" || ! grep -qE '^\[0\] rank 0: call [0-9]+ .*failed.*rank 1' "$out"; then
    echo "FAIL: try $i: rank 1 killed during a direct read"; cat "$out"; fails=$((fails + 1)); break
  fi
done
((fails == 0)) && echo "ok: a peer killed during a direct read fails the call (10 tries)"

after=$(ls /dev/shm | grep -c '^chorus-' || true)
if (( after > before )); then echo "FAIL: segments left:"; ls /dev/shm | grep '^chorus-'; fails=$((fails + 1)); fi
rm -f "$out"
exit $(( fails > 0 ))
