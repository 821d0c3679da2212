#!/usr/bin/env bash
# A CPU profile of a running process as a flame graph: perf samples the process (cpu-clock, the
# software clock: hardware counters are not available on every machine) with DWARF call stacks
# (the release build keeps line tables and no frame pointers), and inferno draws the SVG.
#
#   scripts/profile.sh PID SECONDS OUT.svg [TITLE]
#
# Prints the ten functions with the most samples of their own. A CPU bench calls it with
# PROFILE_SVG set (see BENCHMARKS.md); perf must be allowed to sample the process
# (kernel.perf_event_paranoid ≤ 2 for a process of the same user). With CONDUCTOR_WASM_PERFMAP=1
# in the profiled conductor's environment, WebAssembly plugins' functions have names: wasmtime
# writes /tmp/perf-<pid>.map, which perf reads (build the plugin with
# CARGO_PROFILE_PLUGIN_STRIP=false to keep its function names). PROFILE_FOLDED=1 keeps the folded
# stacks beside the SVG (OUT.folded), for sums by frame (grep, awk) the picture does not give.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
pid="${1:?usage: scripts/profile.sh PID SECONDS OUT.svg [TITLE]}"
seconds="${2:?seconds}"
out="${3:?out.svg}"
title="${4:-conductor}"
eval "$(scripts/tools.sh inferno)"
command -v perf >/dev/null || { echo "profile: perf is not installed (Debian: linux-perf)" >&2; exit 1; }

data="$(mktemp)"
trap 'rm -f "$data" "$data.folded"' EXIT
perf record -q -e cpu-clock -F 499 --call-graph dwarf,16384 -p "$pid" -o "$data" -- sleep "$seconds" >/dev/null 2>&1
perf script --no-inline -i "$data" 2>/dev/null | inferno-collapse-perf > "$data.folded"
mkdir -p "$(dirname "$out")"
inferno-flamegraph --title "$title" < "$data.folded" > "$out"
if [ "${PROFILE_FOLDED:-0}" = 1 ]; then cp "$data.folded" "${out%.svg}.folded"; fi
echo "profile: $(wc -l < "$data.folded") stacks → $out; most samples of their own:" >&2
# The report ends early (head): its SIGPIPE is no failure of the profile.
perf report -i "$data" --no-children --no-inline --stdio --sort symbol -g none -q 2>/dev/null \
    | grep -v '^$' | grep -v '^#' | grep '%' | head -10 >&2 || true
