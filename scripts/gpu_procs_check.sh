#!/usr/bin/env bash
# Issue 41's GPU checks: ranks in separate processes on GPU 0, their
# collectives on their own kernels over CUDA IPC (docs/nccl.md, "Processes on
# one GPU"). Logs every step into OUT:
#   procs-ipc-N        tests/mp/uniqueid_probe: N processes on device 0, every
#                      collective checked, split, shrink, send/recv; the log
#                      must say the collectives ran on their own kernels
#   procs-staged-3     the same with CHORUS_GPU_IPC=0 (every call staged)
#   procs-kill-3       a process SIGKILLed mid-allreduce: the others fail
#                      naming it; nothing left in /dev/shm
#   mps                whether an MPS daemon is up (processes sharing a GPU
#                      time-slice without it)
#   cupy-procs-N, cupy-threads-4   tests/nccl/cupy_check.py on libchorus-nccl
#   torch-check-N      tests/nccl/torch_check.py (collectives, graph, DDP)
#   torch-bench-N      bench/torch_bench.py --device cuda: Chorus (the
#                      preloaded library) against gloo on the same CUDA
#                      tensors, 4 KiB - 256 MiB
#   torch-bench-staged-2  the same through host memory (CHORUS_GPU_IPC=0)
#   ceiling-N          chorus perf --device cuda --ranks N: one process's
#                      world, the ceiling the processes are held to
# Usage: scripts/gpu_procs_check.sh [OUT] [BUILD]   (BUILD: a release build
# with CUDA, e.g. build/gpu from scripts/gpu_check.sh; made here when absent).
# Exit 1 if any check fails.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:-gpu-procs-check}
build=${2:-build/gpu}
mkdir -p "$out"
failed=0
step() {  # step NAME COMMAND...: runs it, logs it, remembers a failure
  local name=$1
  shift
  echo "== $name: $*" | tee -a "$out/summary.txt"
  local run=(timeout 600)
  declare -F "$1" >/dev/null && run=()  # a function of this script (its commands time out)
  if "${run[@]}" "$@" >"$out/$name.log" 2>&1; then
    echo "   ok" | tee -a "$out/summary.txt"
  else
    echo "   FAILED (exit $?; $out/$name.log)" | tee -a "$out/summary.txt"
    tail -20 "$out/$name.log"
    failed=1
  fi
}
if [ ! -x "$build/tests/uniqueid_probe" ]; then
  nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
  step configure cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCHORUS_BUILD_BENCH=OFF -DCMAKE_CUDA_COMPILER="$nvcc" -DCMAKE_CUDA_ARCHITECTURES=native
  step build cmake --build "$build" -j "$(nproc)" --target chorus uniqueid_probe chorus_nccl
fi
B=$build/tools/chorus/chorus
NL=$PWD/$build/src/nccl
probe=$build/tests/uniqueid_probe
# The probe's log must show the path it took, and its verdict.
procs() {  # procs N WANT [ENV...]
  local n=$1 want=$2
  shift 2
  env "$@" PROBE_DEVICE=0 CHORUS_DEBUG=INFO CHORUS_TIMEOUT_S=60 timeout 300 "$probe" "$n" 1 \
    >"$out/probe.tmp" 2>&1
  local rc=$?
  cat "$out/probe.tmp"
  grep -q "0 of $n ranks failed" "$out/probe.tmp" && grep -qE "$want" "$out/probe.tmp" && [ $rc -eq 0 ]
}
for n in 2 4 8; do
  step "procs-ipc-$n" procs "$n" "collectives run on its own kernels"
done
step procs-staged-3 procs 3 "calls staged through host memory" CHORUS_GPU_IPC=0
left_behind() { [ "$(ls /dev/shm | grep -c chorus-)" -le "$1" ]; }
before=$(ls /dev/shm | grep -c chorus- || true)
step procs-kill-3 procs 3 "rank 0: call [0-9]+ failed after [0-9.]+ s: .*rank 2" PROBE_END=kill
step procs-kill-3-no-segments left_behind "$before"
{ pgrep -a nvidia-cuda-mps || echo "no MPS daemon: processes on one GPU time-slice"; } >"$out/mps.log" 2>&1
if python3 -c "import cupy" 2>/dev/null; then
  for n in 2 4; do
    step "cupy-procs-$n" env LD_PRELOAD="$NL/libchorus-nccl.so" python3 tests/nccl/cupy_check.py --procs "$n"
  done
  step cupy-threads-4 env LD_PRELOAD="$NL/libchorus-nccl.so" python3 tests/nccl/cupy_check.py --threads 4
else
  echo "== no CuPy: its checks not run" | tee -a "$out/summary.txt"
fi
if python3 -c "import torch; assert torch.cuda.is_available()" 2>/dev/null; then
  for n in 2 4 8; do
    step "torch-check-$n" env LD_PRELOAD="$NL/libchorus-nccl.so" python3 tests/nccl/torch_check.py --procs "$n"
  done
  for n in 2 8; do
    step "torch-bench-$n" env LD_PRELOAD="$NL/libchorus-nccl.so" python3 tests/python/torchrun_env.py \
      --nproc "$n" --timeout 580 bench/torch_bench.py --device cuda --min 4K --max 256M --factor 4 --rounds 3
    step "ceiling-$n" "$B" perf allreduce --device cuda --ranks "$n" -b 4K -e 256M -f 4 --check
  done
  step torch-bench-staged-2 env CHORUS_GPU_IPC=0 LD_PRELOAD="$NL/libchorus-nccl.so" \
    python3 tests/python/torchrun_env.py --nproc 2 --timeout 580 bench/torch_bench.py --device cuda \
    --min 4K --max 64M --factor 16 --rounds 2 --ops all_reduce
else
  echo "== no CUDA PyTorch: its checks not run" | tee -a "$out/summary.txt"
fi
rm -f "$out/probe.tmp"
exit $failed
