#!/usr/bin/env bash
# Seeded fault injection (docs/testing.md "Fault injection"). Each injection
# launches a checked `chorus soak` job (2-4 processes, shared memory or TCP;
# with --netns also two network-namespace hosts) and makes one rank fail at
# one point (CHORUS_FAILPOINT, src/core/failpoint.h): killed, stopped or
# exiting during the bootstrap, fabric creation, a collective's steps, a
# direct read of a peer's memory or shutdown; resetting, dropping or
# delaying its TCP sends; or, between namespaces, the link going down.
# Every injection must end with:
#   - no hang: the job is over within CHORUS_TIMEOUT_S + launch's margin;
#   - every other rank either finished its checked calls with 0 wrong, or
#     failed with an error that names the failed rank (for a lost link: a
#     rank across it), or names a rank whose own error does (a chain of
#     waits, when rank 0, which passes reports on, is the one that stopped
#     or has already left);
#   - no wrong data reported anywhere, no shared-memory segment and no
#     process left behind;
#   - a delay, or a point the run never reached, changes nothing: all pass.
# The choices come from SEED alone, so a failing injection reruns exactly:
# bench/fault_inject.sh 1 SEED+I (its line prints the seed to use).
# Usage: bench/fault_inject.sh [COUNT] [SEED] [--netns] [--chorus PATH]
#   default 1000 injections, seed 1, build/release/tools/chorus/chorus
set -uo pipefail
cd "$(dirname "$0")/.."
count=1000 seed=1 netns=0 chorus=build/release/tools/chorus/chorus
pos=()
while (($#)); do
  case $1 in
    --netns) netns=1 ;;
    --chorus) chorus=$2; shift ;;
    *) pos+=("$1") ;;
  esac
  shift
done
((${#pos[@]} > 0)) && count=${pos[0]}
((${#pos[@]} > 1)) && seed=${pos[1]}
[[ -x $chorus ]] || { echo "no $chorus (build it: cmake --build --preset release)"; exit 2; }
chorus=$(realpath "$chorus")
T=2  # CHORUS_TIMEOUT_S for every job
work=$(mktemp -d)
tag=$$
nsa=chorus-fi-$tag-a nsb=chorus-fi-$tag-b net=10.232.$((tag % 250 + 1))
cleanup() {
  rm -rf "$work"
  if ((netns)); then ip netns del "$nsa" 2>/dev/null; ip netns del "$nsb" 2>/dev/null; fi
}
trap cleanup EXIT
if ((netns)); then
  if ! { ip netns add "$nsa" && ip netns add "$nsb" &&
         ip link add "fa$tag" netns "$nsa" type veth peer name "fb$tag" netns "$nsb" &&
         ip -n "$nsa" addr add "$net.1/24" dev "fa$tag" &&
         ip -n "$nsb" addr add "$net.2/24" dev "fb$tag" &&
         ip -n "$nsa" link set lo up && ip -n "$nsb" link set lo up &&
         ip -n "$nsa" link set "fa$tag" up && ip -n "$nsb" link set "fb$tag" up; } 2>/dev/null; then
    echo "SKIP: cannot make network namespaces here (need root / CAP_SYS_ADMIN)"
    exit 77
  fi
fi

# The ranks rank $1's lines in $out name ("rank 3", "ranks 1 2"), but itself.
named() {
  grep -E "^\[$1\] " "$out" | grep -oE "ranks?( [0-9]+)+" | grep -oE "[0-9]+" | sort -u |
    grep -vx "$1"
}
# Whether rank $1's error leads to a rank matching $2: it names one, or
# names a rank whose own error leads there (a chain of waits: a rank that
# waited for one that waited for the failed rank). Sets VIA to the chain.
leads_to() {
  local queue=("$1") seen=" $1 " x y
  VIA=""
  while ((${#queue[@]})); do
    x=${queue[0]}
    queue=("${queue[@]:1}")
    for y in $(named "$x"); do
      if [[ $y =~ ^($2)$ ]]; then VIA="$VIA $x->$y"; return 0; fi
      [[ $seen == *" $y "* ]] && continue
      seen+="$y "
      VIA="$VIA $x->$y"
      queue+=("$y")
    done
  done
  return 1
}

# Sets P to one of the arguments. Not $(pick ...): bash reseeds RANDOM in
# subshells, and the choices must follow the seed.
pick() { local a=("$@"); P=${a[RANDOM % ${#a[@]}]}; }
# Segments whose job is over: their names start with chorus-PID- (the
# launcher's, or the creating process's), and that process is gone. Other
# jobs running at the same time do not count.
orphan_segments() {
  local f pid
  for f in /dev/shm/chorus-*; do
    [[ -e $f ]] || continue
    pid=${f#/dev/shm/chorus-}
    pid=${pid%%-*}
    [[ $pid =~ ^[0-9]+$ ]] && ! kill -0 "$pid" 2>/dev/null && echo "$f"
  done | sort
}

pass=0 fail=0 fired=0 allfailed=0 chained=0
declare -A byPoint
for ((i = 0; i < count; i++)); do
  s=$((seed + i))
  RANDOM=$s
  hosts=0
  if ((netns)) && ((RANDOM % 2)); then hosts=1; fi
  { pick 2 3 4; procs=$P; }
  ((hosts)) && procs=4
  { pick shm tcp; transport=$P; }
  ((hosts)) && transport=auto
  victim=$((RANDOM % procs))
  points=(bootstrap.connect bootstrap.allgather fabric.create step step step shutdown)
  [[ $transport == shm ]] && points+=(peer.read peer.read)
  [[ $transport != shm ]] && points+=(tcp.send tcp.send tcp.send)
  ((hosts)) && points+=(linkdown linkdown)
  { pick "${points[@]}"; point=$P; }
  case $point in
    bootstrap.connect | shutdown) at=1 ;;
    bootstrap.allgather) at=$((1 + RANDOM % 2)) ;;
    fabric.create) at=$((1 + RANDOM % 3)) ;;
    step) at=$((1 + RANDOM % 500)) ;;
    peer.read) at=$((1 + RANDOM % 8)) ;;
    tcp.send) at=$((1 + RANDOM % 200)) ;;
    linkdown) at=$((50 + RANDOM % 250)) ;;  # milliseconds into the run
  esac
  { pick kill kill kill stop exit; action=$P; }
  [[ $point == tcp.send ]] && { pick kill stop reset reset drop "delay:$((1 + RANDOM % 20))"; action=$P; }
  [[ $point == linkdown ]] && action=down
  calls=$((20 + RANDOM % 60))
  ((hosts)) && calls=$((100 + RANDOM % 200))
  { pick 4K 64K 256K 1M; bytes=$P; }
  [[ $point == peer.read ]] && bytes=1M
  fp="$point@$at=$action"
  out=$work/out
  marker="--seed $((1000000 + s))"
  launch=("$chorus" launch --keep-going -n "$procs")
  if ((hosts)); then
    launch+=(--hosts "$nsa,$nsb" --agent "ip netns exec {host} sh -c" --root "$net.1")
  fi
  before=$(orphan_segments)
  start=$(date +%s%N)
  if [[ $point == linkdown ]]; then
    (sleep "$(printf '0.%03d' "$at")"; ip -n "$nsa" link set "fa$tag" down) &
    downer=$!
    CHORUS_TIMEOUT_S=$T CHORUS_TRANSPORT=$transport timeout $((3 * T + 20)) "${launch[@]}" -- \
      "$chorus" soak --calls "$calls" --max-bytes "$bytes" $marker > "$out" 2>&1
    rc=$?
    wait "$downer" 2>/dev/null
    ip -n "$nsa" link set "fa$tag" up
  else
    if [[ $action == stop ]]; then
      # The stopped rank is the test's own hang: once every other rank has
      # left, the operator (this loop) kills it, so the launcher can finish.
      (while sleep 0.2; do
         pids=$(pgrep -f -- "^$chorus soak .*$marker\$" | tr '\n' ',')
         [[ -z $pids ]] && break
         if ! ps -o stat= -p "${pids%,}" | grep -qv '^T'; then
           pkill -9 -f -- "^$chorus soak .*$marker\$"
           break
         fi
       done) &
    fi
    CHORUS_TIMEOUT_S=$T CHORUS_TRANSPORT=$transport VICTIM=$victim FP=$fp timeout $((3 * T + 20)) \
      "${launch[@]}" -- sh -c \
      'if [ "$CHORUS_RANK" = "$VICTIM" ]; then export CHORUS_FAILPOINT="$FP"; fi; exec "$0" "$@"' \
      "$chorus" soak --calls "$calls" --max-bytes "$bytes" $marker > "$out" 2>&1
    rc=$?
  fi
  took=$((($(date +%s%N) - start) / 1000000))
  problems=()
  ((rc == 124)) && problems+=("hung: still running after $((3 * T + 20)) s")
  grep -q "wrong elements" "$out" && problems+=("wrong data")
  sleep 0.05
  if pgrep -f -- "^$chorus soak .*$marker\$" > /dev/null; then
    problems+=("process left behind")
    pkill -9 -f -- "^$chorus soak .*$marker\$"
  fi
  wait 2>/dev/null
  left=$(comm -13 <(echo "$before") <(orphan_segments) | grep . | tr '\n' ' ')
  [[ -n $left ]] && problems+=("shared-memory segment left behind: $left")
  hit=0
  if [[ $point == linkdown ]]; then hit=1; else grep -q "CHORUS_FAILPOINT: .*injecting" "$out" && hit=1; fi
  # Who failed and what did each other rank say?
  failedRanks=0 survivors=0
  for ((r = 0; r < procs; r++)); do
    mine=$(grep -E "^\[$r\] " "$out")
    if [[ $point != linkdown && $r == "$victim" && $hit == 1 && $action != delay:* ]]; then
      # The victim: killed or stopped say nothing; reset/drop must name a peer.
      if [[ $action == reset || $action == drop ]] &&
         ! grep -qE "calls checked, 0 wrong" <<< "$mine" &&
         ! grep -oE "rank [0-9]+" <<< "$mine" | grep -qv "^rank $r\$"; then
        problems+=("rank $r (the victim, $action) failed without naming a peer")
      fi
      continue
    fi
    survivors=$((survivors + 1))
    if grep -qE "calls checked, 0 wrong" <<< "$mine"; then continue; fi
    failedRanks=$((failedRanks + 1))
    if ((hit == 0)) || [[ $action == delay:* ]]; then
      problems+=("rank $r failed although nothing was injected that should fail it")
      continue
    fi
    # Whom it must lead to: the victim, or for a cut link a rank across it.
    want=$victim
    if [[ $point == linkdown ]]; then
      half=$((procs / 2))
      if ((r < half)); then want="$(seq -s '|' $half $((procs - 1)))"; else want="$(seq -s '|' 0 $((half - 1)))"; fi
    fi
    if named "$r" | grep -qxE "$want"; then
      :  # named directly
    elif leads_to "$r" "$want"; then
      chained=$((chained + 1))
    else
      problems+=("rank $r failed without naming rank(s) $want, directly or through the ranks it names")
    fi
  done
  ((survivors > 0 && failedRanks == survivors)) && allfailed=$((allfailed + 1))
  ((hit)) && fired=$((fired + 1))
  key="$point/$action"
  [[ $action == delay:* ]] && key="$point/delay"
  if ((${#problems[@]} == 0)); then
    pass=$((pass + 1))
    byPoint[$key]=$(( ${byPoint[$key]:-0} + 1 ))
    printf 'ok   %4d seed %-6d %d procs %-4s %s rank %d%s: %s, %d/%d others failed, %d ms\n' \
      "$i" "$s" "$procs" "$transport" "$fp" "$victim" "$( ((hosts)) && echo ' 2 hosts')" \
      "$( ((hit)) && echo fired || echo 'not reached')" "$failedRanks" "$survivors" "$took"
  else
    fail=$((fail + 1))
    printf 'FAIL %4d seed %-6d %d procs %-4s %s rank %d%s: %s\n' "$i" "$s" "$procs" "$transport" \
      "$fp" "$victim" "$( ((hosts)) && echo ' 2 hosts')" "$(IFS=';'; echo "${problems[*]}")"
    sed 's/^/     | /' "$out" | tail -30
  fi
done
echo "== $count injections (seed $seed..$((seed + count - 1))): $pass passed, $fail failed;" \
  "$fired fired, in $allfailed every other rank failed (the rest finished their checked calls first);" \
  "$chained failing ranks named the failed one through a chain of waits, the others directly"
for k in $(printf '%s\n' "${!byPoint[@]}" | sort); do printf '   %-28s %d\n' "$k" "${byPoint[$k]}"; done
exit $((fail > 0))
