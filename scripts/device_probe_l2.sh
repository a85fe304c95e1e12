#!/usr/bin/env bash
# DRAM traffic and L2 reuse of the forward under several environment settings
# (device_check.sh probe step, FLASHPP_PROBE=scripts/device_probe_l2.sh): one
# launch per (setting, shape) under Nsight Compute, a handful of metrics, one
# table row each. Answers "does this order reuse K/V through L2, and does the
# time follow the traffic?" without a full profile.
#   FLASHPP_L2_SHAPES  "hdim,N,causal" list (default 64,1024,1)
#   FLASHPP_L2_ENVS    settings, space-separated, each "label" or "label:VAR=v,VAR=v"
#                      (default "default")
#   FLASHPP_L2_KERNEL  kernel name pattern (default fwd_kernel)
set -uo pipefail
bench="$BUILD/tests/cuda/flashpp_cuda_bench"
metrics=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__throughput.avg.pct_of_peak_sustained_elapsed
echo "| setting | shape | time us | DRAM read MB | DRAM write MB | L2 hit % | DRAM % peak | SM % peak |"
echo "|---|---|---|---|---|---|---|---|"
for shape in ${FLASHPP_L2_SHAPES:-64,1024,1}; do
  for setting in ${FLASHPP_L2_ENVS:-default}; do
    label=${setting%%:*}
    envs=()
    [[ "$setting" == *:* ]] && IFS=, read -ra envs <<<"${setting#*:}"
    csv=$(env "${envs[@]}" timeout 120 ncu --clock-control none -k "regex:${FLASHPP_L2_KERNEL:-fwd_kernel}" \
      --launch-skip 2 -c 1 --metrics "$metrics" --csv "$bench" --fwd-only --reps 1 --only "$shape" 2>/dev/null)
    NCU_CSV="$csv" python3 - "$label" "$shape" <<'PY'
import csv, io, os, sys
rows = [r for r in csv.reader(io.StringIO(os.environ["NCU_CSV"])) if len(r) > 3]
if not rows: print(f"| {sys.argv[1]} | {sys.argv[2]} | ncu gave nothing | | | | | |"); sys.exit()
h = rows[0]; name, unit, val = h.index("Metric Name"), h.index("Metric Unit"), h.index("Metric Value")
m = {}
for r in rows[1:]:
    v = float(r[val].replace(",", ""))
    u = r[unit]
    if u in ("byte", "Kbyte", "Mbyte", "Gbyte"): v *= {"byte": 1e-6, "Kbyte": 1e-3, "Mbyte": 1, "Gbyte": 1e3}[u]
    scale = {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1, "us": 1, "msecond": 1e3, "ms": 1e3}
    if u in scale: v *= scale[u]
    m[r[name]] = v
g = lambda k: m.get(k, float("nan"))
print(f"| {sys.argv[1]} | {sys.argv[2]} | {g('gpu__time_duration.sum'):.1f} | {g('dram__bytes_read.sum'):.0f} | "
      f"{g('dram__bytes_write.sum'):.0f} | {g('lts__t_sector_hit_rate.pct'):.1f} | "
      f"{g('dram__throughput.avg.pct_of_peak_sustained_elapsed'):.1f} | {g('sm__throughput.avg.pct_of_peak_sustained_elapsed'):.1f} |")
PY
  done
done
