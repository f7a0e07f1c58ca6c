#!/usr/bin/env bash
# End-to-end checks of the `chorus` command: exit codes, output lines and
# error locations, as a user sees them.
# Usage: cli_test.sh CHORUS SRC_DIR MSCCL_DIR [PART...]
#   PART 1-5 (default all): ctest runs the five as separate tests, so they
#   share the machine's cores instead of one test running for minutes.
set -u
chorus=$1 src=$2 msccl=$3
shift 3
parts=("$@")
((${#parts[@]} > 0)) || parts=(1 2 3 4 5)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0 passes=0

check() {  # check NAME WANT_EXIT PATTERN -- command...
  local name=$1 want=$2 pattern=$3
  shift 4
  local out rc
  out=$("$@" 2>&1)
  rc=$?
  if [[ $rc -ne $want ]]; then
    echo "FAIL $name: exit $rc, wanted $want"; echo "$out" | head -20; fails=$((fails + 1)); return
  fi
  if [[ -n $pattern ]] && ! grep -qE -- "$pattern" <<<"$out"; then
    echo "FAIL $name: output lacks /$pattern/"; echo "$out" | head -20; fails=$((fails + 1)); return
  fi
  passes=$((passes + 1))
}

# Part 1: verify, convert, run, perf, launch, gen, per-rank lowering.
part1() {
check production 0 '14 files: 14 ok, 0 wrong, 0 unreadable' -- "$chorus" verify "$msccl"/*.xml
check ap-1pass-line 0 '^ok +.*ap-1pass.xml +allreduce +8 ranks +in-place +32 chunks +LL +32 tbs/rank +max 20 steps/tb$' \
  -- "$chorus" verify "$msccl/ap-1pass.xml"
check examples 0 '5 ok' -- "$chorus" verify "$src"/examples/algorithms/*.xml
check broadcast-root 0 'root 0' -- "$chorus" verify "$src/examples/algorithms/chain_broadcast_4.xml"
check wrong-exit-1 1 'e301_swapped_offsets.xml:[0-9]+:[0-9]+: error\[E301\]: rank 1' \
  -- "$chorus" verify "$src/tests/data/bad/e301_swapped_offsets.xml"
check unreadable-exit-2 2 'e001_truncated.xml:2:40: error\[E001\]' \
  -- "$chorus" verify "$src/tests/data/bad/e001_truncated.xml"
check unreadable-wins 2 '' -- "$chorus" verify "$src/tests/data/bad/e301_swapped_offsets.xml" "$tmp/missing.xml"
check missing-file 2 'E005' -- "$chorus" verify "$tmp/missing.xml"
check json 1 '"code": "E204"' -- "$chorus" verify --json "$src/tests/data/bad/e204_cross_rank_cycle.xml"
check custom-unproven 0 'N308' -- "$chorus" verify "$src/tests/data/custom/shift3.xml"
check custom-spec 0 '^ok ' -- "$chorus" verify --spec "$src/tests/data/custom/shift3.spec.json" "$src/tests/data/custom/shift3.xml"
check show 0 'longest dependency chain: [0-9]+ steps' -- "$chorus" show "$msccl/r48ll.xml"
check show-bad 2 'E001' -- "$chorus" show "$src/tests/data/bad/e001_truncated.xml"
check explain-list 0 'E401 +race' -- "$chorus" explain
check explain-one 0 'E110 \(offset-range' -- "$chorus" explain offset-range
check explain-unknown 2 'unknown code' -- "$chorus" explain E999
check bad-args 2 '' -- "$chorus" verify
check bad-subcommand 2 '' -- "$chorus" frobnicate

# convert: XML -> JSON -> XML gives the normalized XML; legacy files gain the ten attributes.
check to-json 0 '' -- "$chorus" convert "$msccl/ap4ll.xml" -o "$tmp/ap4ll.json"
check from-json 0 '' -- "$chorus" convert "$tmp/ap4ll.json" -o "$tmp/ap4ll.xml"
check normalize 0 '' -- "$chorus" convert "$msccl/ap4ll.xml" -o "$tmp/ap4ll.norm.xml"
if cmp -s "$tmp/ap4ll.xml" "$tmp/ap4ll.norm.xml"; then passes=$((passes + 1)); else
  echo "FAIL json-roundtrip: XML->JSON->XML differs from XML->XML"; fails=$((fails + 1)); fi
check json-verifies 0 '^ok ' -- "$chorus" verify "$tmp/ap4ll.json"
sed -e 's/ outofplace="0" minBytes="0" maxBytes="0"//' "$src/tests/data/good_pairs2.xml" > "$tmp/legacy.xml"
check legacy-warns 0 'warning\[W507\]' -- "$chorus" verify "$tmp/legacy.xml"
check legacy-convert 0 '' -- "$chorus" convert "$tmp/legacy.xml" -o "$tmp/legacy.out.xml"
check legacy-fixed 0 '^ok +[^ ]+legacy.out.xml' -- "$chorus" verify --target msccl "$tmp/legacy.out.xml"
check convert-unknown-ext 2 'pass --to' -- "$chorus" convert "$msccl/ap4ll.xml" -o "$tmp/out.txt"
check convert-stdout 0 '<algo name="allreduce_pairs"' -- "$chorus" convert "$msccl/ap-1pass.xml" -o -

# run: real data on CPU ranks, checked.
check run-check 0 'check +0 wrong element' -- "$chorus" run "$msccl/ap4ll.xml" --check -n 2 -w 0
check run-deterministic 0 'check +0 wrong element' -- "$chorus" run "$msccl/a2a4ll.xml" --check \
  --driver deterministic --order reverse -b 64K --slice-bytes 64 -n 2 -w 0
check run-types 0 'check +0 wrong element' -- "$chorus" run "$src/examples/algorithms/ring_allreduce_5_outofplace.xml" \
  --check --dtype bf16 --op max -b 1M -n 2 -w 0
check run-bad-dtype 2 "unknown data type 'fp7'" -- "$chorus" run "$msccl/ap4ll.xml" --dtype fp7
check run-wrong-form 2 'does not serve out-of-place calls' -- "$chorus" run "$msccl/ap4ll.xml" --outofplace
check run-too-small 2 'below the smallest call' -- "$chorus" run "$msccl/ap4ll.xml" -b 16
check run-rejected 2 'the verifier rejects' -- "$chorus" run "$src/tests/data/bad/e301_swapped_offsets.xml"

# perf: nccl-tests-style table, checked; CSV; selection from a directory, explained.
for coll in allreduce allgather reducescatter alltoall broadcast reduce gather scatter; do
  check "perf-$coll" 0 'Out of bounds values : 0 OK' -- "$chorus" perf "$coll" --ranks 3 -b 4K -e 64K -f 4 \
    -n 2 -w 1 --check
done
check perf-header 0 '^# memcpy bandwidth: [0-9.]+ GB/s' -- "$chorus" perf allreduce --ranks 2 -b 4K -e 4K -n 1 -w 0
check perf-csv 0 '^allreduce,2,4096,1024,fp32,sum,-1,' -- "$chorus" perf allreduce --ranks 2 -b 4K -e 4K -n 1 -w 0 --csv
check perf-builtin 0 'Out of bounds values : 0 OK' -- "$chorus" perf allreduce --ranks 5 --algo ring_allreduce \
  -b 40K -e 40K -n 1 -w 0 --check
check perf-file 0 'Out of bounds values : 0 OK' -- "$chorus" perf allgather --ranks 8 --algo "$msccl/ag-1m.xml" \
  -b 1M -e 1M -n 1 -w 0 --check
check perf-file-wrong-size 2 "for 8 ranks, the communicator has 4" -- "$chorus" perf allgather --ranks 4 \
  --algo "$msccl/ag-1m.xml" -b 1M -e 1M -n 1 -w 0
check perf-inplace-only 0 '^ +4096 +1024 +fp32 +sum +-1 +- +- +- +- +- +[0-9.]+ ' -- "$chorus" perf allreduce \
  --ranks 4 --algo "$src/examples/algorithms/ring_allreduce_4.xml" -b 4K -e 4K -n 1 -w 0 --check
# A built-in that serves one form (direct_alltoall: out of place) measures that form only.
check perf-builtin-out-of-place-only 0 '^ +4096 +512 +fp32 +none +-1 +[0-9.]+ .* +- +- +- +- +-$' -- \
  "$chorus" perf alltoall --ranks 2 --algo direct_alltoall -b 4K -e 4K -n 1 -w 0 --check
check perf-bad-coll 2 "unknown collective 'allsum'" -- "$chorus" perf allsum
check perf-bad-algo 2 'no built-in algorithm named' -- "$chorus" perf allreduce --algo tree_allreduce
mkdir -p "$tmp/algos" && cp "$msccl"/ap*.xml "$msccl"/r48*.xml "$tmp/algos/" && echo '<algo' > "$tmp/algos/0_broken.xml"
check selection-info 0 'ap4ll.xml: chosen' -- env CHORUS_ALGO_DIR="$tmp/algos" CHORUS_DEBUG=INFO \
  "$chorus" perf allreduce --ranks 8 -b 64K -e 64K -n 1 -w 0 --check
check selection-skips-broken 0 'WARN skipping algorithm: .*0_broken.xml' -- env CHORUS_ALGO_DIR="$tmp/algos" \
  "$chorus" perf allreduce --ranks 8 -b 64K -e 64K -n 1 -w 0 --check
check selection-builtin 0 'built-in ring_allreduce' -- env MSCCL_XML_FILES="$msccl/ap4ll.xml" CHORUS_DEBUG=INFO \
  "$chorus" perf allreduce --ranks 8 -b 4M -e 4M -n 1 -w 0 --check

# launch: N local processes with the rank variables, output prefixed, failure propagated.
check launch-env 0 '^\[2\] rank=2 of 3 root=127\.0\.0\.1:[0-9]+$' -- "$chorus" launch -n 3 -- \
  sh -c 'echo rank=$CHORUS_RANK of $CHORUS_WORLD_SIZE root=$CHORUS_ROOT'
check launch-fail 3 'rank 1 exited with 3; stopping the others' -- "$chorus" launch -n 3 -- \
  sh -c 'if [ $CHORUS_RANK = 1 ]; then exit 3; fi; sleep 60'
check launch-missing 127 "cannot run '/nonexistent/prog'" -- "$chorus" launch -n 2 -- /nonexistent/prog
check launch-usage 2 '' -- "$chorus" launch -n 2
# --bind: core puts each local rank on one CPU of the launcher's set, none
# leaves the set as it is; a bad value is refused (flag or CHORUS_BIND).
cpus=$(awk '/^Cpus_allowed_list/ { print $2 }' /proc/self/status)
check launch-bind-core 0 '^\[1\] Cpus_allowed_list:[[:space:]]+[0-9]+$' -- "$chorus" launch -n 2 \
  --bind core -- grep Cpus_allowed_list /proc/self/status
check launch-bind-none 0 "^\\[1\\] Cpus_allowed_list:[[:space:]]+$cpus\$" -- "$chorus" launch -n 2 \
  --bind none -- grep Cpus_allowed_list /proc/self/status
check launch-bind-bad 2 'bind' -- env CHORUS_BIND=sometimes "$chorus" perf allreduce --procs 2 \
  -b 4K -e 4K -n 1 -w 0
check perf-procs 0 '^\[0\] # chorus perf allreduce: 3 ranks \(processes: shared memory within a host, TCP across hosts\)' -- "$chorus" perf allreduce \
  --procs 3 -b 4K -e 64K -f 4 -n 2 -w 1 --check
check launch-perf 0 'Out of bounds values : 0 OK' -- "$chorus" launch -n 2 -- "$chorus" perf reducescatter \
  -b 4K -e 1M -f 16 -n 2 -w 1 --check
# --percentiles: each form's median and 99th percentile per call, last.
check perf-percentiles 0 '^\[0\] allreduce,2,4096,.*,[0-9.]+,[0-9.]+,[0-9.]+,[0-9.]+$' -- \
  "$chorus" perf allreduce --procs 2 -b 4K -e 4K -n 100 -w 1 --csv --percentiles
check perf-percentiles-device 2 'no --percentiles' -- "$chorus" perf allreduce --device engine \
  --ranks 2 -b 4K -e 4K -n 2 --percentiles

# gen: programs with their own options; custom collectives carry their postconditions.
check gen-alltonext 0 'warning\[W507\]' -- "$chorus" gen alltonext_backward --ranks 6 \
  --gpus-per-node 3 --instances 2 -o "$tmp/a2n.xml" --spec "$tmp/a2n.json"
check gen-alltonext-run 0 'check +0 wrong element' -- "$chorus" run "$tmp/a2n.xml" \
  --spec "$tmp/a2n.json" --check -n 1 -w 0
check gen-alltonext-verify 0 '^ok ' -- "$chorus" verify --spec "$tmp/a2n.json" "$tmp/a2n.xml"
check run-custom-needs-spec 2 "no closed-form check for collective 'alltonext' \(give its --spec\)" \
  -- "$chorus" run "$tmp/a2n.xml" --check
check gen-unread-option 2 'it does not read --channels \(it reads --gpus-per-node\)' \
  -- "$chorus" gen hierarchical_allreduce --ranks 8 --channels 2 -o "$tmp/h.xml"
check gen-spec-known 2 '--spec is for custom collectives' \
  -- "$chorus" gen ring_allreduce --ranks 4 -o "$tmp/r.xml" --spec "$tmp/r.json"
check gen-root 0 '' -- "$chorus" gen ring_broadcast --ranks 5 --root 3 --chunk-factor 4 \
  --channels 2 -o "$tmp/b.xml"
check gen-root-run 0 'check +0 wrong element' -- "$chorus" run "$tmp/b.xml" --check -n 1 -w 0
check gen-root-verify 0 'root 3' -- "$chorus" verify "$tmp/b.xml"
check gen-root-bad 2 '--root 5 is not a rank of 5' \
  -- "$chorus" gen ring_broadcast --ranks 5 --root 5 -o "$tmp/b.xml"

# Per-rank lowering and compact program files (docs/scale.md).
check gen-rank 0 'rank 5 of 16384: 1 threadblocks, 32767 steps, built in [0-9.]+ ms \(its per-rank form\)' \
  -- "$chorus" gen ring_allreduce --ranks 16384 --rank 5
check gen-rank-out 0 '<gpu id="2" i_chunks="6"' -- "$chorus" gen ring_allreduce --ranks 6 --rank 2 -o -
check gen-rank-bad 2 'rank 6 is not a rank of 6' -- "$chorus" gen ring_allreduce --ranks 6 --rank 6
check compact-gen 0 '' -- "$chorus" gen hierarchical_allreduce --ranks 12 --gpus-per-node 4 \
  --instances 2 --compact -o "$tmp/h12.compact.xml"
check compact-is-small 0 '^<program name="hierarchical_allreduce" ranks="12" instances="2" gpus-per-node="4"/>$' \
  -- cat "$tmp/h12.compact.xml"
check compact-verify 0 '^ok +[^ ]+h12.compact.xml +allreduce +12 ranks' -- "$chorus" verify "$tmp/h12.compact.xml"
check compact-run 0 'check +0 wrong element' -- "$chorus" run "$tmp/h12.compact.xml" --check -n 1 -w 0
check compact-expand 0 '' -- "$chorus" convert "$tmp/h12.compact.xml" -o "$tmp/h12.expanded.xml"
check compact-gen-xml 0 '' -- "$chorus" gen hierarchical_allreduce --ranks 12 --gpus-per-node 4 \
  --instances 2 -o "$tmp/h12.gen.xml"
if cmp -s "$tmp/h12.expanded.xml" "$tmp/h12.gen.xml"; then passes=$((passes + 1)); else
  echo "FAIL compact-expands-to-gen: the expanded compact file differs from chorus gen's XML"
  fails=$((fails + 1)); fi
printf '<program name="ring_allreduce"\n  ranks="4" colour="blue"/>\n' > "$tmp/bad-attr.xml"
check compact-bad-attr 2 "bad-attr.xml:2:13: error\[E[0-9]+\]: <program> has no attribute 'colour'" \
  -- "$chorus" verify "$tmp/bad-attr.xml"
echo '<program name="nope" ranks="4"/>' > "$tmp/nope.xml"
check compact-unknown 2 "nope.xml:1:10: error\[E[0-9]+\]: no program named 'nope'" -- "$chorus" verify "$tmp/nope.xml"
echo '<program name="recursive_doubling_allgather" ranks="6"/>' > "$tmp/rd6.xml"
check compact-bad-ranks 2 "rd6.xml:1:1: error\[E[0-9]+\]: program 'recursive_doubling_allgather': --ranks 6 does not suit it" \
  -- "$chorus" verify "$tmp/rd6.xml"
echo '<program name="ring_allreduce" ranks="x4"/>' > "$tmp/nan.xml"
check compact-bad-number 2 'nan.xml:1:32: error\[E[0-9]+\]: ranks="x4" is not a whole number' \
  -- "$chorus" verify "$tmp/nan.xml"
echo '<program name="ring_allreduce" ranks="65536"/>' > "$tmp/huge.xml"
check compact-too-big 2 'huge.xml:1:32: error\[E[0-9]+\]: ranks="65536": a program file expands whole up to 4096 ranks' \
  -- "$chorus" verify "$tmp/huge.xml"
echo '<program name="ring_allreduce" ranks="4096" instances="1024"/>' > "$tmp/bomb.xml"
check compact-bounded 2 'bomb.xml:1:1: error\[E[0-9]+\]: .*expands to 17179869184 chunks' \
  -- "$chorus" verify "$tmp/bomb.xml"
echo '<program name="ring_allreduce" ranks="4096" chunk-factor="1048576"/>' > "$tmp/bomb2.xml"
check compact-factor-bounded 2 'chunk-factor 1048576 times the program.s 4096 is not in' \
  -- "$chorus" verify "$tmp/bomb2.xml"
echo '<program name="ring_allreduce" ranks="4"/><algo/>' > "$tmp/two.xml"
check compact-one-element 2 'two.xml:1:43: error\[E[0-9]+\]: more than one top-level element' \
  -- "$chorus" verify "$tmp/two.xml"
check gen-compact-too-big 2 'a compact file is read whole, up to 4096 ranks' \
  -- "$chorus" gen ring_allreduce --ranks 8192 --compact -o "$tmp/big.xml"
mkdir -p "$tmp/compact-dir"
echo '<program name="allpairs_allgather" ranks="3" maxBytes="65536"/>' > "$tmp/compact-dir/ag3.xml"
check compact-algo-dir 0 'ag3.xml: chosen' -- env CHORUS_ALGO_DIR="$tmp/compact-dir" CHORUS_DEBUG=INFO \
  "$chorus" perf allgather --ranks 3 -b 3K -e 3K -n 1 -w 0 --check
# MSCCL++ plans: run (threads, processes), served from the algorithm
# directory, written as MSCCL XML; a plan that does not prove is not run.
plans="$src/tests/data/plans"
check plan-run 0 '^check +0 wrong element' -- "$chorus" run "$plans/allreduce_2_simple.json" --check \
  -b 64K -n 2 -w 1
check plan-run-procs 0 'Out of bounds values : 0 OK' -- "$chorus" run "$plans/allgather_2_ll.json" \
  --procs 2 --check -b 64K -n 2 -w 1
mkdir -p "$tmp/plan-dir"
cp "$plans/allgather_2_ll.json" "$tmp/plan-dir/"
check plan-algo-dir 0 'allgather_2_ll.json: chosen' -- env CHORUS_ALGO_DIR="$tmp/plan-dir" \
  CHORUS_DEBUG=INFO "$chorus" perf allgather --ranks 2 -b 4K -e 4K -n 1 -w 0 --check
check plan-as-xml 0 '^<algo name="allreduce_2_simple" proto="Simple"' -- "$chorus" convert \
  "$plans/allreduce_2_simple.json" --to xml -o -
sed '0,/"name": "wait"/s//"name": "nop"/' "$plans/allreduce_2_simple.json" > "$tmp/racy_plan.json"
check plan-racy-not-run 2 'error\[E705\]' -- "$chorus" run "$tmp/racy_plan.json" --check
}

# Part 2: topologies, simulation, synthesis.
part2() {
# topologies and the simulator
check topo-list 0 '^ndv4\[:BOXES\] +Azure NDv4' -- "$chorus" topo list
check topo-show 0 'topology dgx1@0,1,4,5: 4 ranks' -- "$chorus" topo show dgx1@0,1,4,5
check topo-dot 0 '"gpu0" -> "nvswitch0" \[label="300"\]' -- "$chorus" topo show ndv4 --dot
check topo-json 0 '"kind": "infiniband"' -- "$chorus" topo show ndv4:2 --json
"$chorus" topo show ring:4 --json > "$tmp/ring4.json"
check topo-json-load 0 'topology ring:4: 4 ranks' -- "$chorus" topo show "$tmp/ring4.json"
check topo-bad 2 "unknown topology 'nosuch'" -- "$chorus" topo show nosuch
check sim-curve 0 '^ +1 GiB +[0-9.]+ +[0-9.]+ +[0-9.]+$' -- "$chorus" sim "$msccl/r48ll.xml" \
  --topo ndv4 -b 1K -e 1G -f 1024
# (the trace of the largest size: 1 GiB's would be 65 MB and take 13 s)
check sim-trace-written 0 'trace of 1 MiB written' -- "$chorus" sim "$msccl/r48ll.xml" \
  --topo ndv4 -b 1K -e 1M -f 1024 --trace "$tmp/trace.json"
check sim-trace 0 '"traceEvents"' -- head -c 200 "$tmp/trace.json"
check sim-compare 0 'best' -- "$chorus" sim compare "$msccl/r48ll.xml" "$msccl/ap4ll.xml" --topo ndv4 \
  -b 1K -e 1M -f 32
check sim-json 0 '"busbw"' -- "$chorus" sim "$msccl/ap4ll.xml" --topo ndv4 --bytes 1M --json
check plan-sim 0 '"busbw"' -- "$chorus" sim "$src/tests/data/plans/allgather_2_ll.json" --topo ndv4 \
  --bytes 1M --json
check sim-timeline 0 '^#   gpu[0-9] -> nvswitch0 +( +[0-9]+){4}$' \
  -- "$chorus" sim "$msccl/r48ll128.xml" --topo ndv4 --bytes 64M --timeline 4
check sim-timeline-links 0 '^#   nvswitch0 -> gpu3 +( +[0-9]+){4}$' \
  -- "$chorus" sim "$msccl/r48ll128.xml" --topo ndv4 --bytes 64M --timeline 4 --links gpu3
check sim-links-needs-timeline 2 '--links requires --timeline' \
  -- "$chorus" sim "$msccl/r48ll128.xml" --topo ndv4 --bytes 64M --links gpu3
check sim-parts 0 '^ +64 MiB ' -- "$chorus" sim "$msccl/ag-32m-1g.xml" --topo ndv4 --bytes 64M --parts 4
check sim-timeline-bad 2 'not in range' \
  -- "$chorus" sim "$msccl/r48ll128.xml" --topo ndv4 --bytes 64M --timeline 0
check sim-too-few-ranks 2 "the algorithm has 8 ranks; topology 'ring:4' has 4" \
  -- "$chorus" sim "$msccl/r48ll.xml" --topo ring:4 --bytes 1M

# synthesis: bounds
check synth-bound 0 'algbw 346.667 GB/s \(exactly 1040/3\)' \
  -- "$chorus" synth allgather --topo dgx-a100x2 --bound-only
check synth-cut 0 'S = every node but \{gpu0\}' \
  -- "$chorus" synth allgather --topo dgx-a100x2 --bound-only
check synth-subset-json 0 '"algbw_exact": "100"' \
  -- "$chorus" synth allgather --topo dgx1 --ranks 0,1,4,5 --bound-only --json
check synth-broadcast 0 'algbw 50.000 GB/s' -- "$chorus" synth broadcast --topo ring:6 --root 3 \
  --bound-only
check synth-bad-collective 2 "unknown collective 'allgathr'" \
  -- "$chorus" synth allgathr --topo ring:4 --bound-only
check synth-unreachable 2 'cannot be reached' -- "$chorus" synth allgather --topo dgx1 --ranks 0,7 \
  --bound-only
check synth-trees 0 'simulated 1 GiB on dgx-a100: algbw' \
  -- "$chorus" synth allgather --topo dgx-a100 -o "$tmp/synth_ag.xml"
check synth-run 0 'check +0 wrong' -- "$chorus" run "$tmp/synth_ag.xml" --ranks 8 --check -b 1M
check synth-run-ranks 2 'the algorithm has 8 ranks' -- "$chorus" run "$tmp/synth_ag.xml" --ranks 4
check synth-broadcast-trees 0 '% of the optimum' \
  -- "$chorus" synth broadcast --topo ring:6 --root 3 -o "$tmp/synth_bc.xml"
check synth-max-pieces 0 'note +the exact packed forest: the optimum needs 13 pieces per shard \(more than 4\)' \
  -- "$chorus" synth allgather --topo dgx-a100x2 --max-pieces 4
check synth-budget 0 'note +.*the time budget was spent' \
  -- "$chorus" synth allgather --topo dgx1 --time-budget 0.000001
# never below the classic programs: each answer names the best one, keeps it
# when every synthesized lowering is slower, and says why it is below 90 %
check synth-classic 0 'the best classic program, [a-z_]+, [0-9.]+ GB/s \([0-9.]+x of it\)' \
  -- "$chorus" synth allgather --topo ring:4
check synth-classic-kept 0 'kept +the classic recursive_doubling_allgather' \
  -- "$chorus" synth allgather --topo mi250:2 --time-budget 0.000001 -o "$tmp/classic.xml"
check synth-classic-kept-run 0 'check +0 wrong' -- "$chorus" run "$tmp/classic.xml" --check -b 1M
check synth-shortfall 0 'below 90 +the shallow forest kept is a heuristic' \
  -- "$chorus" synth allgather --topo dgx1 --time-budget 0.000001
check synth-shortfall-json 0 '"classic_kept": false' \
  -- "$chorus" synth allgather --topo dgx1 --time-budget 0.000001 --json
check synth-candidates 0 'shallow 1 1 1: [0-9.]+ GB/s' \
  -- "$chorus" synth allgather --topo dgx1 --candidates
check synth-sizes 0 'sizes +[0-9]+ range\(s\) written' \
  -- "$chorus" synth allgather --topo dgx1 --sizes 1K:1M -o "$tmp/sizes"
check synth-sizes-bad 2 '--sizes takes FROM:TO' -- "$chorus" synth allgather --topo dgx1 --sizes 1M:1K -o "$tmp/x"
check synth-sizes-needs-dir 2 'give -o DIR' -- "$chorus" synth allgather --topo dgx1 --sizes 1K:1M
# the set as the runtime picks from it: a synthesized file at every size, each faster than the ring
check sim-set 0 '1 MiB .* [0-9.]+x +synth_allgather_1M_max.xml' \
  -- "$chorus" sim "$tmp/sizes" --topo dgx1 -b 1K -e 1M
check sim-set-every-size 0 '' -- bash -c \
  "out=\$('$chorus' sim '$tmp/sizes' --topo dgx1 -b 1K -e 4M) && ! grep -E 'built-in runs|  0\.[0-9]+x' <<<\"\$out\""
# (DGX-1's 6 pieces per shard: a count must be a multiple of 24 here, else the built-in runs)
check sizes-run 0 'synth_allgather_[0-9]+K_1M.xml: chosen' \
  -- env CHORUS_DEBUG=INFO CHORUS_ALGO_DIR="$tmp/sizes" "$chorus" perf allgather --ranks 8 -b 768K -e 768K -n 1 -w 0 --check
check synth-broadcast-run 0 'check +0 wrong' -- "$chorus" run "$tmp/synth_bc.xml" --check -b 1M
# small messages: the simulator picks the shallow forest on DGX-1 at 4 KiB
check synth-size-shallow 0 'trees +8 shallow' \
  -- "$chorus" synth allgather --topo dgx1 --size 4K -o "$tmp/synth_small.xml"
check synth-size-run 0 'check +0 wrong' -- "$chorus" run "$tmp/synth_small.xml" --check -b 4K
# Blink: a few trees per root, their exact rounded rate, verified and run
check synth-blink 0 'the rounded trees reach 160.000 GB/s' \
  -- "$chorus" synth allgather --topo dgx1 --method blink --trees 4 -o "$tmp/synth_blink.xml"
check synth-blink-run 0 'check +0 wrong' -- "$chorus" run "$tmp/synth_blink.xml" --check -b 1M
check synth-trees-needs-blink 2 '--trees needs --method blink' \
  -- "$chorus" synth allgather --topo dgx1 --trees 4
check synth-blink-rooted 2 'blink packs allgather-family trees' \
  -- "$chorus" synth broadcast --topo dgx1 --method blink
# alltoall: the multicommodity LP bound (GLPK); no trees to write
check synth-alltoall 0 'algbw 50.000 GB/s \(exactly 50\)' \
  -- "$chorus" synth alltoall --topo dgx-a100x2
check synth-alltoall-json 0 '"algbw_exact": "2400/7"' \
  -- "$chorus" synth alltoall --topo dgx-a100 --json
# alltoall schedules: the LP's flows as relayed paths, verified, faster than all-pairs on a torus
check synth-alltoall-schedule 0 'all-pairs \(direct_alltoall\) [0-9.]+ GB/s \((1\.[5-9]|[2-9]\.)[0-9]*x of it\)' \
  -- "$chorus" synth alltoall --topo torus:4 -o "$tmp/a2a.xml"
check synth-alltoall-run 0 'check +0 wrong' -- "$chorus" run "$tmp/a2a.xml" --check -b 1M
check synth-alltoall-inplace 2 'out-of-place calls only' -- "$chorus" synth alltoall --topo ring:4 --inplace
# shortened trees are lowered too; the kept file runs correctly
check synth-shortened 0 'trees +16 shortened' \
  -- "$chorus" synth allgather --topo ring:8 -o "$tmp/synth_ring8.xml"
check synth-shortened-run 0 'check +0 wrong' -- "$chorus" run "$tmp/synth_ring8.xml" --check -b 1M
# --json lists every tree (root, pieces, arcs) and the lowering kept
# headroom on the links between boxes (docs/synthesis.md): the issue's 2 % on two boxes
check synth-headroom 0 'on dgx-a100x2: algbw .* \(9[89]\.[0-9] % of the optimum\)' \
  -- "$chorus" synth allgather --topo dgx-a100x2 --headroom 25 -o "$tmp/synth_2box.xml"
check synth-headroom-trees 0 'trees +16, 25 % headroom on the links between boxes' \
  -- "$chorus" synth allgather --topo dgx-a100x2 --headroom 25 --size 64M
check synth-headroom-run 0 'check +0 wrong' -- "$chorus" run "$tmp/synth_2box.xml" --check -b 1M
check synth-headroom-json 0 '"headroom_percent": 25' \
  -- "$chorus" synth allgather --topo dgx-a100x2 --headroom 25 --size 64M --json
check synth-headroom-one-box 2 '--headroom needs links between boxes' \
  -- "$chorus" synth allgather --topo dgx-a100 --headroom 10
check synth-headroom-blink 2 '--headroom applies to the exact forest' \
  -- "$chorus" synth allgather --topo dgx-a100x2 --headroom 10 --method blink
check synth-headroom-range 2 'not in range' \
  -- "$chorus" synth allgather --topo dgx-a100x2 --headroom 95

check synth-json-forest 0 '"forest": \[' -- "$chorus" synth allgather --topo ring:4 --json
check synth-json-tree 0 '"edges": \[' -- "$chorus" synth allgather --topo ring:4 --json
check synth-json-lowering 0 '"pieces_per_connection": [12]' \
  -- "$chorus" synth allgather --topo ring:4 --json
check synth-json-chunks 0 '"chunks_per_piece": [12],' \
  -- "$chorus" synth allgather --topo ring:4 --json

}

# Part 3: the step engine, reports, CUDA without a GPU, synthesis for Chorus's runtimes.
part3() {
# for Chorus's runtimes: pipelined by slices of its own (sliceBytes), which
# the MSCCL executor ignores; it verifies and runs with checked data, and
# MSCCL's target warns that the pipeline is lost there
check synth-target-chorus 0 "target +Chorus's runtimes: slices of [0-9.]+ [KM]iB \(the MSCCL executor ignores sliceBytes\)" \
  -- bash -c 'set -o pipefail; "$0" synth allgather --topo "$1" --target chorus --time-budget 0 \
  -o "$2" | tee "$3"' "$chorus" "$src/tests/data/topo/asym6.json" "$tmp/synth_chorus.xml" \
  "$tmp/synth_chorus.txt"
# simulated as Chorus's runtimes move slices (whole), as chorus sim --parts 1 does
check synth-target-chorus-whole 0 "^simulated .*, each slice moved whole as Chorus's runtimes move it \(chorus sim --parts 1\)$" \
  -- cat "$tmp/synth_chorus.txt"
algbw=$(sed -nE 's/^simulated .* algbw ([0-9.]+) GB\/s.*/\1/p' "$tmp/synth_chorus.txt")
check synth-target-chorus-sim 0 "^ +1 GiB +[0-9.]+ +${algbw:-none} " -- "$chorus" sim "$tmp/synth_chorus.xml" \
  --topo "$src/tests/data/topo/asym6.json" --bytes 1G --parts 1
check synth-target-chorus-run 0 'check +0 wrong' -- "$chorus" run "$tmp/synth_chorus.xml" --check -b 1M -n 1 -w 0
check synth-target-chorus-msccl 0 'warning\[W508\]: sliceBytes=[0-9]+ is Chorus' -- "$chorus" verify --target msccl "$tmp/synth_chorus.xml"
check synth-target-bad 2 'target: nccl not in' -- "$chorus" synth allreduce --topo ring:4 --target nccl
# --device engine: the CUDA executor's code on host threads, through run and perf.
check run-engine 0 'check +0 wrong element' -- "$chorus" run "$msccl/ap4ll.xml" --device engine \
  --check -b 64K -n 1 -w 0
check run-engine-ll128-threads 0 'check +0 wrong element' -- "$chorus" run "$msccl/r48ll128.xml" \
  --device engine --host-threads 3 --slots 1 --check -b 64K -n 1 -w 0
check run-engine-memory 0 '^memory +[0-9.]+ GB/s read\+written by the steps' \
  -- "$chorus" run "$msccl/ag-1m.xml" --device engine -b 1M -n 1 -w 0
check perf-engine 0 'Out of bounds values : 0 OK' -- "$chorus" perf allreduce --device engine \
  --ranks 8 -b 8 -e 64K -f 8 -n 1 -w 1 --check
check run-engine-instances 0 'check +0 wrong element' -- "$chorus" run "$msccl/ap4ll.xml" \
  --device engine --instances 3 --host-threads 2 --check -b 256K -n 1 -w 0
check perf-engine-instances 0 'Out of bounds values : 0 OK' -- "$chorus" perf reducescatter \
  --device engine --instances 5 --ranks 8 -b 8 -e 1M -f 32 -n 1 -w 0 --check
# A team of 8 host threads per block: the data split among them as among a
# CUDA block's threads.
check run-engine-team 0 'check +0 wrong element' -- "$chorus" run "$msccl/r48ll128.xml" \
  --device engine --threads-per-block 8 --check -b 1M -n 1 -w 0
# bench/gpu_bench.sh on the host engine: a checked row with the algorithm
# that ran and the simulator's prediction beside it (python3 reads sim's JSON).
build=$(cd "$(dirname "$chorus")/../.." && pwd)
# Small calls of a built-in run on Simple's slots unless CHORUS_GPU_LL_BYTES says LL.
check gpu-bench-engine 0 '^allreduce,4,2048,[0-9.]+,[0-9.]+,[0-9.]+,0,recursive_doubling_allreduce/Simple,[0-9.]+,[0-9.]+,' \
  -- env DEVICE=engine COLLS=allreduce MIN=2K MAX=2K RANKS=4 ITERS=1 WARMUP=0 PYTHON=/usr/bin/python3 \
  bash "$src/bench/gpu_bench.sh" "$build"
check perf-engine-ll-on 0 'recursive_doubling_allreduce/LL' -- env CHORUS_GPU_LL_BYTES=65536 \
  "$chorus" perf allreduce --device engine --ranks 4 -b 2K -e 2K -n 1 -w 0 --check
check perf-engine-protocol 0 'ring_allreduce/LL128' -- "$chorus" perf allreduce --device engine \
  --ranks 4 -b 1M -e 1M -n 1 -w 0 --check --protocol LL128
check run-engine-protocol 0 'check +0 wrong element' -- "$chorus" run "$msccl/r48ll128.xml" \
  --device engine --protocol LL --threads-per-block 8 --check -b 64K -n 1 -w 0
check sim-protocol 0 'on LL slots' -- "$chorus" sim ring_allreduce --topo gpu:8 --bytes 64K \
  --protocol LL
check sim-instances 0 'each threadblock as 4 instances' -- "$chorus" sim ring_allreduce \
  --topo gpu:8 --bytes 4M --instances 4
check instances-range 2 'instances' -- "$chorus" run "$msccl/ap4ll.xml" --device engine \
  --instances 65
check perf-engine-file 0 'Out of bounds values : 0 OK' -- "$chorus" perf allgather --device engine \
  --ranks 8 --algo "$msccl/ag-1m.xml" -b 1M -e 1M -n 1 -w 0 --check
check perf-engine-sendrecv 2 'no sendrecv' -- "$chorus" perf sendrecv --device engine
check perf-engine-gather 2 'gather or scatter' -- "$chorus" perf gather --device engine
check perf-engine-scatter 2 'gather or scatter' -- "$chorus" perf scatter --device engine
check run-engine-procs 2 'excludes --device' -- "$chorus" run "$msccl/ap4ll.xml" --device engine \
  --procs 8
check run-bad-device 2 'not in' -- "$chorus" run "$msccl/ap4ll.xml" --device tpu
# chorus report (docs/report.md; the page itself: tests/report)
check report 0 'ag-1m.xml: correct \(allgather on 8 ranks, 448 steps; busbw [0-9.]+ GB/s at 1048576 bytes\)' -- "$chorus" report "$msccl/ag-1m.xml" --topo ndv4 -o "$tmp/r.html"
# Nothing fetched when it opens: no script or style by reference, no URL
# but the SVG namespace.
external=$(grep -oE '<script src|<link rel="stylesheet"|https?://[a-zA-Z0-9./_-]+' "$tmp/r.html" |
  grep -v '^http://www.w3.org/2000/svg$')
check report-self-contained 0 '' -- test -z "$external"
check report-wrong-still-written 0 'e301_swapped_offsets.xml: wrong \(alltoall on 4 ranks' \
  -- "$chorus" report "$src/tests/data/bad/e301_swapped_offsets.xml" -o "$tmp/w.html"
check report-nothing 2 'name an algorithm file or a --perf CSV' -- "$chorus" report
check report-bad-topo 2 "unknown topology|no-such" -- "$chorus" report "$msccl/ag-1m.xml" --topo no-such -o "$tmp/x.html"
printf 'collective,ranks,size_bytes,chorus_busbw\nallreduce,2,4096\n' >"$tmp/bad.csv"
check report-bad-csv 2 'bad.csv:2: 3 fields; the header has 4' -- "$chorus" report --perf "$tmp/bad.csv"
check report-missing-csv 2 'none.csv.* missing' -- "$chorus" report --perf "$tmp/none.csv"
check report-unwritable 2 'report' -- "$chorus" report "$msccl/ag-1m.xml" -o "$tmp/no/such/dir/r.html"
check synth-report 0 '^report +.*s.html' -- "$chorus" synth allgather --topo dgx1 --report "$tmp/s.html"
check synth-report-sizes 2 '--report draws one schedule' -- "$chorus" synth allgather --topo dgx1 \
  --sizes 1K:1M -o "$tmp/sz" --report "$tmp/s.html"
check synth-report-alltoall 0 '^report ' -- "$chorus" synth alltoall --topo ring:4 --report "$tmp/a.html"
# (part 3) a fat tree's allgather by Blink's packing: the simulator's routes
# through the spines load one link past what the forest's split arcs allot
# it, and that is said; the exact forest (and one with headroom) is split
# again along the routes, and a broadcast then reaches 90 % (its schedule
# names the routed trees)
check synth-shortfall-routes 0 'below 90 .*the simulator.s routes put [0-9]+ MiB on spine[0-9]+ -> leaf[0-9]+, [0-9.]+x what the forest.s rate allots it, which bounds this schedule to [0-9.]+ % of the optimum' \
  -- "$chorus" synth allgather --topo fattree:4 --method blink
check synth-routed-forest 0 '^trees +8 routed( shortened)? \(8 piece' \
  -- "$chorus" synth broadcast --topo fattree:4
check synth-routed-headroom 0 '^trees +24 routed( shortened)?, 10 % headroom' \
  -- "$chorus" synth broadcast --topo fattree:4 --headroom 10
check synth-routed-share 0 '"share_of_optimum": 0\.9[0-9]*,' \
  -- "$chorus" synth broadcast --topo fattree:4 --json

# --device cuda on a machine without a GPU (or a build without CUDA): a
# clear error, exit 2. With a GPU the gpu-labelled tests and
# scripts/gpu_check.sh check it.
if ! nvidia-smi -L >/dev/null 2>&1; then
  check run-cuda-no-gpu 2 'no CUDA device|built without CUDA' -- "$chorus" run "$msccl/ap4ll.xml" \
    --device cuda --check
  check perf-cuda-no-gpu 2 'no CUDA device|built without CUDA' -- "$chorus" perf allreduce \
    --device cuda --ranks 8
fi

}

# Part 4: 2 x MI250's reduce-scatter at 1 GiB: the box's own sums follow
# those its NICs send (docs/synthesis.md, "Later local sums"), and the
# schedule kept runs with checked data. With no time budget, so that what is
# kept does not hang on the machine's speed: the variant is simulated last,
# and a debug build on a slow 2-core VM spends the default 30 s before it
# (CI, 2026-11-30). About 45 s in the debug build, hence a part of its own;
# the run checks 4 elements a chunk (96 KiB), as 2 MiB took 16 s of it.
part4() {
check synth-later-local-sums 0 'lowered .*the box.s own sums [0-9]+ round\(s\) later' \
  -- "$chorus" synth reducescatter --topo mi250:2 --time-budget 0 -o "$tmp/rail.xml"
check synth-later-local-sums-run 0 'check +0 wrong' -- "$chorus" run "$tmp/rail.xml" --check -b 96K -n 1 -w 0
}

# Part 5: MI250 boxes, the rail forest (96.8 % in the model); the
# lowering's loss, under a tenth alone, is still said with the forest's
# (the reduce-scatter at 256 MiB: at 1 GiB it is at 92.2 % since the box's
# own sums go later, part 4). With no time budget: what a budgeted search
# keeps depends on the machine's speed (on a slower one the rail forest's
# 32 chunks got their own sums later and 90.5 %, and no such line).
part5() {
check synth-rail 0 'below 90 +the lowering simulates at [0-9.]+ % of the forest.s rate \(the rail( shortened)? forest reaches 96.8 % of the optimum in the model\)' \
  -- "$chorus" synth reducescatter --topo mi250:2 --size 256M --time-budget 0
}

for p in "${parts[@]}"; do "part$p"; done
echo "$passes passed, $fails failed"
[[ $fails -eq 0 ]]
