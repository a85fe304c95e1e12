#!/usr/bin/env bash
# Builds flashpp and runs the main job: one forward + backward on the GPU when
# present (bf16, batch 4 x 4096 tokens, 16 heads, hdim 128), else on the CPU,
# printing time, GFLOP/s, error vs the fp64 reference and memory.
# Extra arguments go to the demo (see examples/demo.cpp), e.g. --cpu --causal.
set -euo pipefail
cd "$(dirname "$0")/.."
FLASHPP_SKIP_PYTHON=1 scripts/install_deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build build -j "${FLASHPP_JOBS:-$(nproc)}" --target flashpp_demo
./build/examples/flashpp_demo "$@"
