#!/usr/bin/env bash
# Decode kernel checks after a change to it (device_check.sh probe step:
# FLASHPP_PROBE=scripts/device_probe_decode.sh): compute-sanitizer memcheck and
# racecheck on small decode cases (racecheck also with the 8-warp kernel
# forced), the phase trace of batch-1 steps (flashpp_decode_trace, plus any
# variant binaries in build-probe/, compiled by hand from edited copies of src/; FLASHPP_TRACE_ARGS replaces its
# configs and variants), the decode bench once per FLASHPP_OVERLAP_SETTINGS entry ("prefetch,dependents" pairs)
# on FLASHPP_OVERLAP_CONFIGS, and with FLASHPP_DECODE_NCU=1 the instruction count, duration and DRAM throughput
# of one launch per shape (ncu). FLASHPP_PROBE_SANITIZE=0 and FLASHPP_PROBE_TRACE=0 skip the sanitizers and the
# trace; FLASHPP_OVERLAP_ROUNDS repeats the A/B (settings interleaved, so drift shows as spread, not as a gain).
set -uo pipefail
t="$BUILD/tests/kvcache/test_kvcache_cuda"
dec="$BUILD/bench/decode/flashpp_decode_bench"
filter='Fixed/KVCacheCudaEdge.*page1_shuffled_bf16:Fixed/KVCacheCudaEdge.*page256_bf16:*KVCacheCuda.DeviceValidationReportsBadTables:PageSizes/KVCacheCudaPages.DecodeShapes/page16_sq4:PageSizes/KVCacheCudaPages.DecodeShapes/page64_sq1:*KVCacheCuda.LongSpansSmallPages:Splits/KVCacheCudaGraph.*:*KVCacheCuda.ExplicitSplitCounts'
if [ "${FLASHPP_PROBE_SANITIZE:-1}" = 1 ]; then
for tool in memcheck racecheck; do
  echo "=== compute-sanitizer $tool ==="
  timeout 150 compute-sanitizer --tool $tool --error-exitcode 9 "$t" --gtest_filter="$filter" --gtest_brief=1 2>&1 | tail -6
  echo "$tool rc ${PIPESTATUS[0]}"
done
echo "=== compute-sanitizer racecheck, 8-warp kernel forced ==="
FLASHPP_DECODE_WARPS=8 timeout 120 compute-sanitizer --tool racecheck --error-exitcode 9 "$t" \
  --gtest_filter='PageSizes/KVCacheCudaPages.DecodeShapes/page16_sq4:PageSizes/KVCacheCudaPages.DecodeShapes/page64_sq1:Splits/KVCacheCudaGraph.*' \
  --gtest_brief=1 2>&1 | tail -6
echo "racecheck (8 warps) rc ${PIPESTATUS[0]}"
fi
[ "${FLASHPP_PROBE_TRACE:-1}" = 1 ] && for probe in "$BUILD/bench/decode/flashpp_decode_trace" build-probe/decode_trace*; do
  [ -x "$probe" ] || continue
  echo "=== phase trace: $probe ==="
  read -r -a targs <<<"${FLASHPP_TRACE_ARGS:---config 4096,16 --config 16384,16 --config 16384,32 --config 65536,16}"
  timeout 120 "$probe" --calls 24 "${targs[@]}" 2>&1
done
# Same-run A/B of the programmatic-launch overlap through the library's own
# launcher: "prefetch keys,dependents tiles left" per setting (decode_launch.cu).
if [ -n "${FLASHPP_OVERLAP_SETTINGS:-}" ]; then
  echo "=== decode bench per overlap setting (FLASHPP_DECODE_PREFETCH,FLASHPP_DECODE_DEPENDENTS) ==="
  for cfg in ${FLASHPP_OVERLAP_CONFIGS:-1,4096,0,0 1,16384,0,0 1,16384,16,0 1,16384,64,0 1,65536,0,0 16,4096,16,0 16,16384,0,0}; do
    for round in $(seq "${FLASHPP_OVERLAP_ROUNDS:-1}"); do
      for set in $FLASHPP_OVERLAP_SETTINGS; do
        line=$(FLASHPP_DECODE_PREFETCH=${set%,*} FLASHPP_DECODE_DEPENDENTS=${set#*,} timeout 30 "$dec" --only "$cfg" 2>&1 >/dev/null | tail -1)
        printf '%-14s %-8s r%s %s\n' "$cfg" "$set" "$round" "$line"
      done
    done
  done
fi
[ "${FLASHPP_DECODE_NCU:-0}" = 1 ] || exit 0
echo "=== decode: one launch per shape ==="
for cfg in 16,4096,0,1 16,4096,64,1 16,4096,16,1 1,16384,0,16 1,16384,64,32 1,4096,0,16; do
  echo "--- $cfg ---"
  ncu --clock-control none -k regex:decode_kernel --launch-skip 1 -c 1 --section SpeedOfLight --section InstructionStats \
    --section SchedulerStats "$dec" --only $cfg 2>&1 |
    grep -E "^ +(Duration|DRAM Throughput|Executed Instructions |Issued Warp Per Scheduler)|kv_tbps" | sed 's/"sweep".*//'
done
