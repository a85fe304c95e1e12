#pragma once
// Tensor-memory-accelerator copies (cp.async.bulk.tensor, sm_90): one thread asks the
// copy engine for a whole box of a tensor described by a CUtensorMap (encoded on the
// host, passed as a __grid_constant__ kernel parameter). Loads complete on an
// mbarrier with the box's byte count; elements outside the tensor read as zero.
#include <cuda.h>

#include <cstdint>

#include "cuda/ptx/wgmma.cuh"  // FLASHPP_SM90_ENABLED

namespace flashpp::cuda::ptx {

#if FLASHPP_SM90_ENABLED
// Box at coordinates (c0 innermost .. c3) -> shared memory at dst; completes on bar.
__device__ __forceinline__ void tma_load_4d(std::uint32_t dst, const CUtensorMap* map, std::uint32_t bar, int c0,
                                            int c1, int c2, int c3) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3, %4, %5, %6}], [%2];\n" ::"r"(dst),
      "l"(reinterpret_cast<std::uint64_t>(map)), "r"(bar), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
      : "memory");
}
// Shared memory -> the box at (c0..c3); rows outside the tensor are not written.
__device__ __forceinline__ void tma_store_4d(const CUtensorMap* map, std::uint32_t src, int c0, int c1, int c2,
                                             int c3) {
  asm volatile("cp.async.bulk.tensor.4d.global.shared::cta.bulk_group [%0, {%2, %3, %4, %5}], [%1];\n" ::"l"(
                   reinterpret_cast<std::uint64_t>(map)),
               "r"(src), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
               : "memory");
}
__device__ __forceinline__ void tma_store_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
// Waits until the committed stores have finished reading shared memory.
__device__ __forceinline__ void tma_store_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");
}
// Waits until the committed stores are complete (visible in global memory).
__device__ __forceinline__ void tma_store_wait_all() { asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory"); }
__device__ __forceinline__ void tma_prefetch_map(const CUtensorMap* map) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<std::uint64_t>(map)) : "memory");
}
// Shared memory written by ordinary stores, read next by the async proxy (TMA store,
// wgmma): each writing thread fences before the barrier that publishes it.
__device__ __forceinline__ void fence_proxy_async_smem() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
#else
__device__ __forceinline__ void tma_load_4d(std::uint32_t, const CUtensorMap*, std::uint32_t, int, int, int, int) {}
__device__ __forceinline__ void tma_store_4d(const CUtensorMap*, std::uint32_t, int, int, int, int) {}
__device__ __forceinline__ void tma_store_commit() {}
__device__ __forceinline__ void tma_store_wait_read() {}
__device__ __forceinline__ void tma_store_wait_all() {}
__device__ __forceinline__ void tma_prefetch_map(const CUtensorMap*) {}
__device__ __forceinline__ void fence_proxy_async_smem() {}
#endif

}  // namespace flashpp::cuda::ptx
