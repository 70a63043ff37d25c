#!/usr/bin/env bash
# `make fuzz`: build the cargo-fuzz targets (fuzz/), then run each for FUZZ_SECS seconds, its
# corpus kept in fuzz/corpus/<target>/ from run to run and started from fuzz/seeds/<target>/.
# A crash (a panic: an invariant broken, or the code under test panicking), a hang past 10 s or
# an input over libFuzzer's memory limit is kept in fuzz/artifacts/<target>/ by libFuzzer; the
# run goes on to the other targets and fails at the end, naming each target that found one.
# Each target's whole output is in fuzz/logs/<target>.log; printed here: what it ran, what it
# found.
# libFuzzer's instrumentation takes nightly flags, which RUSTC_BOOTSTRAP=1 lets the stable
# toolchain take. No sanitizer: the targets run safe Rust, and ASan would double the time.
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
CARGO=${CARGO:-cargo}
FUZZ_SECS=${FUZZ_SECS:-60}
ALL="plan_check guest_values budget_section reference manifest signature challenge bodies decisions owner_record cache_entries"
FUZZ_TARGETS=${FUZZ_TARGETS:-$ALL}

command -v cargo-fuzz > /dev/null || "$CARGO" install cargo-fuzz --locked
export RUSTC_BOOTSTRAP=1
"$CARGO" fuzz build -s none

mkdir -p logs
found=""
for target in $FUZZ_TARGETS; do
  mkdir -p "corpus/$target" "artifacts/$target"
  before=$(ls "artifacts/$target" | wc -l)
  seeds=(); [ -d "seeds/$target" ] && seeds=("seeds/$target")
  status=0
  "$CARGO" fuzz run -s none "$target" "corpus/$target" "${seeds[@]}" -- \
    -max_total_time="$FUZZ_SECS" -timeout=10 -print_final_stats=1 > "logs/$target.log" 2>&1 || status=$?
  runs=$(awk '/^stat::number_of_executed_units/ { print $2 }' "logs/$target.log" | tail -1)
  corpus=$(ls "corpus/$target" | wc -l)
  after=$(ls "artifacts/$target" | wc -l)
  if [ "$status" -ne 0 ] || [ "$after" -gt "$before" ]; then
    found="$found $target"
    echo "fuzz $target: FOUND after ${runs:-?} runs (exit $status): fuzz/logs/$target.log, fuzz/artifacts/$target/"
    grep -m1 -A3 'panicked at' "logs/$target.log" || grep -m3 -E 'ERROR|SUMMARY|Test unit written' "logs/$target.log" || tail -5 "logs/$target.log"
  else
    echo "fuzz $target: ${runs:-?} runs in $FUZZ_SECS s, nothing found (corpus: $corpus inputs)"
  fi
done
if [ -n "$found" ]; then
  echo "make fuzz: found something in$found: each input becomes a regression test (host/tests/fuzzed_boundaries/main.rs, mod found)" >&2
  exit 1
fi
echo "make fuzz: nothing found in $(wc -w <<< "$FUZZ_TARGETS") targets, $FUZZ_SECS s each"
