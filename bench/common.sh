# Shell helpers the comparison scripts share (sourced: bench/init_compare.sh,
# bench/peer_compare.sh).

# The build to measure (BUILD, default build/release) and its programs:
# sets `build`, `chorus` and `mpi` (bench/mpi_perf, there when OpenMPI was
# found); exits 2 if chorus is not built.
use_build() {
  build=${1:-build/release}
  chorus=$build/tools/chorus/chorus
  mpi=$build/bench/mpi_perf
  [[ -x $chorus ]] || { echo "build $chorus first (cmake --preset release)" >&2; exit 2; }
}

# The median of the numbers on stdin, one per line ("" for none).
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print ""; else print v[int((NR + 1) / 2)] }'; }

# mpirun with the given arguments, oversubscribing this host's cores, and
# allowed to run as root (containers, CI): sets the array `mpirun`.
mpirun_with() {
  mpirun=(mpirun --oversubscribe "$@")
  [[ $(id -u) -eq 0 ]] && mpirun=("${mpirun[0]}" --allow-run-as-root "${mpirun[@]:1}")
  return 0
}
