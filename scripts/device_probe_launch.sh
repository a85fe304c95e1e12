#!/usr/bin/env bash
# Decode launch-path checks (device_check.sh probe step:
# FLASHPP_PROBE=scripts/device_probe_launch.sh): compute-sanitizer on the
# split-counter and graph tests, then per-step time with caller-owned split
# counters beside counters cleared by each call, and the kernel's own duration
# (ncu) for the same shapes: what is left between steps.
set -uo pipefail
t="$BUILD/tests/kvcache/test_kvcache_cuda"
dec="$BUILD/bench/decode/flashpp_decode_bench"
filter='*KVCacheCuda.CallerOwnedSplitCounters:Splits/KVCacheCudaGraph.*:*KVCacheCuda.ExplicitSplitCounts:PageSizes/KVCacheCudaPages.DecodeShapes/page16_sq4'
for tool in memcheck racecheck synccheck; do
  echo "=== compute-sanitizer $tool ==="
  timeout 150 compute-sanitizer --tool $tool --error-exitcode 9 "$t" --gtest_filter="$filter" --gtest_brief=1 2>&1 | tail -4
  echo "$tool rc ${PIPESTATUS[0]}"
done
echo "=== per-step time: caller counters | cleared counters ==="
for cfg in 1,4096,0,0 1,16384,0,0 1,16384,64,0 1,65536,0,0 16,4096,0,0 16,4096,16,0 16,4096,64,0; do
  a=$("$dec" --only $cfg 2>/dev/null | grep '"kind":"flashpp"' | sed -E 's/.*"splits":([0-9]+),"us":([0-9.]+),"kv_tbps":([0-9.]+).*/splits \1 us \2 tbps \3/')
  b=$("$dec" --only $cfg --clear-counters 2>/dev/null | grep '"kind":"flashpp"' | sed -E 's/.*"us":([0-9.]+),"kv_tbps":([0-9.]+).*/us \1 tbps \2/')
  echo "$cfg | $a | $b"
done
echo "=== kernel duration (ncu) ==="
for cfg in 1,4096,0,0 1,16384,0,0 16,4096,16,0; do
  echo "--- $cfg ---"
  ncu --clock-control none -k regex:decode_kernel --launch-skip 1 -c 1 --section SpeedOfLight --section InstructionStats \
    "$dec" --only $cfg 2>&1 | grep -E "^ +(Duration|DRAM Throughput|Executed Instructions )"
done
