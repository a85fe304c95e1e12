#!/usr/bin/env bash
# Decode variant checks (device_check.sh probe step:
# FLASHPP_PROBE=scripts/device_probe_launch.sh): the KV-cache GPU tests with the
# 4-warp and the 8-warp kernel forced (FLASHPP_DECODE_WARPS), compute-sanitizer
# on the split-counter, graph and small-page tests with the 8-warp kernel, then
# per-step time of both variants, caller-owned counters against cleared ones.
set -uo pipefail
t="$BUILD/tests/kvcache/test_kvcache_cuda"
dec="$BUILD/bench/decode/flashpp_decode_bench"
for w in 4 8; do
  echo "=== test_kvcache_cuda, FLASHPP_DECODE_WARPS=$w ==="
  FLASHPP_DECODE_WARPS=$w timeout 200 "$t" --gtest_brief=1 2>&1 | tail -4
done
filter='*KVCacheCuda.CallerOwnedSplitCounters:Splits/KVCacheCudaGraph.*:*KVCacheCuda.ExplicitSplitCounts:PageSizes/KVCacheCudaPages.DecodeShapes/page16_sq4:*KVCacheCuda.LongSpansSmallPages:*DeviceValidationReportsBadTables'
for tool in memcheck racecheck; do
  echo "=== compute-sanitizer $tool (8 warps) ==="
  FLASHPP_DECODE_WARPS=8 timeout 200 compute-sanitizer --tool $tool --error-exitcode 9 "$t" --gtest_filter="$filter" --gtest_brief=1 2>&1 | tail -4
  echo "$tool rc ${PIPESTATUS[0]}"
done
echo "=== per-step time: 4 warps | 8 warps | 8 warps, cleared counters ==="
step() { sed -E 's/.*"splits":([0-9]+),"us":([0-9.]+),"kv_tbps":([0-9.]+).*/splits \1 us \2 tbps \3/'; }
for cfg in 1,4096,0,0 1,16384,0,0 1,16384,16,0 1,16384,64,0 1,65536,0,0 1,65536,16,0 1,16384,0,8 1,16384,0,12 1,16384,0,24 4,16384,0,0 16,4096,0,0 16,4096,16,0; do
  a=$(FLASHPP_DECODE_WARPS=4 "$dec" --only $cfg 2>/dev/null | grep '"kind":"flashpp"' | step)
  b=$(FLASHPP_DECODE_WARPS=8 "$dec" --only $cfg 2>/dev/null | grep '"kind":"flashpp"' | step)
  c=$(FLASHPP_DECODE_WARPS=8 "$dec" --only $cfg --clear-counters 2>/dev/null | grep '"kind":"flashpp"' | step)
  echo "$cfg | $a | $b | $c"
done
