#!/usr/bin/env bash
# What `chorus synth` keeps, end to end: the optimum, the simulated algbw of
# the schedule it writes (at 1 GiB), the forest and lowering the simulator
# picked, and the seconds it took (packing, lowering, verifying and
# simulating every candidate), per topology and collective, each under a
# time limit. Needs python3 for the JSON.
#   bench/synth_schedules.sh [BUILD_DIR] [LIMIT_SECONDS] [CASES...]
# CHORUS_BIN=path runs another chorus binary (e.g. an older build, to compare).
# A case is TOPOLOGY:COLLECTIVE with the topology's own colons kept, e.g.
# dgx-a100:2:allgather.
set -u
build=${1:-build/release}
limit=${2:-600}
shift $(($# < 2 ? $# : 2))
cases=("$@")
if [[ ${#cases[@]} -eq 0 ]]; then
  cases=(dgx-a100:allgather dgx1:allgather ring:8:allgather
         dgx-a100:2:allgather dgx-a100:2:reducescatter dgx-a100:2:allreduce
         dgx-h100:2:allgather dgx-h100:2:reducescatter ndv2:2:allgather
         dgx-a100:4:allgather dgx-a100:4:reducescatter dgx-h100:4:allgather)
fi
echo "topology,collective,optimum_gbps,simulated_gbps,fraction,forest,headroom_percent,pieces,chunks_per_piece,instances,lowerings,seconds"
for c in "${cases[@]}"; do
  topo=${c%:*}
  coll=${c##*:}
  start=$(date +%s.%N)
  if ! out=$(timeout "$limit" "${CHORUS_BIN:-$build/tools/chorus/chorus}" synth "$coll" --topo "$topo" --json 2>&1); then
    echo "$topo,$coll,,,,,,,,,,>$limit or failed: $(head -c 80 <<<"$out" | tr ',\n' '; ')"
    continue
  fi
  end=$(date +%s.%N)
  python3 -c '
import json, sys
d = json.loads(sys.argv[1])
print(",".join(str(x) for x in [sys.argv[2], d["collective"], round(d["algbw"], 3),
      round(d["simulated_algbw"], 3), round(d["simulated_algbw"] / d["algbw"], 4), d["forest_kind"],
      d["headroom_percent"], d["pieces"], d["chunks_per_piece"], d["instances"],
      d["lowerings_tried"], round(float(sys.argv[4]) - float(sys.argv[3]), 1)]))' \
    "$out" "$topo" "$start" "$end"
done
