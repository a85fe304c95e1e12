#!/usr/bin/env bash
# One GPU session for the KV-cache work: build (CUDA, sm_90a) the decode-only
# project bench/decode/gpu (library + decode kernels, KV-cache tests, decode
# benchmark); run the GPU tests, compute-sanitizer memcheck on small decode
# cases, the benchmark and torch SDPA; write logs, JSON and a table under $OUT
# (default ./results).
#   FLASHPP_GIT_SHA=<sha> bench/decode/run_on_gpu.sh [--quick] [--no-torch] [--no-sweep]
# Each stage runs under a time limit (T_TESTS, T_MEMCHECK, T_BENCH seconds) so
# the benchmark always gets its turn.
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-results}
mkdir -p "$out"
bench_args=()
torch=1
for a in "$@"; do
  case $a in
    --no-torch) torch=0 ;;
    *) bench_args+=("$a") ;;
  esac
done
build=build-decode-gpu
jobs=$(nproc)

# GoogleTest: the system's, else built from a source tree (/usr/src/googletest,
# or one carried in build-deps/googletest or .kv-gtest).
gtest_args=()
if ! ls /usr/lib/*/cmake/GTest/GTestConfig.cmake /usr/lib/cmake/GTest/GTestConfig.cmake >/dev/null 2>&1; then
  for src in /usr/src/googletest build-deps/googletest .kv-gtest; do
    [ -f "$src/CMakeLists.txt" ] || continue
    cmake -S "$src" -B /tmp/gtest-build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=/tmp/gtest \
      -DBUILD_GMOCK=OFF >/dev/null &&
      cmake --build /tmp/gtest-build -j "$jobs" >/dev/null && cmake --install /tmp/gtest-build >/dev/null && break
  done
  gtest_args=(-DCMAKE_PREFIX_PATH=/tmp/gtest)
fi

echo "== build ==" | tee "$out/build.log"
start=$(date +%s)
cmake -S bench/decode/gpu -B $build -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DFLASHPP_CUDA_GENCODE="-gencode=arch=compute_90a,code=sm_90a" "${gtest_args[@]}" >>"$out/build.log" 2>&1
cmake --build $build -j "$jobs" --target test_kvcache_cuda test_kvcache_cpu flashpp_decode_bench >>"$out/build.log" 2>&1
build_rc=$?
echo "build rc=$build_rc in $(($(date +%s) - start)) s"
[ $build_rc -ne 0 ] && { grep -E "error|Error" "$out/build.log" | head -40; exit 1; }

t=$build/test_kvcache_cuda
b=$build/flashpp_decode_bench
c=$build/test_kvcache_cpu

echo "== GPU tests =="
start=$(date +%s)
# Four shards side by side (each case also runs the CPU reference and backend).
shards=4
for i in $(seq 0 $((shards - 1))); do
  GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$i timeout ${T_TESTS:-120} $t > "$out/test_cuda.$i.log" 2>&1 &
done
test_rc=0
for job in $(jobs -p); do wait $job || test_rc=1; done
cat "$out"/test_cuda.*.log > "$out/test_cuda.log" && rm -f "$out"/test_cuda.*.log
echo "tests rc=$test_rc in $(($(date +%s) - start)) s"
grep -E "^\[  (PASSED|FAILED|  SKIPPED) |tests? ran|FAILED TEST" "$out/test_cuda.log" | tail -15
grep -h "^\[  PASSED  \]" "$out/test_cuda.log" | awk '{n += $4} END {print "passed (all shards):", n}'
grep -B3 -A12 "Failure" "$out/test_cuda.log" | head -60
timeout 60 $c > "$out/test_cpu.log" 2>&1; tail -2 "$out/test_cpu.log"

echo "== compute-sanitizer memcheck (small decode cases) =="
start=$(date +%s)
timeout ${T_MEMCHECK:-90} compute-sanitizer --tool memcheck --error-exitcode 3 $t \
  --gtest_filter='Fixed/KVCacheCudaEdge.*page1_shuffled_bf16:Fixed/KVCacheCudaEdge.*page256_bf16:*KVCacheCuda.DeviceValidationReportsBadTables:PageSizes/KVCacheCudaPages.DecodeShapes/page16_sq4:*KVCacheCuda.LongSpansSmallPages:Splits/KVCacheCudaGraph.*' \
  > "$out/memcheck.log" 2>&1; echo "memcheck rc=$? in $(($(date +%s) - start)) s"; tail -4 "$out/memcheck.log"

echo "== decode benchmark =="
start=$(date +%s)
timeout ${T_BENCH:-150} $b "${bench_args[@]}" > "$out/ours.jsonl" 2> "$out/bench.log"; echo "bench rc=$? in $(($(date +%s) - start)) s"
if [ $torch -eq 1 ]; then
  python3 bench/decode/torch_sdpa.py "${bench_args[@]}" > "$out/torch.jsonl" 2> "$out/torch.log"
  echo "torch rc=$?"; tail -2 "$out/torch.log"
fi
python3 bench/decode/merge_results.py "$out/ours.jsonl" "$out/torch.jsonl" "$out/decode-$(date +%F).json" \
  "${FLASHPP_GIT_SHA:-unknown}" > "$out/table.md"
cat "$out/bench.log"
cat "$out/table.md"
exit $test_rc
