#!/usr/bin/env bash
# torch.distributed on the chorus backend vs gloo (bench/torch_bench.py) for
# 2, 4 and 8 processes, 4 KiB - 128 MiB float32, interleaved in one job per
# process count. Needs the release build's Python package and torch backend
# (scripts/torch_check.sh builds them) and Debian's python3-torch.
# Usage: bench/torch_compare.sh [PROCS ...]   (default: 2 4 8)
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH=$PWD/build/release/python
[[ -e build/release/python/chorus/_torch.cpython-*.so ]] 2>/dev/null ||
  ls build/release/python/chorus/_torch.*.so >/dev/null ||
  { echo "torch_compare: build the release torch backend first (scripts/torch_check.sh)" >&2; exit 2; }
echo "# $(date -u +%F) $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
for n in "${@:-2 4 8}"; do
  for p in $n; do
    /usr/bin/python3 tests/python/torchrun_env.py --nproc "$p" --timeout 1500 bench/torch_bench.py
  done
done
