#!/usr/bin/env bash
# Where the FA2-class backward (src/cuda/sm80/bwd_kernel.cuh) spends its time
# (device_check.sh probe step, FLASHPP_PROBE=scripts/device_probe_bwd.sh):
# registers, stack and spills of each bf16 backward instance per target arch
# (cuobjdump), then one launch per shape under Nsight Compute: throughput, pipe
# use, shared-memory traffic and bank conflicts, warp stall reasons.
# FLASHPP_BWD_SHAPES: "hdim,N,causal" list (default 64,16384,0 128,16384,0).
set -uo pipefail
bench="$BUILD/tests/cuda/flashpp_cuda_bench"
objdir="$BUILD/CMakeFiles/flashpp.dir/src/cuda/instances"

echo "=== resource usage (cuobjdump, per arch) ==="
for f in "$objdir"/bwd_bf16_hd*.cu.o; do
  echo "--- $(basename "$f") ---"
  cuobjdump --dump-resource-usage "$f" 2>&1 | grep -E "arch =|REG" | sed "s/^ *//"
done

tmp=$(mktemp -d)
for shape in ${FLASHPP_BWD_SHAPES:-64,16384,0 128,16384,0}; do
  tag=${shape//,/_}
  echo "=== ncu: backward, hdim,N,causal $shape ==="
  "$bench" --reps 5 --only "$shape" 2>&1 | tail -2
  timeout 150 ncu --clock-control none -k regex:bwd_kernel -c 1 \
    --section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
    --section WarpStateStats --section SchedulerStats --section InstructionStats --section Occupancy \
    --section LaunchStats -o "$tmp/$tag" "$bench" --reps 1 --only "$shape" >/dev/null 2>&1
  echo "ncu rc $?"
  [ -f "$tmp/$tag.ncu-rep" ] || continue
  ncu --import "$tmp/$tag.ncu-rep" --print-details all 2>&1 | grep -v "^==PROF=="
done
rm -rf "$tmp"
