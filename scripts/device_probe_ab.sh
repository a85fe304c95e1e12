#!/usr/bin/env bash
# Same-run A/B (device_check.sh probe step): the benchmark grid of this build
# ("new") against binaries built elsewhere from other versions and carried to the
# device (build-ab/bench_<name>; "base" is the reference), in rounds that visit
# every binary in turn, each round starting one binary later, so drift between
# rounds shows as spread, not as a gain.
# Prints one table per pass: TFLOP/s per round and each version's median over base's.
#   FLASHPP_AB_OPS     passes to time, each its own grid (default "fwd"): fwd, bwd, or
#                      fa2fwd (the forward with the FA2-class kernels forced,
#                      FLASHPP_CUDA_FORWARD_FAMILY=sm80)
#   FLASHPP_AB_ROUNDS  rounds (default 2)
#   FLASHPP_AB_HDIM    only this head dim (the bench's --hdim); FLASHPP_AB_HDIM_<pass>
#                      sets it for one pass, and a pass named <op><hdim> (fwd128,
#                      fa2fwd256) runs that op at that head dim
#   FLASHPP_AB_COOL_MS idle before each timed pass (the bench's --cool-ms; every
#                      binary must know the flag)
#   FLASHPP_AB_BINS_<pass> only these versions in that pass (e.g.
#                      FLASHPP_AB_BINS_fwd="base new"; base is always timed)
#   FLASHPP_AB_ENV_<pass> environment for every binary of that pass (e.g.
#                      FLASHPP_AB_ENV_fwd64_q2="FLASHPP_SM90_Q_BUFFERS=2"); a pass name
#                      may carry a suffix after "_" to tell such passes apart
# scripts/device_ab_overlay.sh, run as an earlier probe, builds such binaries on the
# device from overlays (ab/<name>/) in build trees of their own.
set -uo pipefail
rounds=${FLASHPP_AB_ROUNDS:-2}
cool=()
[ -n "${FLASHPP_AB_COOL_MS:-}" ] && cool+=(--cool-ms "$FLASHPP_AB_COOL_MS")
declare -A bins=([new]="$BUILD/tests/cuda/flashpp_cuda_bench")
for b in build-ab/bench_*; do [ -x "$b" ] && bins[${b#build-ab/bench_}]=$b; done
[ -n "${bins[base]:-}" ] || { echo "no baseline binary at build-ab/bench_base"; exit 0; }
for pass in ${FLASHPP_AB_OPS:-fwd}; do
op=${pass%%_*}
pass_hdim=
# A pass may carry its head dim in its name (fwd128, fa2fwd256), so one op can
# run as several passes.
[[ "$op" =~ ^([a-z0-9]*[a-z])([0-9]+)$ ]] && op=${BASH_REMATCH[1]} && pass_hdim=${BASH_REMATCH[2]}
envs=()
[ "$op" = fa2fwd ] && op=fwd && envs=(FLASHPP_CUDA_FORWARD_FAMILY=sm80)
env_var=FLASHPP_AB_ENV_$pass
[ -n "${!env_var:-}" ] && read -r -a more <<<"${!env_var}" && envs+=("${more[@]}")
hdim_var=FLASHPP_AB_HDIM_$pass
hdim=${pass_hdim:-${!hdim_var:-${FLASHPP_AB_HDIM:-}}}
extra=("${cool[@]}")
[ -n "$hdim" ] && extra+=(--hdim "$hdim")
echo "=== A/B: $pass ==="
tmp=$(mktemp -d)
names=("${!bins[@]}")
only_var=FLASHPP_AB_BINS_$pass
if [ -n "${!only_var:-}" ]; then
  names=(base)
  for n in ${!only_var}; do [ "$n" != base ] && [ -n "${bins[$n]:-}" ] && names+=("$n"); done
fi
for round in $(seq 1 "$rounds"); do
  # Each round starts one binary later, so no version is always the one timed
  # first, or always the one timed after another binary's heat.
  for k in "${!names[@]}"; do
    who=${names[$(((k + round - 1) % ${#names[@]}))]}
    env "${envs[@]}" timeout 150 "${bins[$who]}" --grid --$op-only --reps 10 "${extra[@]}" \
      --json "$tmp/${who}_$round.json" >/dev/null 2>&1
    echo "$who round $round rc $?"
  done
done
python3 - "$tmp" "$op" "$rounds" "${names[@]}" <<'PY'
import json, os, statistics, sys
d, op, nr, names = sys.argv[1], sys.argv[2], int(sys.argv[3]), sorted(n for n in sys.argv[4:] if n != "base")
key = f"{op}_tflops"
runs = {w: [json.load(open(os.path.join(d, f"{w}_{r}.json"))) for r in range(1, nr + 1)
            if os.path.exists(os.path.join(d, f"{w}_{r}.json"))] for w in ["base"] + names}
print("| hdim | N | causal | base TF/s | " + " | ".join(f"{n} TF/s | {n}/base" for n in names) + " |")
print("|---|---|---|---|" + "---|---|" * len(names))
for i, row in enumerate(runs["base"][0]):
    b = [r[i][key] for r in runs["base"]]
    cells = []
    for n in names:
        v = [r[i][key] for r in runs[n]]
        cells.append(f"{' / '.join(f'{x:.1f}' for x in v)} | {statistics.median(v) / statistics.median(b):.3f}")
    print(f"| {row['hdim']} | {row['seqlen']} | {row['causal']} | {' / '.join(f'{x:.1f}' for x in b)} | "
          + " | ".join(cells) + " |")
PY
rm -rf "$tmp"
done
