#!/usr/bin/env bash
# On a GPU machine: build flashpp with the CUDA backend (all cores, Ninja), run the
# GPU tests (CTest label "gpu"), compute-sanitizer memcheck and racecheck on a small
# dedicated binary, and a short benchmark of our kernels beside PyTorch's SDPA
# backends; then print a summary table last. Full logs and JSON go to $OUT
# (default results/device); at most 8 files, so the tool that fetches them gets all.
#   FLASHPP_DEVICE_STEPS  subset of "build test sanitize demo bench grid tiles bwdtiles fa2lazy fa2full knobs sched seeds pytest profile suite decode probe"
#                         (default: build test sanitize demo bench profile)
#   FLASHPP_DECODE_ARGS   arguments of the decode step's flashpp_decode_bench (default --quick)
#   FLASHPP_PROBE         the probe step runs these scripts, in order (default scripts/device_probe.sh)
#                         with BUILD, OUT and PYTHONPATH set; their output is probe.txt
#   FLASHPP_DEVICE_TUNING=1 builds the tile variants of the Hopper forward (FLASHPP_SM90_TUNING)
#                         and of the FA2-class kernels (FLASHPP_SM80_TUNING; =sm80: only these); the tiles
#                         and bwdtiles steps test, sanitize and time them
#   tiles                 the Hopper forward with each tile variant forced (FLASHPP_SM90_TILES; a default
#                         build has the ones its rule picks): forward tests (FLASHPP_TILES_TEST=0 skips them),
#                         then the forward grid per variant, FLASHPP_TILES_ROUNDS interleaved rounds (default 1),
#                         FLASHPP_TILES_HDIM for one head dim only
#   fa2full               (tuning build) the FA2-class forward with checked K/V copies (FLASHPP_SM80_FWD_FULL_COPY=0)
#                         against the default full-tile copies, timed on the forward grid
#   fa2lazy               (tuning build) the FA2-class forward with the lazy O rescale forced
#                         (FLASHPP_SM80_FWD_LAZY=1; the rule takes it at d 128): forward tests, memcheck/racecheck with it
#                         forced, then both timed on the forward grid, interleaved
#   knobs                 the Hopper forward's runtime knobs (FLASHPP_SM90_O_STORE=tma: TMA-store
#                         epilogue; FLASHPP_SM90_ORDER=snake; FLASHPP_SM90_Q_BUFFERS=2;
#                         FLASHPP_SM90_SCHEDULE=dynamic for varlen): forward and PTX tests and
#                         the sanitizers with all on (every tile variant in a tuning build), then
#                         all off / each alone / all / the default rule timed on the forward grid
#                         and on varlen batches, in two interleaved rounds
#   sched                 the Hopper forward's schedule for masked calls, same binary: the static
#                         order (FLASHPP_SM90_SCHEDULE=static), dynamic without head groups
#                         (FLASHPP_SM90_HEAD_GROUP=0) and the default, on the forward grid and
#                         the varlen batches
#   FLASHPP_PROFILE_ARGS  bench arguments of the profile step, ";" between sets (default --quick);
#   FLASHPP_PROFILE_KERNELS kernel name patterns it profiles (default "fwd_kernel bwd_kernel")
#   FLASHPP_PYTEST_ARGS   arguments of the pytest step (default: tests/python)
#   seeds                 the forward and backward tests' sampled cases over seeds 1..FLASHPP_SEEDS (default 16),
#                         failing cases with their seed in seeds.log; FLASHPP_SEEDS_BWD_ENV="VAR=value ..."
#                         runs the backward's sampled and edge cases over the seeds once more with it
#   FLASHPP_SANITIZE_TOOLS compute-sanitizer tools of the sanitize step (default: memcheck racecheck synccheck)
#   FLASHPP_GRID_PEERS=0  the grid step times ours only (no torch peers)
#   FLASHPP_GRID_COOL_MS  idle before each timed pass of the grid step, ours and the peers'
#                         alike (default 250; 0 runs the passes back to back)
#   FLASHPP_SUITE_ARGS    arguments of `python3 -m bench.suite run` (default --quick)
#   FLASHPP_TEST_REGEX    ctest -R filter for the test step (default: every gpu test)
#   FLASHPP_BENCH_QUICK=1 one benchmark configuration only
#   FLASHPP_DEVICE_BUDGET seconds for the whole script (default 560): later steps
#                         shrink their timeouts so the summary always prints
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/device_cmake.sh
out=${OUT:-$PWD/results/device}
mkdir -p "$out"
build=${FLASHPP_DEVICE_BUILD:-build-device}
jobs=$(nproc)
steps=${FLASHPP_DEVICE_STEPS:-build test sanitize demo bench profile}
summary=()
note() { summary+=("$(printf '| %-10s | %s |' "$1" "$2")"); }
has_step() { [[ " $steps " == *" $1 "* ]]; }
start=$(date +%s)
budget=${FLASHPP_DEVICE_BUDGET:-560}
# Seconds a step may take: what it asks for, capped by what is left (minus a margin).
allow() {
  local left=$((budget - ($(date +%s) - start) - 20))
  ((left < $1)) && echo $((left > 0 ? left : 1)) || echo "$1"
}

# A setting forced through the environment, checked before it is timed:
# test_forced LABEL LOG TEST [VAR=VALUE...]: a test binary with it, noted, output to LOG;
# sanitize_forced LABEL LOG DESC "TOOLS" [VAR=VALUE...]: the sanitize cases under each tool.
test_forced() {
  local label=$1 log=$2 bin=$3
  shift 3
  env "$@" timeout "$(allow 150)" "$build/tests/cuda/$bin" --gtest_brief=1 >>"$log" 2>&1
  note "$label" "rc $?; $(grep -E "PASSED|FAILED" "$log" | tail -2 | tr '\n' ' ')"
}
sanitize_forced() {
  local label=$1 log=$2 desc=$3 tools=$4 tool rc
  shift 4
  for tool in $tools; do
    local tmp="/tmp/flashpp_${label// /_}_$tool.log"
    env "$@" timeout "$(allow 150)" compute-sanitizer --tool "$tool" --error-exitcode 9 \
      "$build/tests/cuda/flashpp_cuda_sanitize_cases" >"$tmp" 2>&1
    rc=$?
    note "$label $tool" "rc $rc; $(grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$tmp" | tail -1)"
    { echo "==== $tool, $desc (rc $rc) ===="; cat "$tmp"; } >>"$log"
  done
}

echo "== device =="
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv 2>&1 | tee "$out/summary.txt"

if has_step build; then
  echo "== build =="
  t0=$(date +%s)
  { device_cmake_configure . "$build" -DFLASHPP_BUILD_BENCH=ON -DFLASHPP_BUILD_EXAMPLES=ON \
      -DFLASHPP_BUILD_PYTHON=${FLASHPP_DEVICE_PYTHON:-ON} &&
    cmake --build "$build" -j "$jobs" -- -k 0; } >"$out/build.log" 2>&1
  rc=$?
  t1=$(date +%s)
  cp "$build/.ninja_log" "$out/ninja_log.txt" 2>/dev/null
  archs=$(grep -m1 '^FLASHPP_CUDA_GENCODE' "$build/CMakeCache.txt" 2>/dev/null | grep -o 'code=sm_[0-9a]*' | tr '\n' ' ')
  if [ $rc -eq 0 ]; then note build "ok in $((t1 - t0)) s ($jobs jobs; ${archs% })"; else
    note build "FAILED (rc $rc), see build.log"; tail -40 "$out/build.log"; fi
fi

if has_step test; then
  echo "== GPU tests =="
  args=(-L gpu)
  [ -n "${FLASHPP_TEST_REGEX:-}" ] && args=(-R "$FLASHPP_TEST_REGEX")
  # The whole gpu label took 310 s for 1,134 tests on an H100 at -j 8 (2026-12-08);
  # the rounds., tiles1. and tiles2. copies of the forward cases added 495 since.
  # Most of a GPU test's time is the host's: the fp64 and storage-precision
  # references (OpenMP) and the inputs. Each of the 8 test processes gets its share
  # of the cores: with OpenMP's default of one thread per core, 8 processes ran
  # 8 x 16 threads on 16 cores (CudaForward.EpilogueRowSlices: 74 s there, against
  # ~6 s of reference work on 2 idle cores).
  omp=$(( $(nproc) / 8 )); [ "$omp" -ge 1 ] || omp=1
  OMP_NUM_THREADS=${OMP_NUM_THREADS:-$omp} timeout "$(allow 450)" ctest --test-dir "$build" "${args[@]}" \
    --output-on-failure -j 8 --timeout 240 >"$out/ctest.log" 2>&1
  rc=$?
  grep -E "tests passed|Failed|\*\*\*|Not Run" "$out/ctest.log" | tail -25
  line=$(grep -E "tests passed" "$out/ctest.log" | tail -1)
  note tests "${line:-no summary (rc $rc)}"
  grep -q "Skipped" "$out/ctest.log" && note skipped "$(grep -c '\*\*\*Skipped\|Skipped ' "$out/ctest.log") tests, see ctest.log"
fi

if has_step sanitize; then
  echo "== compute-sanitizer =="
  bin="$build/tests/cuda/flashpp_cuda_sanitize_cases"
  for tool in ${FLASHPP_SANITIZE_TOOLS:-memcheck racecheck synccheck}; do
    log="/tmp/flashpp_sanitize_$tool.log"
    timeout "$(allow 150)" compute-sanitizer --tool "$tool" --error-exitcode 9 "$bin" >"$log" 2>&1
    rc=$?
    res=$(grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$log" | tail -1)
    cases=$(grep -E "sanitize cases" "$log" | tail -1)
    note "$tool" "rc $rc; ${res:-no summary}; ${cases:-}"
    { echo "==== $tool (rc $rc) ===="; cat "$log"; } >>"$out/sanitize.log"
    tail -3 "$log"
  done
fi

if has_step demo; then
  echo "== demo (the README's main job) =="
  timeout "$(allow 180)" "$build/examples/flashpp_demo" 2>&1 | tee -a "$out/summary.txt"
  note demo "rc ${PIPESTATUS[0]}"
fi

if has_step bench; then
  echo "== benchmark =="
  q=()
  [ "${FLASHPP_BENCH_QUICK:-0}" = 1 ] && q=(--quick)
  timeout "$(allow 120)" "$build/tests/cuda/flashpp_cuda_bench" --json "$out/bench_flashpp.json" "${q[@]}" 2>&1 | tee -a "$out/summary.txt"
  note bench "flashpp rc ${PIPESTATUS[0]}"
  PYTHONUNBUFFERED=1 timeout "$(allow 150)" python3 scripts/peer_bench.py --json "$out/bench_peers.json" \
    --ours "$out/bench_flashpp.json" --table /tmp/flashpp_bench_table.md "${q[@]}" >>"$out/summary.txt" 2>&1
  note peers "rc $?"
fi

if has_step grid; then
  echo "== benchmark grid beside the peers (hdim 64/128/256 x N 512..16K x causal) =="
  # SM clock and power every 100 ms while the grid runs (ours, then the peers), so a
  # ratio can be read beside the clocks each side ran at.
  nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv,noheader \
    -lms 100 >"$out/grid_clocks.csv" 2>/dev/null &
  clocks_pid=$!
  date +"ours start %Y/%m/%d %H:%M:%S.%3N" >"$out/grid_marks.txt"
  cool=(--cool-ms "${FLASHPP_GRID_COOL_MS:-250}")
  timeout "$(allow 200)" "$build/tests/cuda/flashpp_cuda_bench" --grid "${cool[@]}" --json "$out/grid_flashpp.json" \
    >"$out/grid.log" 2>&1
  note grid "flashpp rc $?"
  date +"ours end %Y/%m/%d %H:%M:%S.%3N" >>"$out/grid_marks.txt"
  peers=(--json "$out/grid_peers.json")
  [ "${FLASHPP_GRID_PEERS:-1}" = 0 ] && peers=(--no-peers)
  PYTHONUNBUFFERED=1 timeout "$(allow 200)" python3 scripts/peer_bench.py --grid "${cool[@]}" "${peers[@]}" \
    --ours "$out/grid_flashpp.json" --table "$out/grid_table.md" >>"$out/grid.log" 2>&1
  note "grid peers" "rc $?; grid_table.md"
  date +"peers end %Y/%m/%d %H:%M:%S.%3N" >>"$out/grid_marks.txt"
  kill "$clocks_pid" 2>/dev/null
  cat "$out/grid_table.md" 2>/dev/null | tee -a "$out/summary.txt"
fi

if has_step tiles; then
  echo "== Hopper forward, forced tile variants =="
  # A default build has the variants the rule picks (d 64: 0 and 2; d 128 and 256: 0 and
  # 1), so their thresholds can be re-checked; a tuning build has them all. Head dims
  # without a forced variant run the rule's. Correctness first (FLASHPP_TILES_TEST=0
  # skips it), then the forward grid with each variant forced, in interleaved rounds.
  : >"$out/tiles.log"
  if [ "${FLASHPP_TILES_TEST:-1}" != 0 ]; then
    for v in 0 1 2; do test_forced "tiles test $v" "$out/tiles.log" test_cuda_forward FLASHPP_SM90_TILES=$v; done
  fi
  tile_rounds=${FLASHPP_TILES_ROUNDS:-1}
  tile_args=()
  [ -n "${FLASHPP_TILES_HDIM:-}" ] && tile_args=(--hdim "$FLASHPP_TILES_HDIM")
  for round in $(seq 1 "$tile_rounds"); do
    # Each round starts one variant later, so none is always timed first.
    for k in 0 1 2; do
      v=$(((k + round - 1) % 3))
      FLASHPP_SM90_TILES=$v timeout "$(allow 100)" "$build/tests/cuda/flashpp_cuda_bench" --grid --fwd-only --reps 10 \
        "${tile_args[@]}" --cool-ms "${FLASHPP_GRID_COOL_MS:-250}" --json "$out/tiles${v}_$round.json" \
        >>"$out/tiles.log" 2>&1
      note "tiles $v round $round" "rc $?"
    done
  done
  python3 - "$out" "$tile_rounds" <<'PY' | tee -a "$out/summary.txt"
import json, os, statistics, sys
d, rounds = sys.argv[1], int(sys.argv[2])
runs = [[json.load(open(os.path.join(d, f"tiles{v}_{r}.json"))) for r in range(1, rounds + 1)] for v in range(3)]
med = lambda v, i: statistics.median(r[i]["fwd_tflops"] for r in runs[v])
print("| hdim | N | causal | v0 TF/s | v1 TF/s | v2 TF/s | v1/v0 | v2/v0 |")
print("|---|---|---|---|---|---|---|---|")
for i, x in enumerate(runs[0][0]):
    a, b, c = med(0, i), med(1, i), med(2, i)
    print(f"| {x['hdim']} | {x['seqlen']} | {x['causal']} | {a:.1f} | {b:.1f} | {c:.1f} | {b / a:.3f} | {c / a:.3f} |")
PY
  (cd "$out" && tar czf tiles_json.tar.gz tiles?_*.json && rm -f tiles?_*.json)
fi

if has_step bwdtiles; then
  echo "== FA2-class backward, forced tile variants (tuning build) =="
  # Variant 1 (the 64-row step) exists for head dim 64 only (src/cuda/sm80/tile_configs.hpp): the
  # backward cases and the sanitizer cases with it forced, then both variants timed
  # back to back on the grid's head dim 64 rows.
  : >"$out/bwdtiles.log"
  test_forced "bwd tiles test" "$out/bwdtiles.log" test_cuda_backward FLASHPP_SM80_BWD_TILES=1
  sanitize_forced "bwd tiles" "$out/bwdtiles.log" "variant 1" "memcheck racecheck" FLASHPP_SM80_BWD_TILES=1
  for v in 0 1 0 1; do
    FLASHPP_SM80_BWD_TILES=$v timeout "$(allow 100)" "$build/tests/cuda/flashpp_cuda_bench" --grid --bwd-only \
      --hdim 64 --reps 10 --json "$out/bwdtiles$v.json" >>"$out/bwdtiles.log" 2>&1
    note "bwd tiles $v" "rc $?"
  done
  python3 - "$out"/bwdtiles0.json "$out"/bwdtiles1.json <<'PY' | tee -a "$out/summary.txt"
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:3])
print("| hdim | N | causal | v0 bwd TF/s | v1 bwd TF/s | v1/v0 |")
print("|---|---|---|---|---|---|")
for x, y in zip(a, b):
    print(f"| {x['hdim']} | {x['seqlen']} | {x['causal']} | {x['bwd_tflops']:.1f} | {y['bwd_tflops']:.1f} | "
          f"{y['bwd_tflops'] / x['bwd_tflops']:.3f} |")
PY
fi

# time_fa2_forced PREFIX VAR "BENCH ARGS": the FA2-class forward with VAR=0 and VAR=1,
# two interleaved rounds, then one table of medians (VAR=1 over VAR=0).
time_fa2_forced() {
  local prefix=$1 var=$2 args=$3 round v
  for round in 1 2; do
    for v in 0 1; do
      # shellcheck disable=SC2086
      env FLASHPP_CUDA_FORWARD_FAMILY=sm80 "$var=$v" timeout "$(allow 100)" "$build/tests/cuda/flashpp_cuda_bench" \
        --grid --fwd-only $args --reps 10 --json "$out/${prefix}${v}_$round.json" >>"$out/$prefix.log" 2>&1
      note "$prefix $v $round" "rc $?"
    done
  done
  python3 - "$out" "$prefix" "$var" <<'PY' | tee -a "$out/summary.txt"
import json, os, statistics, sys
d, prefix, var = sys.argv[1:4]
runs = {z: [json.load(open(os.path.join(d, f"{prefix}{z}_{r}.json"))) for r in (1, 2)
            if os.path.exists(os.path.join(d, f"{prefix}{z}_{r}.json"))] for z in (0, 1)}
print(f"\n{prefix}: {var}=1 over {var}=0\n")
print(f"| hdim | N | causal | {var}=0 TF/s | {var}=1 TF/s | ratio |")
print("|---|---|---|---|---|---|")
for i, row in enumerate(runs[0][0]):
    a = statistics.median(r[i]["fwd_tflops"] for r in runs[0])
    b = statistics.median(r[i]["fwd_tflops"] for r in runs[1]) if runs[1] else float("nan")
    print(f"| {row['hdim']} | {row['seqlen']} | {row['causal']} | {a:.1f} | {b:.1f} | {b / a:.3f} |")
PY
  (cd "$out" && tar czf "${prefix}_json.tar.gz" "$prefix"?_?.json && rm -f "$prefix"?_?.json)
}

if has_step fa2lazy; then
  echo "== FA2-class forward, lazy O rescale (tuning build) =="
  : >"$out/fa2lazy.log"
  fa2=(FLASHPP_CUDA_FORWARD_FAMILY=sm80)
  test_forced "fa2 lazy test" "$out/fa2lazy.log" test_cuda_forward "${fa2[@]}" FLASHPP_SM80_FWD_LAZY=1
  sanitize_forced "fa2 lazy" "$out/fa2lazy.log" lazy "memcheck racecheck" "${fa2[@]}" FLASHPP_SM80_FWD_LAZY=1
  time_fa2_forced fa2lazy FLASHPP_SM80_FWD_LAZY ""
fi

if has_step fa2full; then
  # The FA2-class forward's full-tile K/V copies (fwd_full_tile_copies, on by default; the
  # test step ran them) against the checked copies, on the whole forward grid.
  echo "== FA2-class forward, full-tile K/V copies on/off (tuning build) =="
  : >"$out/fa2full.log"
  time_fa2_forced fa2full FLASHPP_SM80_FWD_FULL_COPY ""
fi

all_knobs="FLASHPP_SM90_O_STORE=tma FLASHPP_SM90_ORDER=snake FLASHPP_SM90_Q_BUFFERS=2 FLASHPP_SM90_SCHEDULE=dynamic"
# Same binary, knobs by environment, two interleaved rounds. "off" forces every knob
# off, each other entry turns one on over it, "default" is the launcher's rule.
off="FLASHPP_SM90_O_STORE=direct FLASHPP_SM90_ORDER=plain FLASHPP_SM90_Q_BUFFERS=1 FLASHPP_SM90_SCHEDULE=static"
declare -A knob_env=([off]="$off" [tma]="$off FLASHPP_SM90_O_STORE=tma" [snake]="$off FLASHPP_SM90_ORDER=snake"
                     [q2]="$off FLASHPP_SM90_Q_BUFFERS=2" [dynamic]="$off FLASHPP_SM90_SCHEDULE=dynamic"
                     [all]="$all_knobs" [default]=""
                     [static]="FLASHPP_SM90_SCHEDULE=static" [nogroup]="FLASHPP_SM90_HEAD_GROUP=0")
# time_knobs PREFIX "BENCH ARGS" BASE NAME...: the runs, then one table of each NAME over BASE.
time_knobs() {
  local prefix=$1 args=$2
  shift 2
  for round in 1 2; do
    for k in "$@"; do
      env ${knob_env[$k]} timeout "$(allow 60)" "$build/tests/cuda/flashpp_cuda_bench" $args --reps 10 \
        --json "$out/${prefix}_${k}_$round.json" >>"$out/knobs.log" 2>&1
      note "$prefix $k $round" "rc $?"
    done
  done
  python3 - "$out" "$prefix" "$@" <<'PY' | tee -a "$out/summary.txt"
import json, os, statistics, sys
d, prefix, names = sys.argv[1], sys.argv[2], sys.argv[3:]
runs = {n: [json.load(open(os.path.join(d, f"{prefix}_{n}_{r}.json"))) for r in (1, 2)
          if os.path.exists(os.path.join(d, f"{prefix}_{n}_{r}.json"))] for n in names}
base = names[0]
others = names[1:]
print(f"\n{prefix}\n")
print(f"| hdim | N | causal | {base} TF/s | " + " | ".join(f"{n}/{base}" for n in others) + " |")
print("|---|---|---|---|" + "---|" * len(others))
for i, row in enumerate(runs[base][0]):
  med = {n: statistics.median(r[i]["fwd_tflops"] for r in runs[n]) for n in names if runs[n]}
  cells = " | ".join(f"{med[n] / med[base]:.3f}" if n in med else "-" for n in others)
  print(f"| {row['hdim']} | {row['seqlen']} | {row['causal']} | {med[base]:.1f} | {cells} |")
PY
}
if has_step sched; then
  echo "== Hopper forward schedule: static order / dynamic without head groups / default (dynamic, groups) =="
  : >"$out/knobs.log"
  # Correctness with small head groups forced (the tests' shapes are too small for
  # the rule to cut any): the forward cases, then memcheck and racecheck.
  test_forced "groups test" "$out/knobs.log" test_cuda_forward FLASHPP_SM90_HEAD_GROUP=3
  sanitize_forced groups "$out/knobs.log" "head groups of 2" "memcheck racecheck" FLASHPP_SM90_HEAD_GROUP=2
  time_knobs sched_grid "--grid --fwd-only" static nogroup default
  time_knobs sched_varlen "--varlen" static nogroup default
  (cd "$out" && tar czf sched_json.tar.gz sched_*_?.json && rm -f sched_*_?.json)
fi

if has_step knobs; then
  echo "== Hopper forward knobs: TMA-store epilogue, snake tile order, two Q buffers =="
  : >"$out/knobs.log"
  variants=default
  [ "${FLASHPP_DEVICE_TUNING:-0}" = 1 ] && variants="0 1 2"
  for v in $variants; do
    tiles=(); [ "$v" != default ] && tiles=(FLASHPP_SM90_TILES=$v)
    # shellcheck disable=SC2086
    test_forced "knobs test $v" "$out/knobs.log" test_cuda_forward "${tiles[@]}" $all_knobs
  done
  timeout "$(allow 60)" "$build/tests/cuda/test_sm90_ptx" --gtest_brief=1 >>"$out/knobs.log" 2>&1
  note "sm90 ptx" "rc $?"
  # shellcheck disable=SC2086
  sanitize_forced knobs "$out/knobs.log" "knobs on" "${FLASHPP_SANITIZE_TOOLS:-memcheck racecheck synccheck}" $all_knobs
  time_knobs knobs_grid "--grid --fwd-only" off tma snake q2 all default
  time_knobs knobs_varlen "--varlen" off dynamic all default
  (cd "$out" && tar czf knobs_json.tar.gz knobs_*_?.json && rm -f knobs_*_?.json)
fi

if has_step seeds; then
  # The sampled (random) cases of the forward and backward tests over fixed seeds:
  # every run of the test step draws new cases, so a rare numerical failure shows up
  # here with its seed instead of once in a while in someone's run.
  echo "== sampled cases over fixed seeds =="
  : >"$out/seeds.log"
  for bin in test_cuda_backward test_cuda_forward; do
    fails=0 runs=0
    for s in $(seq 1 "${FLASHPP_SEEDS:-16}"); do
      runs=$((runs + 1))
      if ! FLASHPP_TEST_SEED=$s timeout "$(allow 60)" "$build/tests/cuda/$bin" --gtest_filter='Sampled/*' \
        --gtest_brief=1 >/tmp/flashpp_seed.log 2>&1; then
        fails=$((fails + 1))
        { echo "== $bin seed $s"; grep -E "^FAIL" /tmp/flashpp_seed.log | head -3; } >>"$out/seeds.log"
      fi
    done
    note "seeds $bin" "$fails of $runs seeds with a failing sampled case; seeds.log"
  done
  if [ -n "${FLASHPP_SEEDS_BWD_ENV:-}" ]; then
    # The backward's sampled and edge cases again, with one more environment setting.
    fails=0 runs=0
    for s in $(seq 1 "${FLASHPP_SEEDS:-16}"); do
      runs=$((runs + 1))
      if ! env $FLASHPP_SEEDS_BWD_ENV FLASHPP_TEST_SEED=$s timeout "$(allow 60)" "$build/tests/cuda/test_cuda_backward" \
        --gtest_filter='Sampled/*:*Edge*' --gtest_brief=1 >/tmp/flashpp_seed.log 2>&1; then
        fails=$((fails + 1))
        { echo "== backward with $FLASHPP_SEEDS_BWD_ENV seed $s"; grep -E "^FAIL" /tmp/flashpp_seed.log | head -3; } \
          >>"$out/seeds.log"
      fi
    done
    note "seeds bwd + $FLASHPP_SEEDS_BWD_ENV" "$fails of $runs seeds with a failing case; seeds.log"
  fi
fi

if has_step pytest; then
  echo "== Python tests (the extension of this build, on the GPU) =="
  pkg=/tmp/flashpp_py
  rm -rf "$pkg" && mkdir -p "$pkg" && cp -r python/flashpp "$pkg/" &&
    cp "$build"/python/_core*.so "$pkg/flashpp/" 2>/dev/null
  read -r -a pargs <<<"${FLASHPP_PYTEST_ARGS:-tests/python}"
  PYTHONPATH="$pkg" timeout "$(allow 300)" python3 -m pytest -q -rs "${pargs[@]}" >"$out/pytest.log" 2>&1
  rc=$?
  note pytest "rc $rc; $(tail -1 "$out/pytest.log")"
  tail -15 "$out/pytest.log"
fi

if has_step profile; then
  # One launch of each named kernel with the sections that say where time goes, once
  # per bench argument set (separated by ";").
  IFS=';' read -r -a pargs <<<"${FLASHPP_PROFILE_ARGS:---quick}"
  for a in "${pargs[@]}"; do
    for k in ${FLASHPP_PROFILE_KERNELS:-fwd_kernel bwd_kernel}; do
      echo "== profile (ncu) $k, bench $a ==" | tee -a "$out/profile.txt"
      timeout "$(allow 90)" ncu --clock-control none -k "regex:${k}" -c 1 --section SpeedOfLight \
        --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables \
        --section SchedulerStats --section WarpStateStats --section Occupancy --section LaunchStats \
        "$build/tests/cuda/flashpp_cuda_bench" $a --reps 1 >>"$out/profile.txt" 2>&1
      note "ncu $k ($a)" "rc $?"
    done
  done
fi

if has_step suite; then
  echo "== benchmark suite =="
  # The suite finds the Python extension of this build by itself (build*/python/_core*.so).
  read -r -a sargs <<<"${FLASHPP_SUITE_ARGS:---quick}"
  PYTHONUNBUFFERED=1 timeout "$(allow 480)" python3 -m bench.suite run "${sargs[@]}" --out /tmp/flashpp_suite \
    --bundle "$out/suite.tar.gz" >"$out/suite.log" 2>&1
  note suite "rc $?; results in suite.tar.gz"
  tail -30 "$out/suite.log"
fi

if has_step decode; then
  echo "== decode benchmark (CUDA graphs) =="
  read -r -a dargs <<<"${FLASHPP_DECODE_ARGS---quick}"
  timeout "$(allow 300)" "$build/bench/decode/flashpp_decode_bench" "${dargs[@]}" >"$out/decode.jsonl" \
    2> >(tee -a "$out/summary.txt" >&2)
  note decode "rc $?; decode.jsonl"
  # torch SDPA (cuDNN, flash) on the same shapes, same run; merged into decode.json.
  targs=()
  [[ " ${dargs[*]} " == *" --quick "* ]] && targs=(--quick)
  timeout "$(allow 200)" python3 bench/decode/torch_sdpa.py "${targs[@]}" >"$out/decode_torch.jsonl" 2>"$out/decode_torch.log"
  note "decode sdpa" "rc $?"
  python3 bench/decode/merge_results.py "$out/decode.jsonl" "$out/decode_torch.jsonl" "$out/decode.json" \
    "${FLASHPP_SOURCE_SHA:-unknown}" >>"$out/summary.txt" 2>&1
  rm -f "$out/decode.jsonl" "$out/decode_torch.jsonl"
fi

if has_step probe; then
  echo "== probe =="
  pkg=/tmp/flashpp_py
  rm -rf "$pkg" && mkdir -p "$pkg" && cp -r python/flashpp "$pkg/" && cp "$build"/python/_core*.so "$pkg/flashpp/" 2>/dev/null
  for script in ${FLASHPP_PROBE:-scripts/device_probe.sh}; do
    echo "##### $script" >>"$out/probe.txt"
    BUILD="$build" OUT="$out" PYTHONPATH="$pkg" timeout "$(allow 400)" bash "$script" >>"$out/probe.txt" 2>&1
    note probe "$script rc $?; probe.txt"
  done
fi

{
  echo
  echo "== summary =="
  echo "| step | result |"
  echo "|---|---|"
  printf '%s\n' "${summary[@]}"
  [ -f /tmp/flashpp_bench_table.md ] && { echo; cat /tmp/flashpp_bench_table.md; }
} | tee -a "$out/summary.txt"

# At most 8 files come back: keep the summary and JSON results apart, bundle the logs.
(cd "$out" && logs=$(ls *.log *.txt 2>/dev/null | grep -v '^summary.txt$') &&
  [ -n "$logs" ] && tar czf logs.tar.gz $logs && rm -f $logs)
