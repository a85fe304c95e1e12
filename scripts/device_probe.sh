#!/usr/bin/env bash
# Profiles for the open performance questions (run by device_check.sh's probe
# step, with BUILD and PYTHONPATH set): where a paged decode block loses its
# rate against a contiguous one, what a batch-1 decode step spends outside the
# kernel, and how the FA2-class kernels compare with torch's flash backend on
# the configs where they trail it. Each ncu call takes one launch after warm-up.
set -uo pipefail
ncu_sections=(--section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats
  --section SchedulerStats --section Occupancy --section LaunchStats --section InstructionStats
  --section ComputeWorkloadAnalysis)
dec="$BUILD/bench/decode/flashpp_decode_bench"

echo "=== decode: batch 16, 4K, one split: contiguous vs page 64 ==="
for page in 0 64; do
  echo "--- page $page ---"
  ncu --clock-control none -k regex:decode_kernel --launch-skip 1 -c 1 "${ncu_sections[@]}" \
    "$dec" --only 16,4096,$page,1 2>&1 | grep -v "^==PROF==" | tail -n +1
done

echo "=== decode: kernel duration vs graph step ==="
for cfg in 1,16384,0,16 1,16384,0,32 1,16384,64,16 1,16384,64,32 16,4096,64,2 16,4096,0,1 1,4096,0,16; do
  echo "--- $cfg ---"
  "$dec" --only $cfg 2>&1 | tail -1
  ncu --clock-control none -k regex:decode_kernel --launch-skip 1 -c 1 --section SpeedOfLight \
    "$dec" --only $cfg 2>&1 | grep -E "Duration|DRAM Throughput|Memory Throughput" | head -4
done

echo "=== prefill: ours (FA2-class) vs torch flash ==="
fwd_re='^fwd_kernel$|flash_fwd_kernel'
bwd_re='^bwd_kernel$|bwd_dq_dk_dv'
for spec in "fwd 256 4096 $fwd_re" "bwd 64 8192 $bwd_re" "bwd 256 8192 $bwd_re" "fwd 128 8192 $fwd_re"; do
  read -r op hd n kname <<<"$spec"
  for be in ours flash; do
    echo "--- $op hdim $hd N $n: $be ---"
    FLASHPP_CUDA_FORWARD_FAMILY=sm80 ncu --clock-control none -k "regex:${kname}" --launch-skip 3 -c 1 \
      "${ncu_sections[@]}" python3 scripts/probe_prefill.py --backend $be --op $op --hdim $hd --seqlen $n 2>&1 |
      grep -v "^==PROF==" | tail -n +1
  done
done
