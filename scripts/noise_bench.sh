#!/bin/bash
# usage: CARGO_PROFILE_RELEASE_LTO=false cargo build --release -p vcpulab-core --example run && scripts/noise_bench.sh
# events/s with and without host noise on the bench shapes: "on" is the default noise, or
# NOISE_PROFILE=1 for the shipped profile's values; "off" is [host.noise] enabled = false.
if [ -n "${NOISE_PROFILE:-}" ]; then
NOISE='[host.noise]
interrupt_rate = 3163
interrupt_duration = { dist = "lognormal", median = "4.99us", sigma = 1.93 }
housekeeping_rate = 17.7
housekeeping_run = { dist = "lognormal", median = "14us", sigma = 2.16 }
'
else
NOISE=''
fi
OFF='[host.noise]
enabled = false
'
for f in benches/rr-overcommit/p4-v16.toml benches/rr-overcommit/p64-v512.toml benches/ple/eevdf-p6.toml benches/ple/eevdf-p64.toml benches/xen/credit-p8.toml benches/xen/credit-p64.toml benches/xen/flms-p64.toml; do
  b=${TMPDIR:-/tmp}/nb-$(basename $f .toml)
  for v in on off; do
  if [ $v = on ]; then table=$NOISE; else table=$OFF; fi
  python3 - "$f" "$b-$v.toml" "$table" <<'PY'
import sys, re
s = open(sys.argv[1]).read()
# the shape's own "no noise" (the rr shapes': same model as the reference programs) goes
s = s.replace("[host.noise]\nenabled = false\n", "")
# insert the noise table right after the [host] table's keys
i = s.index("[host]")
j = s.find("\n[", i + 1)
s = s[:j + 1] + sys.argv[3] + s[j + 1:]
open(sys.argv[2], "w").write(s)
PY
  done
  for v in off on; do
    best=""
    for r in 1 2 3; do
      t0=$(date +%s.%N); ${RUN:-target/release/examples/run} $b-$v.toml > $b-$v.json; t1=$(date +%s.%N)
      w=$(echo "$t1 - $t0" | bc); best=$(python3 -c "print(min(float('$w'), float('${best:-1e9}')))")
    done
    ev=$(python3 -c "import json; s=json.load(open('$b-$v.json')); print(s['events'])")
    echo "$(basename $f) noise=$v events=$ev best_wall=$best events/s=$(python3 -c "print(round($ev/$best))")"
  done
done
