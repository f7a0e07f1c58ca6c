#!/usr/bin/env bash
# Two "hosts" without a second machine: two network namespaces joined by a
# veth pair, addresses only inside them. `chorus launch --hosts` starts
# ranks 0,1 in the first and 2,3 in the second (the agent is `ip netns
# exec`, in place of ssh): pairs within a namespace talk over shared memory,
# pairs across over TCP between 10.231.x.1 and 10.231.x.2 (automatic
# choice: the namespaces are different hosts to Chorus). Every collective is
# checked; then a rank in the second namespace is killed mid-collective and
# the others must fail naming it. Skips (exit 77) where namespaces cannot be
# created (not root, or a container without CAP_SYS_ADMIN).
set -uo pipefail
chorus=$1 probe=$2
tag=$$
a=chorus-$tag-a b=chorus-$tag-b
net=10.231.$(( tag % 250 + 1 ))
cleanup() { ip netns del "$a" 2>/dev/null; ip netns del "$b" 2>/dev/null; }
trap cleanup EXIT
if ! ip netns add "$a" 2>/dev/null; then
  echo "SKIP: cannot create network namespaces here (need root / CAP_SYS_ADMIN)"
  exit 77
fi
if ! { ip netns add "$b" &&
       ip link add "va$tag" netns "$a" type veth peer name "vb$tag" netns "$b" &&
       ip -n "$a" addr add "$net.1/24" dev "va$tag" && ip -n "$b" addr add "$net.2/24" dev "vb$tag" &&
       ip -n "$a" link set lo up && ip -n "$b" link set lo up &&
       ip -n "$a" link set "va$tag" up && ip -n "$b" link set "vb$tag" up; }; then
  echo "SKIP: namespaces exist but a veth pair cannot be set up here"
  exit 77
fi
launch=("$chorus" launch -n 4 --hosts "$a,$b" --agent "ip netns exec {host} sh -c" --root "$net.1")
fails=0
out=$(mktemp)
for coll in allreduce allgather reducescatter alltoall broadcast reduce; do
  if CHORUS_DEBUG=INFO "${launch[@]}" -- "$chorus" perf "$coll" -b 4K -e 4M -f 32 -n 2 -w 1 --check \
      > "$out" 2>&1 && grep -q "Out of bounds values : 0 OK" "$out"; then
    echo "ok: $coll across two namespaces"
  else
    echo "FAIL: $coll"; cat "$out"; fails=$((fails + 1))
  fi
done
# The transports were chosen per pair: TCP across, shared memory within.
CHORUS_DEBUG=INFO "${launch[@]}" -- "$chorus" perf allreduce -b 4K -e 4K -n 1 -w 0 > "$out" 2>&1
if grep -q "TCP to ranks 2 3" "$out" && grep -q "shared memory with ranks 1" "$out"; then
  echo "ok: rank 0 uses TCP to ranks 2,3 and shared memory with rank 1"
else
  echo "FAIL: transports per pair"; cat "$out"; fails=$((fails + 1))
fi
# A rank on the second host dies: the others fail naming it, promptly.
start=$(date +%s)
PROBE_KILL_RANK=3 CHORUS_TIMEOUT_S=60 timeout 50 "${launch[@]}" --keep-going -- "$probe" \
  > "$out" 2>&1
took=$(( $(date +%s) - start ))
for r in 0 1 2; do
  if grep -qE "^\[$r\] rank $r: call [0-9]+ failed after [0-9.]+ s: remote process exited.*rank 3" "$out"; then
    echo "ok: rank $r saw rank 3 die"
  else
    echo "FAIL: rank $r"; cat "$out"; fails=$((fails + 1))
  fi
done
if (( took > 20 )); then echo "FAIL: took $took s to notice"; fails=$((fails + 1)); fi
rm -f "$out"
exit $(( fails > 0 ))
