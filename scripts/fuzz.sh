#!/usr/bin/env bash
# Coverage-guided fuzzing of what conductor reads from outside (fuzz/): runs each target for a
# bounded time, starting from the seeds in fuzz/seeds/<target> and the corpus kept from earlier
# runs, replays the inputs of every crash found so far (fuzz/regressions/<target>), and fails if a
# target crashes. Prints each target's executions, coverage and corpus size.
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]     (default: 20 s, every target)
#
# The machine has only a stable toolchain: cargo-fuzz's -Z flags (AddressSanitizer) are enabled
# with RUSTC_BOOTSTRAP=1. cargo-fuzz is installed (pinned) by scripts/tools.sh.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

seconds="${1:-20}"
shift || true
cache="${XDG_CACHE_HOME:-$HOME/.cache}/conductor"
eval "$(scripts/tools.sh cargo-fuzz)"
export RUSTC_BOOTSTRAP=1
export CARGO_TARGET_DIR="$cache/fuzz-target"

targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  mapfile -t targets < <(cargo fuzz list)
fi
cargo fuzz build -O >&2

status=0
for target in "${targets[@]}"; do
  corpus="$cache/fuzz-corpus/$target"
  mkdir -p "$corpus" "fuzz/seeds/$target"
  if [ -d "fuzz/regressions/$target" ] && [ -n "$(ls -A "fuzz/regressions/$target")" ]; then
    # Every input that once crashed a target must now pass.
    if ! cargo fuzz run -O "$target" "fuzz/regressions/$target" -- -runs=0 >"$cache/fuzz-$target-regressions.log" 2>&1; then
      echo "$target: a kept crash input fails again; see $cache/fuzz-$target-regressions.log" >&2
      status=1
    fi
  fi
  log="$cache/fuzz-$target.log"
  if cargo fuzz run -O "$target" "$corpus" "fuzz/seeds/$target" -- \
      -max_total_time="$seconds" -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 >"$log" 2>&1; then
    outcome="no crash"
  else
    outcome="CRASH (input kept under fuzz/artifacts/$target; see $log)"
    status=1
  fi
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*' || echo "?")
  features=$(grep -o 'ft: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*' || echo "?")
  units=$(find "$corpus" -type f | wc -l)
  printf '%-13s %ss: %s executions, coverage %s edges (%s features), corpus %s inputs: %s\n' \
    "$target" "$seconds" "$runs" "$cov" "$features" "$units" "$outcome"
done
exit $status
