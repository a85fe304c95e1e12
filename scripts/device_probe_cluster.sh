#!/usr/bin/env bash
# The decode split merge through thread-block clusters (src/cuda/decode/cluster_merge.cuh,
# FLASHPP_DECODE_CLUSTER=1), checked and measured in one device_check.sh probe step:
#   FLASHPP_DEVICE_STEPS="build probe" FLASHPP_PROBE=scripts/device_probe_cluster.sh scripts/device_check.sh
# 1. the cluster tests of test_kvcache_cuda under compute-sanitizer memcheck and racecheck;
# 2. the phase trace of batch-1 steps, L2 merge beside cluster merge (flashpp_decode_trace);
# 3. a same-run A/B through the library's launcher and CUDA graphs (flashpp_decode_bench --only),
#    FLASHPP_CLUSTER_ROUNDS rounds with the two settings interleaved, on FLASHPP_CLUSTER_CONFIGS
#    ("batch,cache,page,splits"; splits 0 = the planner's).
set -uo pipefail
t="$BUILD/tests/kvcache/test_kvcache_cuda"
dec="$BUILD/bench/decode/flashpp_decode_bench"
trace="$BUILD/bench/decode/flashpp_decode_trace"
filter='*KVCacheCuda.ClusterMergeDecodeShapes:Splits/KVCacheCudaGraph.*:*KVCacheCuda.ExplicitSplitCounts'
if [ "${FLASHPP_PROBE_SANITIZE:-1}" = 1 ]; then
  for tool in memcheck racecheck; do
    echo "=== compute-sanitizer $tool, cluster merge ==="
    FLASHPP_DECODE_CLUSTER=1 timeout 180 compute-sanitizer --tool $tool --error-exitcode 9 "$t" \
      --gtest_filter="$filter" --gtest_brief=1 2>&1 | tail -6
    echo "$tool rc ${PIPESTATUS[0]}"
  done
fi
if [ -x "$trace" ]; then
  echo "=== phase trace: L2 merge (x,y) and cluster merge (x,y,1) ==="
  timeout 150 "$trace" --calls 24 --config 4096,16 --config 16384,16 --config 16384,8 --config 65536,16 \
    --variant 0,-1 --variant 0,-1,1 2>&1
fi
echo "=== decode bench, L2 merge (0) against cluster merge (1), interleaved ==="
for cfg in ${FLASHPP_CLUSTER_CONFIGS:-1,4096,0,0 1,16384,0,0 1,16384,16,0 1,16384,64,0 1,16384,256,0 1,65536,0,0 1,65536,64,0 16,4096,16,0}; do
  for round in $(seq "${FLASHPP_CLUSTER_ROUNDS:-3}"); do
    for c in 0 1; do
      line=$(FLASHPP_DECODE_CLUSTER=$c timeout 30 "$dec" --no-sweep --only "$cfg" 2>&1 >/dev/null | tail -1)
      printf '%-14s cluster=%s r%s %s\n' "$cfg" "$c" "$round" "$line"
    done
  done
done
