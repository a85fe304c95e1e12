#pragma once
// Launcher and table entry of the Hopper forward, instantiated once per
// (dtype, head dim) by the files under instances/ (fwd90_*).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdlib>

#include "cuda/check.hpp"
#include "cuda/launch_common.cuh"
#include "cuda/registry.hpp"
#include "cuda/sm90/fwd_kernel.cuh"
#include "cuda/sm90/fwd_tiles.hpp"
#include "cuda/sm90/tensor_maps.hpp"

namespace flashpp::cuda::sm90 {

// Multiprocessor count of the current device: the persistent grid's size.
inline int multiprocessors() {
  int device = 0, sms = 0;
  check_cuda(cudaGetDevice(&device), "cudaGetDevice");
  check_cuda(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), "cudaDeviceGetAttribute");
  return sms;
}

template <typename T, int D, int V>
void launch_fwd_tiles(const AttnParams& p, const LaunchArgs& a) {
  constexpr FwdTiles t = fwd_tiles(D, V);
  const TileOrder order = TileOrder::make(p, t.block_m);
  if (order.count == 0) return;
  const FwdMaps maps = encode_fwd_maps(p, t.block_m, t.block_n);
  const unsigned grid = unsigned(std::min(order.count, multiprocessors()));
  launch_kernel(fwd_kernel<T, D, V>, dim3(grid), kThreads, fwd_smem_bytes(t), a.stream, "Hopper forward kernel", p,
                maps);
}

#if FLASHPP_SM90_TUNING
inline constexpr bool kTuningBuild = true;
#else
inline constexpr bool kTuningBuild = false;
#endif

// The tile variant for this call: the key-length rule of fwd_tiles.hpp, or
// what FLASHPP_SM90_TILES forces in a tuning build (read per call, so one
// benchmark process can compare variants).
template <int D>
int fwd_tile_variant(const AttnParams& p) {
  if constexpr (kTuningBuild) {
    const char* v = std::getenv("FLASHPP_SM90_TILES");
    if (v != nullptr && (v[0] == '0' || v[0] == '1')) return v[0] - '0';
  }
  constexpr int from = fwd_long_keys_from(D);
  return from > 0 && p.seqlen_k >= from ? 1 : 0;
}

// Variant 1 is compiled only where the key-length rule can pick it (and in
// tuning builds), so the default build pays for it at three head dims.
template <int D>
inline constexpr bool kHasVariant1 = kTuningBuild || fwd_long_keys_from(D) > 0;

template <typename T, int D>
void launch_fwd(const AttnParams& p, const LaunchArgs& a) {
  if constexpr (kHasVariant1<D>) {
    if (fwd_tile_variant<D>(p) == 1) return launch_fwd_tiles<T, D, 1>(p, a);
  }
  launch_fwd_tiles<T, D, 0>(p, a);
}

// Attributes (registers, spills) of the variant-0 kernel, which short calls and
// the device tests of the kernel wrappers use.
template <typename T, int D>
cudaError_t fwd_attributes(cudaFuncAttributes* attr) {
  return cudaFuncGetAttributes(attr, fwd_kernel<T, D, 0>);
}

template <typename T, int D>
KernelEntry fwd_entry() {
  // The larger shared-memory need of the variants this build can launch.
  constexpr std::size_t smem = std::max(fwd_smem_bytes(fwd_tiles(D, 0)), kHasVariant1<D> ? fwd_smem_bytes(fwd_tiles(D, 1)) : 0);
  return {90, Pass::forward, elem_type_of<T>(), D, smem, &launch_fwd<T, D>,
          &fwd_attributes<T, D>};
}

}  // namespace flashpp::cuda::sm90
