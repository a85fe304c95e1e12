#pragma once
// Warp-wide loads of 8x8 b16 matrices from shared memory into mma fragments (sm75+).
// Lanes 8i..8i+7 give the shared-memory addresses of the 8 rows (16 bytes each) of
// matrix i; register i of every lane then holds row lane/4, columns 2*(lane%4)..+1 of
// matrix i (with .trans: of the transposed matrix). x1/x2 read addresses from lanes 0-7/0-15.
#include <cstdint>

namespace flashpp::cuda::ptx {

// ldmatrix.sync.aligned.m8n8.x1.shared.b16: one 8x8 matrix, rows addressed by lanes 0-7.
__device__ __forceinline__ void ldmatrix_x1(std::uint32_t& r0, std::uint32_t smem_addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];\n" : "=r"(r0) : "r"(smem_addr));
}

// ldmatrix.sync.aligned.m8n8.x2.shared.b16: two 8x8 matrices, rows addressed by lanes 0-15.
__device__ __forceinline__ void ldmatrix_x2(std::uint32_t& r0, std::uint32_t& r1, std::uint32_t smem_addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n" : "=r"(r0), "=r"(r1) : "r"(smem_addr));
}

// ldmatrix.sync.aligned.m8n8.x4.shared.b16: four 8x8 matrices, rows addressed by all 32 lanes.
__device__ __forceinline__ void ldmatrix_x4(std::uint32_t& r0, std::uint32_t& r1, std::uint32_t& r2,
                                            std::uint32_t& r3, std::uint32_t smem_addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(smem_addr));
}

// ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16: one 8x8 matrix, delivered transposed.
__device__ __forceinline__ void ldmatrix_x1_trans(std::uint32_t& r0, std::uint32_t smem_addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {%0}, [%1];\n" : "=r"(r0) : "r"(smem_addr));
}

// ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16: two 8x8 matrices, delivered transposed.
__device__ __forceinline__ void ldmatrix_x2_trans(std::uint32_t& r0, std::uint32_t& r1, std::uint32_t smem_addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];\n"
               : "=r"(r0), "=r"(r1)
               : "r"(smem_addr));
}

// ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16: four 8x8 matrices, delivered transposed.
__device__ __forceinline__ void ldmatrix_x4_trans(std::uint32_t& r0, std::uint32_t& r1, std::uint32_t& r2,
                                                  std::uint32_t& r3, std::uint32_t smem_addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(smem_addr));
}

}  // namespace flashpp::cuda::ptx
