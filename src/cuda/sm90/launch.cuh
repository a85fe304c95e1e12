#pragma once
// Launcher and table entry of the Hopper forward, instantiated once per
// (dtype, head dim) by the files under instances/ (fwd90_*).
#include <cuda_runtime.h>

#include <algorithm>

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

template <typename T, int D>
void launch_fwd(const AttnParams& p, const LaunchArgs& a) {
  constexpr FwdTiles t = fwd_tiles(D);
  const TileOrder order = TileOrder::make(p, t.block_m);
  if (order.count == 0) return;
  const FwdMaps maps = encode_fwd_maps(p, t.block_m, t.block_n);
  const unsigned grid = unsigned(std::min(order.count, multiprocessors()));
  launch_kernel(fwd_kernel<T, D>, dim3(grid), kThreads, fwd_smem_bytes(t), a.stream, "Hopper forward kernel", p, maps);
}

template <typename T, int D>
cudaError_t fwd_attributes(cudaFuncAttributes* attr) { return cudaFuncGetAttributes(attr, fwd_kernel<T, D>); }

template <typename T, int D>
KernelEntry fwd_entry() {
  return {90, Pass::forward, elem_type_of<T>(), D, fwd_smem_bytes(fwd_tiles(D)), &launch_fwd<T, D>,
          &fwd_attributes<T, D>};
}

}  // namespace flashpp::cuda::sm90
