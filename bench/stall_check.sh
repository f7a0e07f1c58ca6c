#!/usr/bin/env bash
# Stalls of thread ranks: `chorus perf COLL --ranks N` from 4 KiB to 64 MiB
# (sizes doubling), both call forms, and every cell compared with the median
# of its neighbours (the sizes just below and above, same form). A cell more
# than 3x slower than that is a stall (a fixed delay, not work: work grows
# with size, so neighbours bound it). Prints one CSV row per cell and exits
# 1 if any cell stalls.
#   bench/stall_check.sh [BUILD]                     # build/release; 2 4 8 ranks
#   RANKS="4" COLLS="allreduce" RUNS=3 bench/stall_check.sh
# RUNS repeats the sweep; a cell stalls only if it does in every run (this
# machine's noise makes single slow cells; a stall repeats).
set -euo pipefail
build=${1:-build/release}
chorus=$build/tools/chorus/chorus
[[ -x $chorus ]] || { echo "build $chorus first (cmake --preset release)" >&2; exit 2; }
ranks=${RANKS:-"2 4 8"}
colls=${COLLS:-"allreduce allgather reducescatter alltoall broadcast"}
runs=${RUNS:-2}
stalls=0
echo "collective,ranks,form,size_bytes,time_us,neighbours_median_us,ratio,stall"
for n in $ranks; do
  for c in $colls; do
    tables=()
    for ((k = 0; k < runs; ++k)); do
      tables+=("$("$chorus" perf "$c" --ranks "$n" -b 4K -e 64M -f 2 -n 20 -w 3 --csv | grep "^$c,")")
    done
    # CSV: 3 size_bytes, 8 out-of-place us, 13 in-place us.
    out=$(for ((k = 0; k < runs; ++k)); do printf '%s\n' "${tables[$k]}" | sed "s/^/$k,/"; done |
      awk -F, -v c="$c" -v n="$n" -v runs="$runs" '
        { k = $1; i = cnt[k]++; size[i] = $4; t[k, 0, i] = $9; t[k, 1, i] = $14; rows = cnt[k] }
        function med2(a, b) { return (a + b) / 2 }
        END {
          split("out-of-place in-place", form, " ")
          for (f = 0; f < 2; ++f) for (i = 0; i < rows; ++i) {
            stalled = 1; worst = 0
            for (k = 0; k < runs; ++k) {
              x = t[k, f, i]
              if (x == "" || x == "-") { stalled = 0; continue }
              m = (i == 0) ? t[k, f, 1] : (i == rows - 1) ? t[k, f, i - 1] : med2(t[k, f, i - 1], t[k, f, i + 1])
              r = (m > 0) ? x / m : 0
              if (r > worst) { worst = r; wx = x; wm = m }
              if (r <= 3) stalled = 0
            }
            printf "%s,%s,%s,%s,%.1f,%.1f,%.2f,%s\n", c, n, form[f + 1], size[i], wx, wm, worst, stalled ? "STALL" : ""
          }
        }')
    echo "$out"
    if grep -q STALL <<<"$out"; then stalls=$((stalls + 1)); fi
  done
done
exit $(( stalls > 0 ))
