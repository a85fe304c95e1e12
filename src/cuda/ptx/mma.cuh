#pragma once
// Tensor-core matrix multiply-accumulate, warp-wide (sm80+).
#include <cstdint>

namespace flashpp::cuda::ptx {

// mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32: D(16x8, f32) = A(16x16, f16, row) * B(16x8, f16, col) + C.
// Per lane (g = lane / 4, t = lane % 4):
//   a[0] = A[g][2t..2t+1]   a[1] = A[g+8][2t..2t+1]   a[2] = A[g][2t+8..2t+9]   a[3] = A[g+8][2t+8..2t+9]
//   b[0] = B[2t..2t+1][g]   b[1] = B[2t+8..2t+9][g]   (two k-consecutive elements per register)
//   c[0..1] = C[g][2t..2t+1]                           c[2..3] = C[g+8][2t..2t+1]
__device__ __forceinline__ void mma_m16n8k16_f16(float (&c)[4], const std::uint32_t (&a)[4],
                                                 const std::uint32_t (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32: as mma_m16n8k16_f16 with bf16 operands.
__device__ __forceinline__ void mma_m16n8k16_bf16(float (&c)[4], const std::uint32_t (&a)[4],
                                                  const std::uint32_t (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

}  // namespace flashpp::cuda::ptx
