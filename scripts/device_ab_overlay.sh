#!/usr/bin/env bash
# Builds the benchmark of other source versions beside this tree's, for the same-run
# A/B of scripts/device_probe_ab.sh (run it first among the probes:
# FLASHPP_PROBE="scripts/device_ab_overlay.sh scripts/device_probe_ab.sh").
#
# Each version is an overlay: ab/<name>/ holds the files (paths from the repository
# root) that differ from this tree; scripts/ab_overlay.sh writes one from a git ref.
# The tree's sources are copied to build-ab-src/<name>, the overlay on top, and built
# in build-ab-<name>, a build tree of its own. (Swapping a file in place and
# rebuilding is unsafe across device calls: sources copied from the host may be
# older than objects built from the swapped file, so ninja rebuilds nothing.)
# ab/<name>.env, if present, holds VAR=value lines exported for that version's runs
# (its benchmark, tests and sanitizer runs).
# Writes build-ab/bench_<name>, and build-ab/bench_base (this tree's bench) if absent.
# FLASHPP_AB_TESTS_<name>=<ctest regex> also builds that version's tests and runs the
# matching ones (GPU tests of a branch's own kernels, in the same call as its A/B);
# the summary line goes to the probe output, the log to $OUT/overlay_tests_<name>.log.
# FLASHPP_AB_SANITIZE_<name>=1 then runs compute-sanitizer memcheck and racecheck on that
# version's sanitizer cases, under its ab/<name>.env (log: $OUT/overlay_sanitize_<name>.log).
set -uo pipefail
: "${BUILD:?BUILD, the build folder of this tree, must be set}"
jobs=$(nproc)
mkdir -p build-ab
bench=tests/cuda/flashpp_cuda_bench
wrapper() {  # name binary [env file]
  { echo '#!/bin/sh'
    [ -n "${3:-}" ] && [ -f "$3" ] && sed -n 's/^\([A-Za-z_][A-Za-z0-9_]*=.*\)$/export \1/p' "$3"
    echo "exec $2 \"\$@\""; } >"build-ab/bench_$1"
  chmod +x "build-ab/bench_$1"
}
[ -e build-ab/bench_base ] || wrapper base "$PWD/$BUILD/$bench"
source "$(dirname "$0")/device_cmake.sh"
for dir in ab/*/; do
  [ -d "$dir" ] || continue
  name=$(basename "$dir")
  src=build-ab-src/$name
  rm -rf "$src" && mkdir -p "$src"
  # The sources a build reads; build folders and overlays stay out.
  for path in CMakeLists.txt cmake include src tests examples python bench; do
    [ -e "$path" ] && cp -a "$path" "$src/"
  done
  cp -a "$dir/." "$src/"
  t0=$(date +%s)
  log=build-ab-$name/overlay.log
  mkdir -p "build-ab-$name"
  if device_cmake_configure "$src" "build-ab-$name" -DFLASHPP_BUILD_PYTHON=OFF -DFLASHPP_BUILD_EXAMPLES=OFF \
       >"$log" 2>&1 &&
     cmake --build "build-ab-$name" --target flashpp_cuda_bench -j "$jobs" >>"$log" 2>&1; then
    wrapper "$name" "$PWD/build-ab-$name/$bench" "ab/$name.env"
    echo "overlay $name: $(find "$dir" -type f | wc -l) files, built in $(( $(date +%s) - t0 )) s"
    tests_var=FLASHPP_AB_TESTS_$name
    # The version's settings (ab/<name>.env) hold for its tests and sanitizer runs too.
    envs=()
    [ -f "ab/$name.env" ] && mapfile -t envs < <(grep -E '^[A-Za-z_][A-Za-z0-9_]*=' "ab/$name.env")
    if [ -n "${!tests_var:-}" ]; then
      tlog=${OUT:-/tmp}/overlay_tests_$name.log
      if cmake --build "build-ab-$name" -j "$jobs" >>"$log" 2>&1; then
        env "${envs[@]}" timeout 300 ctest --test-dir "build-ab-$name" -R "${!tests_var}" --output-on-failure -j 8 \
          --timeout 240 >"$tlog" 2>&1
        echo "overlay $name tests (${!tests_var}): $(grep -E "tests passed" "$tlog" | tail -1)"
        grep -E "\*\*\*Failed|Failed  " "$tlog" | head -10
        san_var=FLASHPP_AB_SANITIZE_$name
        if [ "${!san_var:-0}" = 1 ] && command -v compute-sanitizer >/dev/null; then
          slog=${OUT:-/tmp}/overlay_sanitize_$name.log
          : >"$slog"
          for tool in memcheck racecheck; do
            env "${envs[@]}" timeout 240 compute-sanitizer --tool "$tool" --error-exitcode 9 \
              "build-ab-$name/tests/cuda/flashpp_cuda_sanitize_cases" >>"$slog" 2>&1
            echo "overlay $name $tool: rc $? $(grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$slog" | tail -1)"
          done
        fi
      else
        echo "overlay $name: test build FAILED"; tail -30 "$log"
      fi
    fi
  else
    echo "overlay $name: build FAILED"; tail -30 "$log"
  fi
done
