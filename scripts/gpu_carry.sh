#!/usr/bin/env bash
# For a GPU machine lent for minutes (the device tool), where building costs
# device time: builds here what scripts/gpu_check.sh runs (release, CUDA for
# one architecture) and gathers it into .devdeps/gpu, laid out as a build
# tree, with the Debian libraries the binaries load (.devdeps/gpu/lib) and the
# production algorithms (.devdeps/shared). Then, carrying [".devdeps"]:
#   CHORUS_GPU_BUILD=.devdeps/gpu CHORUS_GPU_BUDGET_S=400 scripts/gpu_check.sh "$OUT"
# The tests name the source and algorithm folders they were built in
# (.devdeps/gpu/paths); gpu_check.sh links them there when they are missing.
# Usage: scripts/gpu_carry.sh [CUDA_ARCHITECTURE]   (default 90: H100, H200)
set -euo pipefail
cd "$(dirname "$0")/.."
arch=${1:-90}
shared=$(cd ../shared && pwd)
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
cmake -S . -B build/gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCHORUS_WERROR=ON \
  -DCHORUS_BUILD_BENCH=OFF -DCMAKE_CUDA_COMPILER="$nvcc" -DCMAKE_CUDA_ARCHITECTURES="$arch" \
  -DCHORUS_SHARED_DIR="$shared" >/dev/null
cmake --build build/gpu --target chorus cuda_test nccl_check example_allreduce_primitives \
  chorus_nccl uniqueid_probe
d=.devdeps/gpu
rm -rf "$d" .devdeps/shared
mkdir -p "$d/tools/chorus" "$d/tests" "$d/examples" "$d/src/nccl" "$d/lib" .devdeps/shared
grep -qxF "/.devdeps/" .gitignore .git/info/exclude 2>/dev/null ||
  echo "/.devdeps/" >>.git/info/exclude
bins=(tools/chorus/chorus tests/cuda_test tests/nccl_check tests/uniqueid_probe
      examples/example_allreduce_primitives src/nccl/libchorus-nccl.so)
for b in "${bins[@]}"; do
  cp "build/gpu/$b" "$d/$b"
  strip "$d/$b"
done
ln -s libchorus-nccl.so "$d/src/nccl/libnccl.so.2"
# The libraries a bare CUDA image lacks: everything the binaries load but the
# C and C++ runtimes and the driver.
for b in "${bins[@]}"; do ldd "build/gpu/$b"; done | awk '$3 ~ /^\// {print $3}' | sort -u |
  grep -vE '/(libc|libm|libstdc\+\+|libgcc_s|libpthread|libdl|librt|libz|ld-linux[^/]*|libcuda|libnccl)\.so' |
  while read -r lib; do cp -L "$lib" "$d/lib/"; done
cp -r "$shared/msccl-algorithms" .devdeps/shared/
printf '%s\n%s\n' "$PWD" "$shared" >"$d/paths"
echo "gpu_carry: $(du -sh .devdeps | cut -f1) in .devdeps ($(ls "$d/lib" | tr '\n' ' '))"
