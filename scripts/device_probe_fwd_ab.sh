#!/usr/bin/env bash
# Same-run A/B of the forward (device_check.sh probe step): the benchmark grid
# (flashpp_cuda_bench --grid --fwd-only) of this build ("new") against binaries
# built elsewhere from other versions and carried to the device
# (build-ab/fwd_bench_<name>; "base" is the reference), in rounds that visit
# every binary in turn, so drift between rounds shows as spread, not as a gain.
# Prints one table: TFLOP/s per round and each version's median over base's.
set -uo pipefail
declare -A bins=([new]="$BUILD/tests/cuda/flashpp_cuda_bench")
for b in build-ab/fwd_bench_*; do [ -x "$b" ] && bins[${b#build-ab/fwd_bench_}]=$b; done
[ -n "${bins[base]:-}" ] || { echo "no baseline binary at build-ab/fwd_bench_base"; exit 0; }
tmp=$(mktemp -d)
for round in 1 2; do
  for who in "${!bins[@]}"; do
    timeout 120 "${bins[$who]}" --grid --fwd-only --reps 10 --json "$tmp/${who}_$round.json" >/dev/null 2>&1
    echo "$who round $round rc $?"
  done
done
python3 - "$tmp" "${!bins[@]}" <<'PY'
import json, os, statistics, sys
d, names = sys.argv[1], sorted(n for n in sys.argv[2:] if n != "base")
runs = {w: [json.load(open(os.path.join(d, f"{w}_{r}.json"))) for r in (1, 2)
            if os.path.exists(os.path.join(d, f"{w}_{r}.json"))] for w in ["base"] + names}
print("| hdim | N | causal | base TF/s | " + " | ".join(f"{n} TF/s | {n}/base" for n in names) + " |")
print("|---|---|---|---|" + "---|---|" * len(names))
for i, row in enumerate(runs["base"][0]):
    b = [r[i]["fwd_tflops"] for r in runs["base"]]
    cells = []
    for n in names:
        v = [r[i]["fwd_tflops"] for r in runs[n]]
        cells.append(f"{' / '.join(f'{x:.1f}' for x in v)} | {statistics.median(v) / statistics.median(b):.3f}")
    print(f"| {row['hdim']} | {row['seqlen']} | {row['causal']} | {' / '.join(f'{x:.1f}' for x in b)} | "
          + " | ".join(cells) + " |")
PY
rm -rf "$tmp"
