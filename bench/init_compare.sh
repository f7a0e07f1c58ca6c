#!/usr/bin/env bash
# How long joining takes, Chorus against OpenMPI, on this machine, in one
# run (docs/scale.md, section 5). For each process count, REPS times and
# interleaved (A B A B ...: this machine's speed drifts over minutes):
#   - Chorus: `chorus launch -n N -- chorus perf allreduce` (1 KiB, one
#     checked call), which prints the slowest rank's chorusCommInitFromEnv:
#     the bootstrap, every rank's fabric (shared-memory rings and
#     doorbells) and the communicator; once joining in the tree (chorus
#     launch's default) and once in the star (CHORUS_BOOTSTRAP=star);
#   - OpenMPI: `mpirun -np N bench/mpi_perf init`, the slowest rank's
#     MPI_Init over shared memory (btl self,vader);
#   - the bootstrap alone: tests/mp/bootstrap_probe's slowest rank (join,
#     one all-gather, a barrier), tree and star;
#   - and each whole run's wall time (launch, init, one call, exit).
# The median of each is kept. Prints CSV; mpi_over_chorus > 1: Chorus
# joins faster.
#   bench/init_compare.sh [BUILD]             # build/release; 2..64 processes
#   PROCS="2 8" REPS=5 bench/init_compare.sh
# Needs openmpi-bin + libopenmpi-dev (CMake builds bench/mpi_perf when it
# finds them); without them the MPI columns are empty.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
use_build "${1:-}"
probe=$build/tests/bootstrap_probe
procs=${PROCS:-"2 4 8 16 32 64"}
reps=${REPS:-3}
mpirun_with --mca btl self,vader

# Wall seconds of a command, its output on stdout.
timed() {
  local t0 t1 out
  t0=$(date +%s.%N)
  out=$("$@" 2>&1) || { echo "failed: $*" >&2; echo "$out" >&2; return 1; }
  t1=$(date +%s.%N)
  printf '%s\nwall %s\n' "$out" "$(echo "$t1 - $t0" | bc -l)"
}

# The slowest rank's bootstrap time in a bootstrap_probe run.
slowest() { grep -oE "\((tree|star), [0-9.]+ ms" | sed 's/.*, //; s/ ms//' | sort -g | tail -1; }

echo "processes,boot_tree_ms,boot_star_ms,chorus_init_ms,chorus_star_init_ms,mpi_init_ms,mpi_over_chorus,chorus_run_s,mpi_run_s"
for n in $procs; do
  bt=() bs=() ci=() si=() mi=() cw=() mw=()
  for ((r = 0; r < reps; ++r)); do
    bt+=("$("$chorus" launch -n "$n" -- "$probe" | slowest)")
    bs+=("$(CHORUS_BOOTSTRAP=star "$chorus" launch -n "$n" -- "$probe" | slowest)")
    out=$(timed "$chorus" launch -n "$n" -- "$chorus" perf allreduce -b 1K -e 1K -n 1 -w 0 --check)
    ci+=("$(sed -n 's/.*# init: \([0-9.]*\) ms.*/\1/p' <<<"$out")")
    cw+=("$(sed -n 's/^wall //p' <<<"$out")")
    out=$(CHORUS_BOOTSTRAP=star timed "$chorus" launch -n "$n" -- "$chorus" perf allreduce -b 1K \
      -e 1K -n 1 -w 0 --check)
    si+=("$(sed -n 's/.*# init: \([0-9.]*\) ms.*/\1/p' <<<"$out")")
    if [[ -x $mpi ]]; then
      out=$(timed "${mpirun[@]}" -np "$n" "$mpi" init)
      mi+=("$(sed -n 's/^init,[0-9]*,//p' <<<"$out")")
      mw+=("$(sed -n 's/^wall //p' <<<"$out")")
    fi
  done
  c=$(printf '%s\n' "${ci[@]}" | median)
  star=$(printf '%s\n' "${si[@]}" | median)
  boot=$(printf '%s\n' "${bt[@]}" | median)
  bootStar=$(printf '%s\n' "${bs[@]}" | median)
  m=$( ((${#mi[@]})) && printf '%s\n' "${mi[@]}" | median || echo "")
  ratio=$([[ -n $m && -n $c ]] && echo "scale=2; $m / $c" | bc -l || echo "")
  w1=$(printf '%s\n' "${cw[@]}" | median)
  w2=$( ((${#mw[@]})) && printf '%s\n' "${mw[@]}" | median || echo "")
  printf '%s,%s,%s,%s,%s,%s,%s,%.2f,%s\n' "$n" "$boot" "$bootStar" "$c" "$star" "$m" "$ratio" "$w1" \
    "${w2:+$(printf '%.2f' "$w2")}"
done
