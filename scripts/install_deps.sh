#!/usr/bin/env bash
# Installs what building and testing flashpp needs on a Debian/Ubuntu machine:
# compilers, CMake, Ninja, GoogleTest, Google Benchmark, clang (libFuzzer), Spin
# (model checking), and the Python build/test packages (with PyTorch, transformers,
# ml_dtypes and matplotlib for the torch layer's and the benchmark suite's tests;
# FLASHPP_SKIP_TORCH=1 leaves them out). Skips what is already there.
set -euo pipefail

need=()
command -v cmake >/dev/null || need+=(cmake)
command -v ninja >/dev/null || need+=(ninja-build)
command -v g++ >/dev/null || need+=(g++)
command -v clang++ >/dev/null || need+=(clang)
[ -f /usr/include/gtest/gtest.h ] || need+=(libgtest-dev)
[ -f /usr/include/benchmark/benchmark.h ] || need+=(libbenchmark-dev)
command -v spin >/dev/null || need+=(spin)  # model check of the Hopper kernel's synchronization
if [ ${#need[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}"
fi

if [ "${FLASHPP_SKIP_PYTHON:-0}" != 1 ]; then
  py=${PYTHON:-python3}
  missing=()
  for m in numpy pytest nanobind scikit_build_core; do
    $py -c "import $m" 2>/dev/null || missing+=("${m//_/-}")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    $py -m pip install -q "${missing[@]}"
  fi
  # The torch layer's tests (flashpp.torch autograd, torch.compile, the flash_attn
  # signatures, the SDPA registration, the Hugging Face attention) and the bf16 NumPy
  # cases run on the CPU as well, with the versions the GPU machine has. Best effort
  # (a few GB of wheels): where they cannot be installed, those tests skip and say so.
  if [ "${FLASHPP_SKIP_TORCH:-0}" != 1 ]; then
    extra=()
    $py -c "import torch" 2>/dev/null || extra+=("torch==2.11.0")
    $py -c "import transformers" 2>/dev/null || extra+=("transformers==5.17.0")
    $py -c "import ml_dtypes" 2>/dev/null || extra+=(ml_dtypes)
    $py -c "import matplotlib" 2>/dev/null || extra+=(matplotlib)  # the benchmark suite's plot tests
    if [ ${#extra[@]} -gt 0 ]; then
      $py -m pip install -q "${extra[@]}" || echo "could not install ${extra[*]}: the tests that need them skip"
    fi
  fi
fi
