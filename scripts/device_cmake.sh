# Sourced by device_check.sh and device_ab_overlay.sh: how a CUDA build is
# configured on the device, in one place, so every build tree of a run (this tree's
# and the A/B overlays') is configured alike.
#   device_cmake_configure SOURCE BUILD [more cmake arguments]
# Run from the repository root (build-deps/ is looked for there).
device_cmake_configure() {
  local src=$1 build=$2
  shift 2
  local extra=()
  # GoogleTest: the system's, else the source copy carried in build-deps/googletest,
  # installed once per machine under /tmp/gtest.
  if ! compgen -G "/usr/lib*/cmake/GTest" >/dev/null && ! compgen -G "/usr/lib/*/cmake/GTest" >/dev/null &&
     [ -d build-deps/googletest ]; then
    if [ -d /tmp/gtest ] || { cmake -S build-deps/googletest -B /tmp/gtest-build -G Ninja -DCMAKE_BUILD_TYPE=Release \
           -DBUILD_GMOCK=OFF -DCMAKE_INSTALL_PREFIX=/tmp/gtest >/dev/null &&
         cmake --build /tmp/gtest-build -j "$(nproc)" >/dev/null && cmake --install /tmp/gtest-build >/dev/null; }; then
      extra+=(-DCMAKE_PREFIX_PATH=/tmp/gtest)
    fi
  fi
  # Older CMake (< 3.26) has no CUDA20 flags for nvcc; they are plain -std=c++20.
  extra+=(-DCMAKE_CUDA20_STANDARD_COMPILE_OPTION=-std=c++20 -DCMAKE_CUDA20_EXTENSION_COMPILE_OPTION=-std=c++20)
  # On a Hopper device only the sm_90a image runs (the FA2-class kernels included):
  # building the sm_80 one too doubles every CUDA compile for code no run loads.
  # FLASHPP_DEVICE_ALL_ARCHS=1 builds both, as CI does.
  if [ "${FLASHPP_DEVICE_ALL_ARCHS:-0}" != 1 ] &&
     [ "$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1)" = "9.0" ]; then
    extra+=("-DFLASHPP_CUDA_GENCODE=-gencode=arch=compute_90a,code=sm_90a")
  fi
  [ "${FLASHPP_DEVICE_TUNING:-0}" = 1 ] && extra+=(-DFLASHPP_SM90_TUNING=ON -DFLASHPP_SM80_TUNING=ON)
  [ "${FLASHPP_DEVICE_TUNING:-0}" = sm80 ] && extra+=(-DFLASHPP_SM80_TUNING=ON)
  cmake -S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFLASHPP_CUDA=ON -DFLASHPP_BUILD_TESTS=ON \
    "${extra[@]}" "$@"
}
