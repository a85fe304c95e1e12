#!/usr/bin/env bash
# Per-step decode time of the 4-warp and 8-warp kernels (FLASHPP_DECODE_WARPS)
# on batch-1 and batch-16 shapes (device_check.sh probe step:
# FLASHPP_PROBE=scripts/device_probe_warps.sh).
set -uo pipefail
dec="$BUILD/bench/decode/flashpp_decode_bench"
step() { sed -E 's/.*"splits":([0-9]+),"us":([0-9.]+),"kv_tbps":([0-9.]+).*/splits \1 us \2 tbps \3/'; }
echo "=== per-step time: 4 warps | 8 warps ==="
for cfg in 1,4096,0,0 1,16384,0,0 1,16384,16,0 1,16384,64,0 1,65536,0,0 1,16384,0,8 1,16384,0,24 4,16384,0,0 16,4096,16,0; do
  a=$(FLASHPP_DECODE_WARPS=4 timeout 30 "$dec" --only $cfg 2>/dev/null | grep '"kind":"flashpp"' | step)
  b=$(FLASHPP_DECODE_WARPS=8 timeout 30 "$dec" --only $cfg 2>/dev/null | grep '"kind":"flashpp"' | step)
  echo "$cfg | $a | $b"
done
