#!/usr/bin/env bash
# Builds flashpp and runs every test this machine can run: the C++ suite
# (CTest; GPU tests skip with a reason where there is no GPU), a bounded
# libFuzzer run of the argument validation, the Python tests, and the benchmark
# suite's own tests.
#   FLASHPP_FUZZ_SECONDS (default 30), FLASHPP_JOBS (default: all cores)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
jobs=${FLASHPP_JOBS:-$(nproc)}
scripts/install_deps.sh

echo "== C++ build (CUDA backend built when nvcc is found) =="
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DFLASHPP_BUILD_BENCH=ON
cmake --build build -j "$jobs"

echo "== C++ tests =="
ctest --test-dir build --output-on-failure -j "$jobs"

if [ -f tests/fuzz/CMakeLists.txt ] && command -v clang++ >/dev/null; then
  echo "== fuzzing argument validation for ${FLASHPP_FUZZ_SECONDS:-30} s =="
  cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ \
    -DFLASHPP_CUDA=OFF -DFLASHPP_BUILD_FUZZ=ON -DFLASHPP_BUILD_TESTS=OFF -DFLASHPP_BUILD_BENCH=OFF \
    -DFLASHPP_BUILD_EXAMPLES=OFF
  cmake --build build-fuzz -j "$jobs" --target fuzz_validation
  mkdir -p build-fuzz/corpus
  ./build-fuzz/tests/fuzz/fuzz_validation -max_total_time="${FLASHPP_FUZZ_SECONDS:-30}" -print_final_stats=1 \
    build-fuzz/corpus
fi

if [ -f pyproject.toml ] && [ "${FLASHPP_SKIP_PYTHON:-0}" != 1 ]; then
  echo "== Python package + tests =="
  py=${PYTHON:-python3}
  # The CUDA kernels were already compiled (and tested) by the C++ build above;
  # the Python build here is CPU-only unless FLASHPP_PY_CUDA=ON.
  $py -m pip install -q --no-build-isolation -C cmake.define.FLASHPP_CUDA="${FLASHPP_PY_CUDA:-OFF}" \
    -C build-dir=build-python .
  (cd "$root/tests/python" && $py -m pytest -q -rs .)
  echo "== benchmark suite's own tests (fake backends, CPU) =="
  $py -m pytest -q -rs bench/suite/tests
fi
echo "== all tests passed =="
