#pragma once
// Launcher and table entry of the Hopper backward (bwd_kernel.cuh), instantiated per
// dtype by the files under instances/ (bwd90_*). After its main kernel the FA2-class
// entry of the same dtype and head dim runs the exact-D and fix passes.
#include <cuda_runtime.h>

#include "cuda/launch_common.cuh"
#include "cuda/registry.hpp"
#include "cuda/sm90/bwd_kernel.cuh"
#include "cuda/sm90/bwd_tiles.hpp"
#include "cuda/sm90/tensor_maps.hpp"

namespace flashpp::cuda::sm90 {

template <typename T, int D>
void launch_bwd90(const AttnParams& p, const LaunchArgs& a, const KernelEntry& fa2) {
  const BwdMaps maps = encode_bwd_maps(p, kBwdBlockM, kBwdBlockN);
  const dim3 grid(blocks(p.seqlen_k, kBwdBlockN), p.heads_kv, p.batch);
  launch_kernel(bwd_kernel<T, D>, grid, kBwdThreads, bwd90_smem_bytes(D), a.stream, "Hopper backward kernel", p, maps,
                a.bwd);
  fa2.launch_fix(p, a);
}

template <typename T, int D>
cudaError_t bwd90_attributes(cudaFuncAttributes* attr) {
  return cudaFuncGetAttributes(attr, bwd_kernel<T, D>);
}

// The table entry of one instance. Fa2 returns the FA2-class entry of the same dtype and
// head dim (defined in its own instance file, so its kernels are not compiled again
// here), whose fix passes follow the main kernel.
template <typename T, int D, KernelEntry (*Fa2)()>
void launch_bwd90_entry(const AttnParams& p, const LaunchArgs& a) {
  static const KernelEntry fa2 = Fa2();
  launch_bwd90<T, D>(p, a, fa2);
}

template <typename T, int D, KernelEntry (*Fa2)()>
KernelEntry bwd90_entry() {
  return {90, Pass::backward, elem_type_of<T>(), D, bwd90_smem_bytes(D), &launch_bwd90_entry<T, D, Fa2>,
          &bwd90_attributes<T, D>};
}

}  // namespace flashpp::cuda::sm90
