#!/usr/bin/env bash
# What `chorus synth` keeps, end to end: the optimum, the simulated algbw of
# the schedule it writes (at 1 GiB), the forest and lowering the simulator
# picked, and the seconds it took (packing, lowering, verifying and
# simulating every candidate), per topology and collective, each under a
# time limit. Needs python3 for the JSON.
#   bench/synth_schedules.sh [BUILD_DIR] [LIMIT_SECONDS] [CASES...]
# CHORUS_BIN=path runs another chorus binary (e.g. an older build, to compare);
# SYNTH_FLAGS adds options to every command (e.g. "--time-budget 0", or
# "--target chorus": schedules for Chorus's runtimes, past MSCCL's 64 steps).
# A case is TOPOLOGY:COLLECTIVE with the topology's own colons kept, e.g.
# dgx-a100:2:allgather.
set -u
build=${1:-build/release}
limit=${2:-600}
shift $(($# < 2 ? $# : 2))
cases=("$@")
if [[ ${#cases[@]} -eq 0 ]]; then
  # Issue 43's table: DGX-1, DGX A100 x1/2/4/8, DGX H100 x4, NDv4 x2,
  # MI250 x2/x4, a 4x4 torus, a 64-rank fat tree and a custom machine with
  # asymmetric links (tests/data/topo/asym6.json), every collective.
  cases=()
  for t in dgx1 dgx-a100 dgx-a100:2 dgx-a100:4 dgx-a100:8 dgx-h100:4 ndv4:2 mi250:2 mi250:4 \
           torus:4 fattree:8 tests/data/topo/asym6.json; do
    for coll in allgather reducescatter allreduce broadcast reduce alltoall; do
      cases+=("$t:$coll")
    done
  done
fi
echo "topology,collective,optimum_gbps,simulated_gbps,fraction,forest,headroom_percent,pieces,chunks_per_piece,instances,lowerings,seconds,classic,classic_gbps,notes"
for c in "${cases[@]}"; do
  topo=${c%:*}
  coll=${c##*:}
  start=$(date +%s.%N)
  # shellcheck disable=SC2086  # SYNTH_FLAGS is a list of options
  out=$(timeout "$limit" "${CHORUS_BIN:-$build/tools/chorus/chorus}" synth "$coll" --topo "$topo" \
        --json ${SYNTH_FLAGS:-} 2>&1)
  rc=$?
  if [[ $rc -eq 124 ]]; then
    echo "$topo,$coll,,,,,,,,,,>$limit,,,"
    continue
  elif [[ $rc -ne 0 ]]; then
    echo "$topo,$coll,,,,,,,,,,,,,failed: $(head -c 120 <<<"$out" | tr ',\n' '; ')"
    continue
  fi
  end=$(date +%s.%N)
  python3 -c '
import json, sys
d = json.load(sys.stdin)
seconds = round(float(sys.argv[4]) - float(sys.argv[3]), 2)
if d["collective"] == "alltoall":
    # The LP paths: pieces per block; the peers in the notes.
    notes = "all-pairs %.3f GB/s" % d["allpairs_algbw"]
    if "twostep_algbw" in d:
        notes += "; two-step %.3f GB/s" % d["twostep_algbw"]
    row = [sys.argv[2], "alltoall", round(d["algbw"], 3), round(d["simulated_algbw"], 3),
           round(d["simulated_algbw"] / d["algbw"], 4), "lp-paths", 0, d["pieces_per_block"],
           "", "", "", seconds, "", "", notes]
else:
    row = [sys.argv[2], d["collective"], round(d["algbw"], 3), round(d["simulated_algbw"], 3),
           round(d["simulated_algbw"] / d["algbw"], 4), d["forest_kind"], d["headroom_percent"],
           d["pieces"], d["chunks_per_piece"], d["instances"], d["lowerings_tried"], seconds,
           d["classic"] + (" (kept)" if d["classic_kept"] else ""), round(d["classic_algbw"], 3),
           "; ".join(d.get("notes", []) +
                     (["the box\x27s own sums after the others over the whole call"
                       if d.get("whole_call") else
                       "the box\x27s own sums %d rounds later" % d["later_local_sums"]]
                      if d.get("later_local_sums") else []) +
                     (["the box\x27s own pieces on 1/%d of the connections"
                       % d["fewer_local_connections"]]
                      if d.get("fewer_local_connections") else []) +
                     (["the halves in turn" + (" over the whole call" if d.get("whole_call")
                                               else "")] if d.get("halves_in_turn") else []) +
                     (["slices of %d bytes" % d["slice_bytes"]] if d.get("slice_bytes") else []) +
                     (["for Chorus\x27s runtimes: %d steps per threadblock at most; %.1f MiB of XML"
                       % (d["most_steps_per_threadblock"], d["xml_bytes"] / 2**20)]
                      if d.get("target") == "chorus" else []) +
                     ["below 90 %: " + w for w in d.get("shortfall", [])])]
print(",".join(str(x).replace(",", ";") for x in row))' \
    "" "$topo" "$start" "$end" <<<"$out"
done
