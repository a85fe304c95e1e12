#!/usr/bin/env bash
# Where the Hopper forward (src/cuda/sm90) spends its time (device_check.sh probe
# step, FLASHPP_PROBE=scripts/device_probe_hopper.sh): registers, stack and spills
# and the SASS instruction mix of each bf16 instance (cuobjdump), then one launch
# per shape under Nsight Compute: throughput, warp stall reasons, pipe use, and the
# per-instruction stall samples (source page, SASS), the last as CSV under $OUT.
# FLASHPP_HOPPER_SHAPES: "hdim,N,causal" list (default 128,16384,0 64,16384,0).
set -uo pipefail
bench="$BUILD/tests/cuda/flashpp_cuda_bench"
objdir="$BUILD/CMakeFiles/flashpp.dir/src/cuda/instances"

echo "=== resource usage and SASS mix (cuobjdump) ==="
for f in "$objdir"/fwd90_bf16_hd*.cu.o; do
  echo "--- $(basename "$f") ---"
  cuobjdump --dump-resource-usage "$f" 2>&1 | grep -E "REG|STACK|LOCAL" | sed 's/^ *//'
  sass=$(cuobjdump -sass "$f" 2>/dev/null)
  printf '  %-12s %s\n' instructions "$(grep -cE '^ +/\*[0-9a-f]{4,}\*/' <<<"$sass")"
  for op in HGMMA WARPGROUP MUFU.EX2 FFMA FMUL FADD FMNMX F2FP SHFL BAR SYNCS UTMALDG LDL STL LDS STS STG; do
    printf '  %-12s %s\n' "$op" "$(grep -cE "[ {]$op[ .;]" <<<"$sass")"
  done
done

tmp=$(mktemp -d)
for shape in ${FLASHPP_HOPPER_SHAPES:-128,16384,0 64,16384,0}; do
  tag=${shape//,/_}
  echo "=== ncu: hdim,N,causal $shape ==="
  "$bench" --fwd-only --reps 5 --only "$shape" 2>&1 | tail -2
  timeout 150 ncu --clock-control none -k regex:fwd_kernel --launch-skip 2 -c 1 \
    --section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
    --section WarpStateStats --section SchedulerStats --section InstructionStats --section Occupancy \
    --section LaunchStats --section SourceCounters --import-source no -o "$tmp/$tag" \
    "$bench" --fwd-only --reps 1 --only "$shape" >/dev/null 2>&1
  echo "ncu rc $?"
  [ -f "$tmp/$tag.ncu-rep" ] || continue
  ncu --import "$tmp/$tag.ncu-rep" --print-details all 2>&1 | grep -v "^==PROF=="
  ncu --import "$tmp/$tag.ncu-rep" --page source --print-source sass --csv >"$tmp/sass_$tag.csv" 2>&1
  echo "source page rc $? ($(wc -l <"$tmp/sass_$tag.csv") lines)"
done
(cd "$tmp" && ls sass_*.csv >/dev/null 2>&1 && tar czf "$OUT/hopper_sass.tar.gz" sass_*.csv)
rm -rf "$tmp"
