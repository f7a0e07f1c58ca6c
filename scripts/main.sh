#!/usr/bin/env bash
# The main job: set up, build (release), verify the example algorithms in
# examples/algorithms and print the result table; summarize one of them; then
# run an allreduce on 4 thread ranks (CPU ranks in this one process) with a
# production-style algorithm file and with the built-in choice, printing the
# nccl-tests-style perf table with every result checked; an MSCCLang program
# run unchanged through the Python package, its XML proven.
# Usage: scripts/main.sh [extra algorithm files to verify ...]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cmake --preset release >/dev/null
cmake --build --preset release --target chorus
chorus=build/release/tools/chorus/chorus
echo
echo "== chorus verify examples/algorithms/*.xml $*"
"$chorus" verify examples/algorithms/*.xml "$@"
echo
echo "== chorus show examples/algorithms/ring_allreduce_4.xml"
"$chorus" show examples/algorithms/ring_allreduce_4.xml
echo
echo "== chorus perf allreduce --ranks 4 --algo examples/algorithms/ring_allreduce_4.xml -b 4K -e 64M -f 4 --check"
"$chorus" perf allreduce --ranks 4 --algo examples/algorithms/ring_allreduce_4.xml -b 4K -e 64M -f 4 --check
echo
echo "== chorus perf allreduce --ranks 4 -b 4K -e 64M --check   (built-ins chosen by size)"
"$chorus" perf allreduce --ranks 4 -b 4K -e 64M --check
echo
echo "== chorus report examples/algorithms/ring_allreduce_4.xml --topo dgx1 -o build/release/report.html"
"$chorus" report examples/algorithms/ring_allreduce_4.xml --topo dgx1 -o build/release/report.html
echo "   (open it in a browser: the flow, the proof, the timeline on DGX-1; docs/report.md)"
if cmake --build --preset release --target help | grep '^chorus_python:' >/dev/null; then
  # An MSCCLang program, unchanged, on Chorus's Python package (docs/python.md).
  cmake --build --preset release --target chorus_python
  echo
  echo "== PYTHONPATH=build/release/python /usr/bin/python3 tests/python/mscclang/allreduce_ring.py 8 4 1 --protocol LL > build/release/ring8.xml"
  PYTHONPATH=build/release/python /usr/bin/python3 tests/python/mscclang/allreduce_ring.py 8 4 1 \
    --protocol LL > build/release/ring8.xml
  "$chorus" verify build/release/ring8.xml
  "$chorus" run build/release/ring8.xml -b 1M --check
fi
if cmake --build --preset release --target help | grep '^chorus_nccl:' >/dev/null; then
  # The NCCL drop-in (docs/nccl.md): a C program written against nccl.h only,
  # on 4 host ranks through libchorus-nccl, every collective's data checked.
  cmake --build --preset release --target chorus_nccl nccl_check
  echo
  echo "== CHORUS_NCCL_HOST=1 LD_LIBRARY_PATH=build/release/src/nccl build/release/tests/nccl_check --host --ranks 4"
  CHORUS_NCCL_HOST=1 LD_LIBRARY_PATH=build/release/src/nccl build/release/tests/nccl_check --host --ranks 4
fi
