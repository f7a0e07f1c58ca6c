#!/usr/bin/env bash
# docs/security.md, checked: a one-host job's root listens on loopback; the
# secret is 128 random bits that travel in the environment (locally) or on
# the agent's standard input (--hosts), never on a command line; once a job
# is set up none of its processes listens on any port; its shared-memory
# segments are the owner's alone (0600). (Strays refused and a flood
# bounded: Bootstrap.* in tests/runtime/bootstrap_test.cc.)
set -uo pipefail
chorus=$1
fails=0
ok() { echo "ok: $1"; }
bad() { echo "FAIL: $1"; fails=$((fails + 1)); }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# A rank's view: where the root is, the secret's shape, and whether any
# process's command line holds the secret (grep reads it from a file, so its
# own command line does not).
probe='printf %s "$CHORUS_SECRET" > "$0.$CHORUS_RANK"
echo "root=$CHORUS_ROOT secretlen=${#CHORUS_SECRET}"
n=$(for f in /proc/[0-9]*/cmdline; do tr "\0" " " < "$f" 2>/dev/null; echo; done | grep -F -c -f "$0.$CHORUS_RANK")
echo "cmdlines-with-secret=$n"'
for mode in local hosts; do
  args=(launch -n 2)
  [[ $mode == hosts ]] && args+=(--hosts a,b --agent "sh -c" --root 127.0.0.1)
  out=$("$chorus" "${args[@]}" -- sh -c "$probe" "$work/s" 2>&1)
  if grep -qE '^\[0\] root=127\.0\.0\.1:[0-9]+ secretlen=32$' <<< "$out"; then
    ok "$mode: the root listens on 127.0.0.1; the secret is 32 hex digits (128 bits)"
  else
    bad "$mode: root address or secret"; echo "$out"
  fi
  if [[ $(grep -c 'cmdlines-with-secret=0$' <<< "$out") == 2 ]]; then
    ok "$mode: no command line holds the secret"
  else
    bad "$mode: the secret is on a command line"; echo "$out"
  fi
done

# A running job (TCP between its ranks, so transport listeners were made
# too): after set-up, no listening socket and only 0600 segments.
for t in shm tcp; do
  CHORUS_TRANSPORT=$t "$chorus" launch -n 3 -- "$chorus" soak --calls 20000 --max-bytes 4K \
    --seed 77 > "$work/job" 2>&1 &
  job=$!
  for _ in $(seq 100); do grep -q '# 4000 calls' "$work/job" && break; sleep 0.1; done
  pids=$(pgrep -f -- "^$chorus soak --calls 20000 --max-bytes 4K --seed 77" | tr '\n' '|')
  if [[ -z $pids ]]; then
    bad "$t: the job did not start"; cat "$work/job"
  elif ss -ltnp 2>/dev/null | grep -qE "pid=(${pids%|}),"; then
    bad "$t: a rank listens after set-up"; ss -ltnp | grep -E "pid=(${pids%|}),"
  else
    ok "$t: no rank listens once the job is set up"
  fi
  # Segments are unlinked once every rank mapped them: their modes are read
  # through the ranks' mappings.
  modes=$(for p in ${pids//|/ }; do
            for f in /proc/"$p"/map_files/*; do
              [[ $(readlink "$f") == /dev/shm/chorus-* ]] && stat -L -c '%a' "$f"
            done 2>/dev/null
          done | sort -u | tr '\n' ' ')
  if [[ $modes == "600 " ]]; then
    ok "$t: shared-memory segments are 0600 (${modes:-none})"
  else
    bad "$t: segment modes: $modes"
  fi
  wait "$job" || { bad "$t: the job failed"; tail -5 "$work/job"; }
done
exit $((fails > 0))
