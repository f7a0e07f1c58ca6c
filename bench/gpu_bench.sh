#!/usr/bin/env bash
# The CUDA executor on one GPU against the GPU's own limit (issue 40,
# docs/cuda.md "Benchmark"). For each collective, `chorus perf --device
# cuda` sweeps 8 B .. 1 GiB on RANKS ranks of one GPU, every result checked,
# and prints per row:
#   time_us, busbw_gbs   the out-of-place call (nccl-tests' busbw);
#   mem                  bytes the steps read and write per second over the
#                        copy bandwidth (cudaMemcpy device to device, read +
#                        written) that perf measured in the same run;
#   algorithm            what ran, "name/protocol" (parts joined by '+');
#   sim_us, sim_busbw    `chorus sim`'s prediction for that algorithm on the
#                        topology gpu:RANKS:COPY (N ranks sharing one GPU of
#                        the measured copy bandwidth; docs/simulator.md), with
#                        the same instances (INSTANCES, else 1 for the sim
#                        and the executor's own choice on the GPU) and each
#                        slice moved whole, as the executor moves it;
#   copy_gbs             the copy bandwidth.
# There is no peer on one GPU (NCCL takes one rank per GPU): `mem` is the
# fraction of the machine's limit, the figure issue 40's goals are set in.
#
#   bench/gpu_bench.sh [BUILD]                    # build/release
#   COLLS="allreduce" MIN=8 MAX=64M RANKS=2 bench/gpu_bench.sh
#   DEVICE=engine MAX=1M bench/gpu_bench.sh        # the same code on host threads
# Exit: 1 if any result was wrong or a call failed, 2 for a missing build.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=bench/common.sh
source "$here/common.sh"
use_build "${1:-}"

ranks=${RANKS:-8}
colls=${COLLS:-"allreduce allgather reducescatter alltoall broadcast"}
min=${MIN:-8}
max=${MAX:-1G}
factor=${FACTOR:-4}
iters=${ITERS:-20}
warm=${WARMUP:-5}
device=${DEVICE:-cuda}
python=${PYTHON:-python3}
perf_flags=()
# The executor moves a step's slice whole, one message a slot (chorus sim
# --parts 1; the simulator's default parts are MSCCL's executor's).
sim_flags=(--parts 1)
if [[ -n ${INSTANCES:-} ]]; then
  perf_flags+=(--instances "$INSTANCES")
  sim_flags+=(--instances "$INSTANCES")
fi

# "time_us busbw" of `chorus sim --json` on stdin.
sim_fields() {
  "$python" -c 'import json, sys
r = json.load(sys.stdin)[0]["results"][0]
print("%.1f %.2f" % (r["time"] * 1e6, r["busbw"]))'
}

status=0
echo "collective,ranks,size_bytes,time_us,busbw_gbs,mem,wrong,algorithm,sim_us,sim_busbw_gbs,copy_gbs"
for c in $colls; do
  out=$("$chorus" perf "$c" --device "$device" --ranks "$ranks" -b "$min" -e "$max" -f "$factor" \
    -n "$iters" -w "$warm" --check --csv "${perf_flags[@]}" 2>&1)
  rc=$?
  [[ $rc -ne 0 ]] && status=1
  # perf's CSV: collective,ranks,size_bytes,count,type,redop,root, then the
  # out-of-place time,algbw,busbw,mem,wrong, the in-place ones, memcpy_gbs,
  # algorithm (oop | ip where they differ).
  while IFS=, read -r coll n size _ _ _ _ ot _ ob om ow it _ ib im iw copy algo; do
    [[ $coll == "$c" ]] || continue
    time=$ot bus=$ob mem=$om wrong=$ow
    if [[ -z $ot ]]; then time=$it bus=$ib mem=$im wrong=$iw; fi
    [[ -n $wrong && $wrong != 0 ]] && status=1
    ran=${algo%% | *}
    sim_us="" sim_bus=""
    if [[ $ran != *+* && -n $ran ]]; then
      name=${ran%/*}
      if fields=$("$chorus" sim "$name" --topo "gpu:$n:$copy" --bytes "$size" --json \
        --protocol "${ran##*/}" "${sim_flags[@]}" 2>/dev/null | sim_fields 2>/dev/null); then
        read -r sim_us sim_bus <<<"$fields"
      fi
    fi
    echo "$coll,$n,$size,$time,$bus,$mem,$wrong,$algo,$sim_us,$sim_bus,$copy"
  done <<<"$out"
  if [[ $rc -ne 0 ]]; then
    echo "# chorus perf $c failed (exit $rc):" >&2
    grep -v "^$c," <<<"$out" | tail -5 >&2
  fi
done
exit $status
