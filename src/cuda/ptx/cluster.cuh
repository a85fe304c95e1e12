#pragma once
// Thread-block clusters (sm90): a block's rank in its cluster, the cluster-wide
// barrier, and loads from another block's shared memory (distributed shared
// memory). Only for kernels launched with a cluster dimension: outside a
// cluster launch the barrier and the remote loads are undefined.
#include <cstdint>

namespace flashpp::cuda::ptx {

// This block's rank in its cluster (0 .. cluster size - 1; x fastest).
__device__ __forceinline__ std::uint32_t cluster_rank() {
  std::uint32_t r = 0;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
#endif
  return r;
}

// Every thread of every block of the cluster arrives and waits. Release on
// arrive and acquire on wait: the shared-memory (and global) writes a thread
// made before it are visible to every thread of the cluster after it. All
// threads of each warp must execute it together (.aligned).
__device__ __forceinline__ void cluster_sync() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile(
      "barrier.cluster.arrive.release.aligned;\n"
      "barrier.cluster.wait.acquire.aligned;\n" ::
          : "memory");
#endif
}

// The address, in the cluster's shared-memory window, of this block's
// shared-memory address `smem` as seen in block `rank` of the cluster.
__device__ __forceinline__ std::uint32_t cluster_map(std::uint32_t smem, std::uint32_t rank) {
  std::uint32_t out = 0;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(out) : "r"(smem), "r"(rank));
#endif
  return out;
}

// Loads through a cluster_map() address.
__device__ __forceinline__ float ld_cluster_f32(std::uint32_t addr) {
  float v = 0.f;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("ld.shared::cluster.f32 %0, [%1];\n" : "=f"(v) : "r"(addr) : "memory");
#endif
  return v;
}

__device__ __forceinline__ float4 ld_cluster_f32x4(std::uint32_t addr) {
  float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];\n"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "r"(addr)
               : "memory");
#endif
  return v;
}

}  // namespace flashpp::cuda::ptx
