#pragma once
// What every kernel family's launcher shares: the element type tag of a template
// argument and a checked launch with the dynamic shared-memory opt-in.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <type_traits>

#include "common/params.hpp"
#include "cuda/check.hpp"

namespace flashpp::cuda {

template <typename T>
constexpr ElemType elem_type_of();
template <>
constexpr ElemType elem_type_of<__half>() { return ElemType::f16; }
template <>
constexpr ElemType elem_type_of<__nv_bfloat16>() { return ElemType::bf16; }

inline unsigned blocks(int n, int per_block) { return unsigned((n + per_block - 1) / per_block); }

// Tile variants (tuning builds compile several per head dim; one benchmark
// process compares them, so the choice is read per call):
// the variant environment variable `name` forces (one digit below `count`), or -1.
inline int forced_variant(const char* name, int count) {
  const char* v = std::getenv(name);
  if (v == nullptr || v[0] < '0' || v[0] >= '0' + count || v[1] != '\0') return -1;
  return v[0] - '0';
}

// A count the environment variable `name` sets (decimal, 0 .. 2^20), else `fallback`.
inline int env_count(const char* name, int fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);
  return *end == '\0' && n >= 0 && n <= (1 << 20) ? int(n) : fallback;
}

// An attribute of the current device.
inline int device_attribute(cudaDeviceAttr attr, const char* what) {
  int device = 0, value = 0;
  check_cuda(cudaGetDevice(&device), "cudaGetDevice");
  check_cuda(cudaDeviceGetAttribute(&value, attr, device), what);
  return value;
}

// Multiprocessor count of the current device.
inline int multiprocessors() {
  return device_attribute(cudaDevAttrMultiProcessorCount, "cudaDeviceGetAttribute(multiprocessors)");
}

// Calls f(std::integral_constant<int, v>{}) for the runtime variant v < Count.
template <int Count, int V = 0, class F>
void with_variant(int v, F&& f) {
  if constexpr (V < Count) {
    if (v == V) return f(std::integral_constant<int, V>{});
    with_variant<Count, V + 1>(v, f);
  }
}

template <typename Kernel, typename... Args>
void launch_kernel(Kernel kernel, dim3 grid, int threads, std::size_t smem, cudaStream_t stream, const char* what,
                   const Args&... args) {
  if (grid.x == 0 || grid.y == 0 || grid.z == 0) return;
  // Per launch rather than once: the attribute is per device, and this keeps
  // concurrent first calls from several threads and devices trivially safe.
  check_cuda(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)),
             "cudaFuncSetAttribute(max dynamic shared memory)");
  kernel<<<grid, threads, smem, stream>>>(args...);
  check_launch(what);
}

// Blocks of `kernel` that fit on the device at once, capped at `total`: the grid of a
// pass that walks its `total` blocks in a loop and usually exits at once.
template <typename Kernel>
unsigned one_wave(Kernel kernel, int threads, std::size_t smem, long long total) {
  if (total <= 0) return 0;
  check_cuda(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)),
             "cudaFuncSetAttribute(max dynamic shared memory)");
  int per_sm = 0;
  check_cuda(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, smem),
             "cudaOccupancyMaxActiveBlocksPerMultiprocessor");
  const long long wave = (long long)std::max(per_sm, 1) * multiprocessors();
  return unsigned(std::min(wave, total));
}

}  // namespace flashpp::cuda
