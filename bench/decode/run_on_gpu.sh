#!/usr/bin/env bash
# One GPU session for the KV-cache work: build (CUDA, sm_90a) the library, the
# KV-cache tests and the decode benchmark; run the GPU tests, compute-sanitizer
# memcheck on a small decode case, the benchmark and torch SDPA; write logs,
# JSON and a table under $OUT (default ./results).
#   FLASHPP_GIT_SHA=<sha> bench/decode/run_on_gpu.sh [--quick]
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-results}
mkdir -p "$out"
quick=${1:-}
build=build-decode-gpu
jobs=$(nproc)

# GoogleTest: the system's, else built from a source tree (/usr/src/googletest
# or one carried in .kv-gtest).
gtest_args=()
if ! ls /usr/lib/*/cmake/GTest/GTestConfig.cmake /usr/lib/cmake/GTest/GTestConfig.cmake >/dev/null 2>&1; then
  for src in /usr/src/googletest .kv-gtest; do
    [ -f "$src/CMakeLists.txt" ] || continue
    cmake -S "$src" -B /tmp/gtest-build -G Ninja -DCMAKE_INSTALL_PREFIX=/tmp/gtest -DBUILD_GMOCK=OFF >/dev/null &&
      cmake --build /tmp/gtest-build -j "$jobs" >/dev/null && cmake --install /tmp/gtest-build >/dev/null && break
  done
  gtest_args=(-DCMAKE_PREFIX_PATH=/tmp/gtest)
fi

echo "== build ==" | tee "$out/build.log"
cmake -S . -B $build -G Ninja -DCMAKE_BUILD_TYPE=Release -DFLASHPP_CUDA=ON -DFLASHPP_BUILD_EXAMPLES=OFF \
  -DFLASHPP_CUDA_GENCODE="-gencode=arch=compute_90a,code=sm_90a" \
  -DCMAKE_PROJECT_INCLUDE="$PWD/tests/kvcache/wire_up.cmake" "${gtest_args[@]}" >>"$out/build.log" 2>&1
cmake --build $build -j "$jobs" --target test_kvcache_cuda test_kvcache_cpu flashpp_decode_bench >>"$out/build.log" 2>&1
build_rc=$?
tail -5 "$out/build.log"
[ $build_rc -ne 0 ] && { grep -E "error|Error" "$out/build.log" | head -40; exit 1; }
find $build -name test_kvcache_cuda -o -name flashpp_decode_bench | head

t=$(find $build -name test_kvcache_cuda -type f | head -1)
b=$(find $build -name flashpp_decode_bench -type f | head -1)
c=$(find $build -name test_kvcache_cpu -type f | head -1)

echo "== GPU tests ==" 
$t > "$out/test_cuda.log" 2>&1; test_rc=$?
grep -E "^\[  (PASSED|FAILED|  SKIPPED) |tests? ran|FAILED TEST" "$out/test_cuda.log" | tail -15
grep -B3 -A12 "Failure" "$out/test_cuda.log" | head -60
$c > "$out/test_cpu.log" 2>&1; tail -2 "$out/test_cpu.log"

echo "== compute-sanitizer memcheck (small decode cases) =="
compute-sanitizer --tool memcheck --error-exitcode 3 $t \
  --gtest_filter='Fixed/KVCacheCudaEdge.*page1_shuffled_bf16:Fixed/KVCacheCudaEdge.*page256_bf16:*KVCacheCuda.DeviceValidationReportsBadTables:PageSizes/KVCacheCudaPages.DecodeShapes/page16_sq4' \
  > "$out/memcheck.log" 2>&1; echo "memcheck rc=$?"; tail -4 "$out/memcheck.log"

echo "== decode benchmark =="
$b $quick > "$out/ours.jsonl" 2> "$out/bench.log"; echo "bench rc=$?"
python3 bench/decode/torch_sdpa.py $quick > "$out/torch.jsonl" 2> "$out/torch.log"; echo "torch rc=$?"; tail -2 "$out/torch.log"
python3 bench/decode/merge_results.py "$out/ours.jsonl" "$out/torch.jsonl" "$out/decode-$(date +%F).json" \
  "${FLASHPP_GIT_SHA:-unknown}" > "$out/table.md"
cat "$out/bench.log"
cat "$out/table.md"
exit $test_rc
