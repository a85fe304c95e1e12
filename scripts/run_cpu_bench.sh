#!/usr/bin/env bash
# Runs the CPU benchmark and stores its JSON under bench/results/ together
# with the commit, the CPU model and the compiler.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DFLASHPP_BUILD_BENCH=ON >/dev/null
cmake --build build -j "$(nproc)" --target flashpp_cpu_bench
out=bench/results/cpu-$(date -u +%Y-%m-%d).json
raw=$(mktemp)
./build/bench/flashpp_cpu_bench --benchmark_out="$raw" --benchmark_out_format=json "$@"
python3 - "$raw" "$out" <<'PY'
import json, subprocess, sys, platform
raw, out = sys.argv[1], sys.argv[2]
data = json.load(open(raw))
sha = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
dirty = bool(subprocess.run(["git", "status", "--porcelain", "--", "src", "include"], capture_output=True, text=True).stdout.strip())
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), platform.processor())
cxx = subprocess.run(["c++", "--version"], capture_output=True, text=True).stdout.splitlines()[0]
rows = [{"name": b["name"], "label": b.get("label", ""), "real_time_ms": b["real_time"],
         "gflops": b.get("GFLOPs", 0)}
        for b in data["benchmarks"]]
json.dump({"sha": sha + ("-dirty" if dirty else ""), "date": data["context"]["date"], "cpu": cpu,
           "cores": data["context"]["num_cpus"], "compiler": cxx, "backend": "flashpp cpu (fp32, OpenMP)",
           "results": rows}, open(out, "w"), indent=1)
print("wrote", out)
for r in rows:
    print(f'{r["name"]:<70} {r["real_time_ms"]:10.2f} ms {r["gflops"]:8.1f} GFLOP/s')
PY
