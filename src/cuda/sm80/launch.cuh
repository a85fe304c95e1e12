#pragma once
// Launchers and table entries of the FA2-class kernels, instantiated once per
// (dtype, head dim) by the files under instances/.
#include <cuda_runtime.h>

#include "cuda/check.hpp"
#include "cuda/launch_common.cuh"
#include "cuda/registry.hpp"
#include "cuda/sm80/bwd_dq_kernel.cuh"
#include "cuda/sm80/bwd_kernel.cuh"
#include "cuda/sm80/fwd_kernel.cuh"
#include "cuda/sm80/tile_configs.hpp"

namespace flashpp::cuda::sm80 {

template <typename T, int D>
void launch_fwd(const AttnParams& p, const LaunchArgs& a) {
  constexpr FwdTiles t = fwd_tiles(D);
  launch_kernel(fwd_kernel<T, D>, dim3(blocks(p.seqlen_q, t.block_m), p.heads_q, p.batch), t.warps * 32,
                sizeof(FwdSmem<D>), a.stream, "forward kernel", p);
}

template <typename T, int D>
void launch_bwd(const AttnParams& p, const LaunchArgs& a) {
  constexpr BwdTiles t = bwd_tiles(D);
  launch_kernel(bwd_kernel<T, D>, dim3(blocks(p.seqlen_k, t.block_n), p.heads_kv, p.batch), t.warps * 32,
                sizeof(BwdSmem<D>), a.stream, "backward kernel", p, a.bwd);
}

template <typename T, int D>
void launch_bwd_dq(const AttnParams& p, const LaunchArgs& a) {
  constexpr DqTiles t = dq_tiles(D);
  launch_kernel(bwd_dq_kernel<T, D>, dim3(blocks(p.seqlen_q, t.block_m), p.heads_q, p.batch), t.warps * 32,
                sizeof(DqSmem<D>), a.stream, "deterministic dQ kernel", p, a.bwd);
}

template <typename T, int D>
cudaError_t fwd_attributes(cudaFuncAttributes* attr) { return cudaFuncGetAttributes(attr, fwd_kernel<T, D>); }
template <typename T, int D>
cudaError_t bwd_attributes(cudaFuncAttributes* attr) { return cudaFuncGetAttributes(attr, bwd_kernel<T, D>); }
template <typename T, int D>
cudaError_t bwd_dq_attributes(cudaFuncAttributes* attr) { return cudaFuncGetAttributes(attr, bwd_dq_kernel<T, D>); }

template <typename T, int D>
KernelEntry fwd_entry() {
  return {80, Pass::forward, elem_type_of<T>(), D, sizeof(FwdSmem<D>), &launch_fwd<T, D>, &fwd_attributes<T, D>};
}
template <typename T, int D>
KernelEntry bwd_entry() {
  return {80, Pass::backward, elem_type_of<T>(), D, sizeof(BwdSmem<D>), &launch_bwd<T, D>, &bwd_attributes<T, D>};
}
template <typename T, int D>
KernelEntry bwd_dq_entry() {
  return {80, Pass::backward_dq, elem_type_of<T>(), D, sizeof(DqSmem<D>), &launch_bwd_dq<T, D>,
          &bwd_dq_attributes<T, D>};
}

}  // namespace flashpp::cuda::sm80
