#!/usr/bin/env bash
# Our FA2-class kernels beside torch's flash backend (FA2) under Nsight Compute, same
# shapes, same sections (device_check.sh probe step, FLASHPP_PROBE=scripts/device_probe_vs_fa2.sh).
# Where the two kernels share the tiling (hdim 256: 64 x 64 backward blocks, 128 x 64 forward
# blocks, 8 warps) their instruction counts, shared-memory wavefronts, bank conflicts and
# stall reasons say what ours does differently.
# FLASHPP_VS_FA2: "pass,hdim,N,causal" list (default bwd,256,16384,0 bwd,64,16384,0 fwd,256,16384,0).
# FLASHPP_VS_FA2_PEER=0 profiles ours only (the peer's numbers from an earlier run still hold).
# FLASHPP_VS_FA2_SOURCE=1 adds the per-instruction stall samples (SourceCounters) and writes each
# kernel's source page (SASS, CSV) to $OUT/vs_fa2_sass.tar.gz.
set -uo pipefail
bench="$BUILD/tests/cuda/flashpp_cuda_bench"
tmp=$(mktemp -d)
cat >"$tmp/torch_once.py" <<'PY'
# One torch SDPA flash call (and its backward) on the grid's shape: batch = 16K / N, heads = 2048 / d.
import sys
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
pas, d, n, causal = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1"
b, h = 16384 // n, 2048 // d
q, k, v = (torch.randn(b, h, n, d, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
    for _ in range(2):
        o = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
        if pas == "bwd":
            o.backward(torch.randn_like(o))
torch.cuda.synchronize()
PY
sections="--section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis
  --section MemoryWorkloadAnalysis_Tables --section WarpStateStats --section SchedulerStats
  --section InstructionStats --section Occupancy --section LaunchStats"
[ "${FLASHPP_VS_FA2_SOURCE:-0}" = 1 ] && sections+=" --section SourceCounters --import-source no"
profile() {  # tag, kernel regex, command...
  local tag=$1 kernel=$2
  shift 2
  # shellcheck disable=SC2086
  timeout 150 ncu --clock-control none -k "regex:$kernel" -c 1 $sections -o "$tmp/$tag" "$@" >"$tmp/$tag.log" 2>&1
  echo "ncu $tag rc $?"
  if [ -f "$tmp/$tag.ncu-rep" ]; then
    ncu --import "$tmp/$tag.ncu-rep" --print-details all 2>&1 | grep -v "^==PROF=="
    if [ "${FLASHPP_VS_FA2_SOURCE:-0}" = 1 ]; then
      ncu --import "$tmp/$tag.ncu-rep" --page source --print-source sass --csv >"$tmp/sass_$tag.csv" 2>&1
      echo "source page $tag rc $? ($(wc -l <"$tmp/sass_$tag.csv") lines)"
    fi
  else
    tail -5 "$tmp/$tag.log"
  fi
}
for shape in ${FLASHPP_VS_FA2:-bwd,256,16384,0 bwd,64,16384,0 fwd,256,16384,0}; do
  IFS=, read -r pas d n causal <<<"$shape"
  echo "=== $pas hdim $d N $n causal $causal: ours ==="
  if [ "$pas" = bwd ]; then
    profile "ours_$pas$d" bwd_kernel "$bench" --reps 1 --only "$d,$n,$causal" --bwd-only
    [ "${FLASHPP_VS_FA2_PEER:-1}" = 0 ] && continue
    echo "=== $pas hdim $d N $n causal $causal: torch flash ==="
    profile "fa2_$pas$d" flash_bwd_dq_dk_dv python3 "$tmp/torch_once.py" bwd "$d" "$n" "$causal"
  else
    FLASHPP_CUDA_FORWARD_FAMILY=sm80 profile "ours_$pas$d" fwd_kernel "$bench" --reps 1 --only "$d,$n,$causal" \
      --fwd-only
    [ "${FLASHPP_VS_FA2_PEER:-1}" = 0 ] && continue
    echo "=== $pas hdim $d N $n causal $causal: torch flash ==="
    profile "fa2_$pas$d" flash_fwd_kernel python3 "$tmp/torch_once.py" fwd "$d" "$n" "$causal"
  fi
done
(cd "$tmp" && ls sass_*.csv >/dev/null 2>&1 && tar czf "$OUT/vs_fa2_sass.tar.gz" sass_*.csv)
rm -rf "$tmp"
