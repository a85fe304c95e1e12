#!/usr/bin/env bash
# What the backward's exact-D passes (src/cuda/sm80/bwd_exact_d.cuh) cost on
# attention-sink inputs (device_check.sh probe step): flashpp_cuda_bench --bwd-only
# without and with --sink L, where L = ln(3 N) gives each long row about 3/4 of its
# mass on the sequence's first key (every query block marked), and with L = ln(N / 3)
# (about 1/4: below the marking threshold, nothing marked). With a baseline binary
# at build-ab/bench_base (device_probe_ab.sh) it times that one too, line by line.
set -uo pipefail
benches=("$BUILD/tests/cuda/flashpp_cuda_bench")
[ -x build-ab/bench_base ] && benches+=(build-ab/bench_base)
for bench in "${benches[@]}"; do
echo "== $bench"
for cfg in 64,16384,0 128,16384,0 128,4096,0 128,16384,1 256,16384,0; do
  n=$(cut -d, -f2 <<<"$cfg")
  hi=$(python3 -c "import math; print(round(math.log(3 * $n), 2))")
  lo=$(python3 -c "import math; print(round(math.log($n / 3), 2))")
  for sink in 0 "$lo" "$hi"; do
    line=$(timeout 60 "$bench" --only "$cfg" --bwd-only --reps 10 --sink "$sink" 2>&1 | tail -1)
    echo "cfg $cfg sink $sink: $line"
  done
done
done
