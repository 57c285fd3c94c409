#!/usr/bin/env bash
# Runs the cargo-fuzz targets (fuzz/fuzz_targets) for SECONDS each (default 15), seeded
# with the shipped scenario files. Needs a nightly toolchain and cargo-fuzz
# (`cargo install cargo-fuzz`). CI runs it bounded (tests/python/test_fuzz.py); for a
# longer hunt: `scripts/fuzz.sh 3600`. The corpus grows in fuzz/corpus/<target>
# (git-ignored; set FUZZ_CORPUS_DIR to use another root); crashes are written to
# fuzz/artifacts/<target>/ and make this script fail. Turn each into a regression test
# (crates/vcpulab-core/tests/fuzz_regressions.rs).
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]      targets: parse_scenario run_scenario
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-15}"
shift || true
targets=("$@")
((${#targets[@]})) || targets=(parse_scenario run_scenario)
corpus_root="${FUZZ_CORPUS_DIR:-fuzz/corpus}"

(cd fuzz && cargo +nightly fuzz build -O 2>&1 | tail -1)
status=0
for t in "${targets[@]}"; do
    dir="$corpus_root/$t"
    mkdir -p "$dir"
    # Seeds: every shipped scenario (not the real-KVM ones, another schema).
    find scenarios benches -name '*.toml' -not -path '*/kvm/*' | while read -r f; do
        cp "$f" "$dir/seed_$(echo "$f" | tr '/' '_')"
    done
    abs="$(cd "$dir" && pwd)"
    echo "==> fuzzing $t for ${secs}s (corpus $dir)"
    log="$(mktemp)"
    if (cd fuzz && cargo +nightly fuzz run -O "$t" "$abs" -- \
        -max_total_time="$secs" -max_len=4096 -timeout=10 -rss_limit_mb=2048 -print_final_stats=1) >"$log" 2>&1; then
        grep -E "^(Done|stat::number_of_executed_units)" "$log" || true
    else
        # The panic message, the input that caused it and where it was written.
        grep -vE "^(#[0-9]+|\s+NEW_FUNC|\"|INFO:)" "$log" | tail -40 >&2
        echo "fuzz.sh: $t crashed; the input is in fuzz/artifacts/$t/" >&2
        status=1
    fi
    rm -f "$log"
done
((status == 0)) && echo "fuzz.sh: no crashes"
exit "$status"
