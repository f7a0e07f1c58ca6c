#!/usr/bin/env bash
# Builds every libFuzzer target (the `fuzz` preset: clang 16, ASan + UBSan)
# and runs each for SECONDS on its seed corpus, two at a time. Fails if any
# target crashes, leaks, trips a sanitizer, breaks its property (round trip,
# verdict) or times out on one input; the input that did it is kept in
# build/fuzz/artifacts/ (turn it into a unit test, docs/testing.md).
# New inputs found go to build/fuzz/corpus/TARGET (kept between runs, so
# runs accumulate); the repository's seeds in tests/fuzz/corpus/ are only
# read.
# Usage: scripts/fuzz.sh [SECONDS | runs:N] [TARGET...]
#   default 60 s each, every target; runs:N runs each for N inputs instead
#   (the long runs docs/testing.md records: scripts/fuzz.sh runs:10000000).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
shift || true
all=(fuzz_verify fuzz_json fuzz_plan fuzz_topology fuzz_postcondition fuzz_wire fuzz_env fuzz_cli
     fuzz_report)
if (($# > 0)); then targets=("$@"); else targets=("${all[@]}"); fi

scripts/setup.sh clang-16 libclang-rt-16-dev
cmake --preset fuzz > /dev/null
cmake --build --preset fuzz

bin=build/fuzz/tests/fuzz
artifacts=build/fuzz/artifacts
mkdir -p "$artifacts"
shared=../shared/msccl-algorithms

# The seeds of one target: the repository's corpus, plus inputs the tests
# already keep (algorithm files, specs, topologies); only directories that
# exist (git keeps no empty one).
seeds() {
  local t=$1 d
  for d in "tests/fuzz/corpus/$t" $(case $t in
      fuzz_verify) echo tests/data tests/data/bad tests/data/custom tests/data/lang examples/algorithms ;;
      fuzz_postcondition) echo tests/data/custom ;;
      fuzz_plan) echo tests/data/plans ;;
    esac); do
    [[ -d $d ]] && echo "$d"
  done
}

run_one() {  # TARGET: runs it, prints one line, returns non-zero on a finding
  local t=$1 log=build/fuzz/$1.log
  mkdir -p "build/fuzz/corpus/$t"
  local maxlen=4096
  [[ $t == fuzz_verify || $t == fuzz_json || $t == fuzz_topology || $t == fuzz_plan ]] && maxlen=16384
  # shellcheck disable=SC2046
  local budget=(-max_total_time="$seconds")
  [[ $seconds == runs:* ]] && budget=(-runs="${seconds#runs:}")
  local start=$SECONDS
  if "$bin/$t" "${budget[@]}" -max_len="$maxlen" -timeout=20 -rss_limit_mb=2560 \
      -print_final_stats=1 -close_fd_mask=1 -artifact_prefix="$artifacts/$t-" \
      "build/fuzz/corpus/$t" $(seeds "$t") > "$log" 2>&1; then
    local runs
    runs=$(grep -o 'stat::number_of_executed_units: [0-9]*' "$log" | grep -o '[0-9]*$' || echo '?')
    printf '%-20s ok   %10s runs in %s s, corpus %s\n' "$t" "$runs" "$((SECONDS - start))" \
      "$(ls "build/fuzz/corpus/$t" | wc -l)"
  else
    printf '%-20s FAIL (log: %s)\n' "$t" "$log"
    # What the target said before it died (a broken property names itself
    # on the line before libFuzzer's report), then the input itself, so a
    # CI log alone reproduces it: base64 -d > crash; build/fuzz/.../TARGET crash
    grep -B3 -E '^==[0-9]+==.*ERROR' "$log" | grep -vE '^(INFO|#[0-9])' | head -8
    grep -E 'SUMMARY|runtime error|Test unit written' "$log" | head -10
    local unit
    unit=$(grep -o "Test unit written to [^ ]*" "$log" | head -1 | sed 's/.* //')
    if [[ -n $unit && -f $unit ]]; then
      echo "input ($(wc -c < "$unit") bytes, base64):"
      base64 -w 0 "$unit" | head -c 24000
      echo
    fi
    return 1
  fi
}
export -f run_one seeds
export bin artifacts seconds

echo "== fuzzing ${#targets[@]} targets ($seconds each), two at a time"
if printf '%s\n' "${targets[@]}" | xargs -P 2 -I{} bash -c 'run_one {}'; then
  echo "== fuzz: no findings"
else
  echo "== fuzz: FINDINGS (inputs in $artifacts)"
  exit 1
fi
