#pragma once
// Warp-wide stores of 8x8 b16 matrices from mma/wgmma accumulator fragments to shared
// memory (stmatrix, sm_90): the inverse of ldmatrix. Register i of every lane holds
// row lane/4, columns 2*(lane%4)..+1 of matrix i; lanes 8i..8i+7 give the
// shared-memory addresses of the 8 rows (16 bytes each) of matrix i. One x4 call
// writes a 16x16 block of an accumulator with 4 instructions' worth of data in one.
#include <cstdint>

#include "cuda/ptx/wgmma.cuh"  // FLASHPP_SM90_ENABLED

namespace flashpp::cuda::ptx {

#if FLASHPP_SM90_ENABLED
// stmatrix.sync.aligned.m8n8.x4.shared.b16: four 8x8 matrices, rows addressed by all 32 lanes.
__device__ __forceinline__ void stmatrix_x4(std::uint32_t smem_addr, std::uint32_t r0, std::uint32_t r1,
                                            std::uint32_t r2, std::uint32_t r3) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1,%2,%3,%4};\n" ::"r"(smem_addr), "r"(r0), "r"(r1),
               "r"(r2), "r"(r3)
               : "memory");
}
#else
__device__ __forceinline__ void stmatrix_x4(std::uint32_t, std::uint32_t, std::uint32_t, std::uint32_t,
                                            std::uint32_t) {}
#endif

}  // namespace flashpp::cuda::ptx
