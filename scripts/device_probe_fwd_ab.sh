#!/usr/bin/env bash
# Same-run A/B of the forward (device_check.sh probe step): the benchmark grid
# (flashpp_cuda_bench --grid --fwd-only) of this build against a baseline binary
# built elsewhere from an earlier commit and carried to the device
# (FLASHPP_AB_BASE, default build-ab/fwd_bench_base), alternating A B A B so
# drift between the rounds shows as spread, not as a gain. Prints one table:
# TFLOP/s of each round and the ratio of the medians.
set -uo pipefail
new="$BUILD/tests/cuda/flashpp_cuda_bench"
base=${FLASHPP_AB_BASE:-build-ab/fwd_bench_base}
[ -x "$base" ] || { echo "no baseline binary at $base"; exit 0; }
tmp=$(mktemp -d)
for round in 1 2; do
  for who in base new; do
    bin=$base
    [ "$who" = new ] && bin=$new
    timeout 120 "$bin" --grid --fwd-only --reps 10 --json "$tmp/${who}_$round.json" >/dev/null 2>&1
    echo "$who round $round rc $?"
  done
done
python3 - "$tmp" <<'PY'
import json, os, statistics, sys
d = sys.argv[1]
runs = {}
for who in ("base", "new"):
    runs[who] = [json.load(open(os.path.join(d, f"{who}_{r}.json"))) for r in (1, 2)
                 if os.path.exists(os.path.join(d, f"{who}_{r}.json"))]
print("| hdim | N | causal | base TF/s (rounds) | new TF/s (rounds) | new/base |")
print("|---|---|---|---|---|---|")
for i, row in enumerate(runs["base"][0]):
    b = [r[i]["fwd_tflops"] for r in runs["base"]]
    n = [r[i]["fwd_tflops"] for r in runs["new"]]
    print(f"| {row['hdim']} | {row['seqlen']} | {row['causal']} | {' / '.join(f'{x:.1f}' for x in b)} | "
          f"{' / '.join(f'{x:.1f}' for x in n)} | {statistics.median(n) / statistics.median(b):.3f} |")
PY
rm -rf "$tmp"
