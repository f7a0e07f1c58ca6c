#!/usr/bin/env bash
# `srun -n 4 chorus perf ...` without Slurm: four local processes given only
# the variables srun gives its tasks (SLURM_PROCID, SLURM_STEP_NUM_TASKS,
# SLURM_NTASKS, SLURM_LOCALID, SLURM_STEP_NODELIST, SLURM_JOB_ID,
# SLURM_STEP_ID; none of Chorus's, torchrun's or OpenMPI's) must find each
# other — rank 0 on the step's first host, at the job step's port — and run
# checked collectives. Usage: slurm_test.sh CHORUS
set -uo pipefail
chorus=$1
n=4
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# A job id of our own, so that runs side by side get different ports.
job=$(( ($$ * 7919 + RANDOM) % 1000000 + 1 ))
pids=()
for ((r = 0; r < n; ++r)); do
  env -u CHORUS_RANK -u CHORUS_WORLD_SIZE -u CHORUS_ROOT -u CHORUS_ROOT_FILE -u CHORUS_SECRET \
      -u RANK -u WORLD_SIZE -u MASTER_ADDR -u MASTER_PORT \
      -u OMPI_COMM_WORLD_RANK -u OMPI_COMM_WORLD_SIZE \
      SLURM_PROCID=$r SLURM_LOCALID=$r SLURM_NTASKS=$n SLURM_STEP_NUM_TASKS=$n \
      SLURM_STEP_NODELIST='localhost,node[2-4]' SLURM_JOB_ID=$job SLURM_STEP_ID=0 \
      CHORUS_TIMEOUT_S=30 \
      "$chorus" perf allreduce -b 1K -e 1M -f 32 -n 2 -w 1 --check > "$tmp/out.$r" 2>&1 &
  pids+=($!)
done
fails=0
for ((r = 0; r < n; ++r)); do
  if ! wait "${pids[$r]}"; then
    echo "FAIL: task $r exited with an error:"; cat "$tmp/out.$r"; fails=$((fails + 1))
  fi
done
cat "$tmp/out.0"
grep -q "$n ranks (processes" "$tmp/out.0" || { echo "FAIL: not $n processes"; fails=$((fails + 1)); }
grep -q "Out of bounds values : 0 OK" "$tmp/out.0" || { echo "FAIL: wrong data"; fails=$((fails + 1)); }
((fails == 0)) && echo "slurm: $n tasks ran checked collectives"
exit $((fails > 0))
