#!/usr/bin/env bash
# Counted (not timed) cost per event of the engine on the four bench families the redesign
# must not slow down: rr (benches/rr-overcommit P=64/V=512), eevdf + KVM PLE (benches/ple
# P=24), Credit and FLMS (benches/xen P=32). Each shape runs under callgrind at two
# durations; the marginal instructions / marginal events cancel start-up and setup.
#
#   scripts/instructions_per_event.sh [TARGET_DIR]    # default: ./target
#
# Builds the core's `run` example in release first. Needs valgrind. Prints one line per
# shape: name, events at both durations, instructions per event.
set -euo pipefail
cd "$(dirname "$0")/.."
target="${1:-target}"
CARGO_TARGET_DIR="$target" cargo build --quiet --release -p vcpulab-core --example run
bin="$target/release/examples/run"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

shape() { # name file short long
    local name="$1" file="$2" short="$3" long="$4" ir=() ev=()
    for d in "$short" "$long"; do
        sed -E "s/^duration *=.*/duration = \"$d\"/" "$file" > "$tmp/s.toml"
        local out
        out="$(valgrind --tool=callgrind --callgrind-out-file=/dev/null "$bin" "$tmp/s.toml" 2> "$tmp/err")"
        ir+=("$(sed -nE 's/.*Collected : ([0-9]+).*/\1/p' "$tmp/err")")
        ev+=("$(printf '%s' "$out" | sed -nE 's/^  "events": ([0-9]+),?$/\1/p' | head -1)")
    done
    awk -v n="$name" -v i1="${ir[0]}" -v i2="${ir[1]}" -v e1="${ev[0]}" -v e2="${ev[1]}" \
        'BEGIN { printf "%-12s events %d / %d  instructions/event %.1f\n", n, e1, e2, (i2 - i1) / (e2 - e1) }'
}

shape rr-p64    benches/rr-overcommit/p64-v512.toml 1s 2s
shape eevdf-p24 benches/ple/eevdf-p24.toml 20ms 40ms
shape credit-p32 benches/xen/credit-p32.toml 2s 4s
shape flms-p32  benches/xen/flms-p32.toml 2s 4s
