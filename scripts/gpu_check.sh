#!/usr/bin/env bash
# The GPU checks of docs/cuda.md, on a machine with an NVIDIA GPU (nvcc, CMake
# and ninja installed; our Debian packages either installed or gathered into
# .devdeps by ../shared/tools/device-deps.sh, with ../shared/msccl-algorithms
# copied to .devdeps/shared/msccl-algorithms). Builds a release tree with
# CUDA, then runs and logs into OUT:
#   ctest -L gpu                      CUDA executor tests, primitives example
#   chorus run --device cuda --check  every production file (8 ranks, one GPU),
#                                     MSCCL++ plans (tests/data/plans, and every
#                                     production file written as a plan),
#                                     r48ll and ap4ll with every type and op,
#                                     every DSL program at 8 ranks, dgx1's
#                                     synthesized allreduce for MSCCL and for
#                                     Chorus's runtimes (--target chorus)
#   chorus perf --device cuda         allreduce 8 B .. 1 GiB checked, 8 ranks;
#                                     allgather / reducescatter / alltoall;
#                                     64 MiB allreduce at 1 instance and at
#                                     the GPU's choice; a ring at 7 instances
#                                     small calls: LL / warp defaults against
#                                     Simple slots, full blocks and LL128;
#                                     every production file on all 3 layouts
#   bench/gpu_bench.sh                the five collectives 8 B .. 1 GiB, checked,
#                                     with mem, the algorithm and sim's
#                                     prediction (CSV in gpu-bench.log)
#   compute-sanitizer                 memcheck, racecheck and synccheck on a
#                                     ring allreduce, ap4ll and r48ll128
#   NCCL drop-in (docs/nccl.md)       tests/nccl/nccl_check.c linked first
#                                     against the NCCL there (1 rank), then
#                                     on libchorus-nccl with 1, 2, 4 and 8
#                                     ranks on GPU 0 and a graph replay;
#   scripts/gpu_procs_check.sh        ranks in processes on GPU 0 (CUDA
#                                     IPC), CuPy, PyTorch's torch_check.py
#                                     and bench/torch_bench.py --device cuda
#                                     with libchorus-nccl preloaded
# Usage: scripts/gpu_check.sh [OUT] (default gpu-check). Exit 1 if any check fails.
#
# A device lent for minutes: build here and carry the binaries instead
# (scripts/gpu_carry.sh puts them and their libraries in .devdeps/gpu, laid
# out as a build tree), then on the GPU machine:
#   CHORUS_GPU_BUILD=.devdeps/gpu CHORUS_GPU_BUDGET_S=400 CHORUS_GPU_STEP_S=150 \
#     scripts/gpu_check.sh "$OUT"
# CHORUS_GPU_BUILD: a build tree to use as it is (no configure or build);
# CHORUS_GPU_BUDGET_S: steps that would start after that many seconds are
# listed as skipped; CHORUS_GPU_STEPS: a regular expression of the step
# names to run (the rest are not). The steps run most telling first: the executor's tests,
# the NCCL drop-in, the production files, then the measurements.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:-gpu-check}
mkdir -p "$out"
shared=../shared
if [ -d .devdeps ]; then
  mkdir -p .devdeps/root
  for f in .devdeps/*.deb; do [ -f "$f" ] && dpkg -x "$f" .devdeps/root; done
  export CMAKE_PREFIX_PATH=$PWD/.devdeps/root/usr
  export LD_LIBRARY_PATH=$PWD/.devdeps/root/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
  [ -d .devdeps/shared ] && shared=$PWD/.devdeps/shared
fi
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
build=${CHORUS_GPU_BUILD:-build/gpu}
budget=${CHORUS_GPU_BUDGET_S:-0}
step_s=${CHORUS_GPU_STEP_S:-600}
only=${CHORUS_GPU_STEPS:-.*}
start=$SECONDS
failed=0
step() {  # step NAME COMMAND...: runs it (CHORUS_GPU_STEP_S, 600 s at most), logs it, remembers a failure
  local name=$1
  shift
  [[ $name =~ ^(${only})$ ]] || return 0
  if [ "$budget" -gt 0 ] && [ $((SECONDS - start)) -ge "$budget" ]; then
    echo "== $name: skipped (the ${budget} s budget is spent)" | tee -a "$out/summary.txt"
    return
  fi
  echo "== $name: $*" | tee -a "$out/summary.txt"
  local run=(timeout "$step_s")
  declare -F "$1" >/dev/null && run=()  # a function of this script (its commands time out)
  local t0=$SECONDS
  if "${run[@]}" "$@" >"$out/$name.log" 2>&1; then
    echo "   ok ($((SECONDS - t0)) s)" | tee -a "$out/summary.txt"
  else
    echo "   FAILED (exit $?, $((SECONDS - t0)) s; $out/$name.log)" | tee -a "$out/summary.txt"
    tail -20 "$out/$name.log"
    failed=1
  fi
}
nvidia-smi >"$out/nvidia-smi.txt" 2>&1 || true
if [ -f "$build/paths" ]; then
  # A tree from scripts/gpu_carry.sh: its libraries after the machine's own,
  # and the folders its tests were built to read, linked where they are missing.
  export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$PWD/$build/lib
  { read -r built_src; read -r built_shared; } <"$build/paths"
  for link in "$built_src=$PWD" "$built_shared=$PWD/.devdeps/shared"; do
    [ -e "${link%%=*}" ] || { mkdir -p "$(dirname "${link%%=*}")" && ln -s "${link#*=}" "${link%%=*}"; } ||
      echo "gpu_check: cannot link ${link%%=*}; tests that read it will fail" | tee -a "$out/summary.txt"
  done
  shared=$PWD/.devdeps/shared
fi
if [ -z "${CHORUS_GPU_BUILD:-}" ]; then
  # NCCL 2.28's nccl.h, carried in .devdeps/nccl/include where the machine's is older.
  nccl_dir=()
  [ -f .devdeps/nccl/include/nccl.h ] && nccl_dir=(-DCHORUS_NCCL_INCLUDE_DIR="$PWD/.devdeps/nccl/include")
  step configure cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCHORUS_WERROR=ON \
    -DCHORUS_BUILD_BENCH=OFF -DCMAKE_CUDA_COMPILER="$nvcc" -DCHORUS_SHARED_DIR="$shared" "${nccl_dir[@]}"
  step build cmake --build "$build" -j "$(nproc)"
fi
# What `ctest -L gpu` runs, called directly so that a carried tree needs no CTest files.
# Ranks apart on its own step: it hung on an H200 (docs/cuda.md, "Second
# GPU run") and took the other tests' time with it.
step cuda-ranks-apart "$build/tests/cuda_test" --gtest_filter='Cuda.RanksApart*'
step cuda-tests "$build/tests/cuda_test" --gtest_filter='Cuda.*:-Cuda.RanksApart*' \
  --gtest_also_run_disabled_tests
for n in 2 4 8; do
  step "example-primitives-$n" "$build/examples/example_allreduce_primitives" "$n" 4099
done
B=$build/tools/chorus/chorus
NL=$PWD/$build/src/nccl
# The NCCL drop-in. nccl_check's libnccl.so.2 is whichever comes first on
# the library path: NCCL's (PyTorch's copy, or the CUDA toolkit's), then ours.
real=$(find "$(python3 -c 'import site; print(site.getsitepackages()[0])' 2>/dev/null || echo /nonexistent)" \
  /usr/local/cuda/lib64 -name 'libnccl.so.2' 2>/dev/null | grep -v "$NL" | head -1)
if [ -n "$real" ]; then
  step nccl-real-1 env LD_LIBRARY_PATH="$(dirname "$real"):${LD_LIBRARY_PATH:-}" \
    "$build"/tests/nccl_check --ranks 1
else
  echo "== no NCCL found beside PyTorch or CUDA: the reference run is left out" | tee -a "$out/summary.txt"
fi
for n in 1 2 4 8; do
  step "nccl-chorus-$n" env LD_LIBRARY_PATH="$NL:${LD_LIBRARY_PATH:-}" NCCL_DEBUG=INFO \
    "$build"/tests/nccl_check --ranks "$n" --graph
done
step nccl-chorus-group-8 env LD_LIBRARY_PATH="$NL:${LD_LIBRARY_PATH:-}" \
  "$build"/tests/nccl_check --ranks 8 --init group --graph --count 1048576
algos=$shared/msccl-algorithms/ndv4
run_all() {
  for f in "$algos"/*.xml; do "$B" run "$f" --device cuda --check -b 4M -n 5 -w 2 || return 1; done
}
step run-production run_all
# Synthesis for Chorus's runtimes (docs/synthesis.md, "For Chorus's
# runtimes"): dgx1's allreduce within MSCCL's 64 steps per threadblock and
# past them, each checked and timed on the GPU (is a step as cheap as the
# simulator says?).
synth_run() {  # synth_run TARGET
  timeout "$step_s" "$B" synth allreduce --topo dgx1 --target "$1" --time-budget 60 \
    -o "$out/synth-dgx1-$1.xml" || return 1
  timeout "$step_s" "$B" run "$out/synth-dgx1-$1.xml" --device cuda --check -b 256M -n 5 -w 2
}
for tg in msccl chorus; do step "run-synth-dgx1-$tg" synth_run "$tg"; done
step perf-allreduce "$B" perf allreduce --device cuda --ranks 8 -b 8 -e 1G --check
# Instances (docs/cuda.md): one block per threadblock against the GPU's
# choice, the same 64 MiB ring, and an odd count checked.
step perf-ring-1-instance "$B" perf allreduce --device cuda --ranks 8 -b 64M -e 64M --check \
  --instances 1
step perf-ring-auto-instances "$B" perf allreduce --device cuda --ranks 8 -b 64M -e 64M --check
"$B" gen ring_allreduce --ranks 8 -o "$out/ring8-instances.xml" >/dev/null
step run-instances-7 "$B" run "$out/ring8-instances.xml" --device cuda --instances 7 --check \
  -c 1000008
for c in allgather reducescatter alltoall; do
  step "perf-$c" "$B" perf "$c" --device cuda --ranks 8 -b 4K -e 256M -f 4 --check
done
step perf-allreduce-2-ranks "$B" perf allreduce --device cuda --ranks 2 -b 8 -e 64K -f 8 --check
# Small calls (docs/cuda.md "Small calls"): the thresholds to measure. The
# default (LL up to CHORUS_GPU_LL_BYTES, a warp per block up to 4 KiB
# messages) against Simple slots, and against full blocks of 256 threads.
for n in 2 8; do
  step "perf-small-$n-default" "$B" perf allreduce --device cuda --ranks "$n" -b 8 -e 1M -f 4 --check
  step "perf-small-$n-simple" env CHORUS_GPU_LL_BYTES=0 "$B" perf allreduce --device cuda \
    --ranks "$n" -b 8 -e 1M -f 4 --check
  step "perf-small-$n-blocks" "$B" perf allreduce --device cuda --ranks "$n" -b 8 -e 1M -f 4 \
    --check --threads-per-block 256
  step "perf-small-$n-ll128" "$B" perf allreduce --device cuda --ranks "$n" -b 8 -e 1M -f 4 \
    --check --protocol LL128
done
# Where a small call's time goes: the kernel's own duration (Nsight
# Compute), against the time per call perf reports in the same run.
if command -v ncu >/dev/null; then
  step profile-small ncu --metrics gpu__time_duration.sum --csv "$B" perf allreduce --device cuda \
    --ranks 8 -b 8 -e 32K -f 8 -n 3 -w 1
fi
# MSCCL++ plans (docs/mscclpp.md): the repository's, and every production
# file written as a plan, run through their proven two-sided form.
run_plans() {
  for f in tests/data/plans/*.json; do "$B" run "$f" --device cuda --check -b 1M -n 2 -w 1 || return 1; done
  for f in "$algos"/*.xml; do
    local plan="$out/plan-$(basename "$f" .xml).json"
    "$B" convert "$f" -o "$plan" --to mscclpp || return 1
    "$B" run "$plan" --device cuda --check -b 4M -n 2 -w 1 || return 1
  done
}
step run-plans run_plans
run_types() {
  for f in r48ll ap4ll; do
    for t in int8 uint8 int32 uint32 int64 uint64 fp16 bf16 fp32 fp64 fp8e4m3 fp8e5m2; do
      for o in sum prod max min avg; do
        "$B" run "$algos/$f.xml" --device cuda --dtype "$t" --op "$o" --check -b 1M -n 1 -w 0 \
          || return 1
      done
    done
  done
}
step run-types run_types
run_dsl() {
  for p in $("$B" gen --list | awk '/^[a-z_0-9]+ / && $2 != "" {print $1}'); do
    local spec=()
    case "$("$B" gen --list | awk -v p="$p" '$1 == p {print $2}')" in
      allreduce | allgather | reducescatter | alltoall | broadcast | reduce | gather | scatter) ;;
      *) spec=(--spec "$out/$p.json") ;;  # a custom collective: checked against its spec
    esac
    "$B" gen "$p" --ranks 8 -o "$out/$p.xml" "${spec[@]}" >/dev/null || continue  # not for 8 ranks
    "$B" run "$out/$p.xml" "${spec[@]}" --device cuda --check -b 1M -n 1 -w 0 || return 1
  done
}
step run-dsl run_dsl
# Every production file on every slot layout (the in-place LL / LL128 path).
run_layouts() {
  for f in "$algos"/*.xml; do
    for p in Simple LL LL128; do
      "$B" run "$f" --device cuda --protocol "$p" --check -b 1M -n 2 -w 1 || return 1
    done
  done
}
step run-layouts run_layouts
step gpu-bench bench/gpu_bench.sh "$build"
if command -v compute-sanitizer >/dev/null; then
  "$B" gen ring_allreduce --ranks 8 -o "$out/ring8.xml" >/dev/null
  for tool in memcheck racecheck synccheck; do
    step "sanitizer-$tool-ring" compute-sanitizer --tool "$tool" --error-exitcode 1 \
      "$B" run "$out/ring8.xml" --device cuda --check -b 64K -n 1 -w 0
    for f in ap4ll r48ll128; do
      step "sanitizer-$tool-$f" compute-sanitizer --tool "$tool" --error-exitcode 1 \
        "$B" run "$algos/$f.xml" --device cuda --check -b 64K -n 1 -w 0
    done
  done
else
  echo "== compute-sanitizer not found: sanitizer checks not run" | tee -a "$out/summary.txt"
fi
# Ranks in processes on GPU 0 over CUDA IPC, CuPy, PyTorch (torch_check.py
# and the side-by-side benchmark): scripts/gpu_procs_check.sh, on this build.
step procs scripts/gpu_procs_check.sh "$out/procs" "$build"
step perf-allreduce-cpu "$B" perf allreduce --ranks 8 -b 4K -e 64M --check
exit $failed
