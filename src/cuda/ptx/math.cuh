#pragma once
// Scalar and packing instructions used by the softmax and the fragment conversions.
#include <cstdint>

namespace flashpp::cuda::ptx {

// ex2.approx.ftz.f32: 2^x (relative error ~2^-22; -inf gives +0).
__device__ __forceinline__ float ex2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// cvt.rn.f16x2.f32: packs (lo, hi) as two round-to-nearest f16 values; lo in bits 0-15.
__device__ __forceinline__ std::uint32_t cvt_rn_f16x2_f32(float lo, float hi) {
  std::uint32_t r;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}

// cvt.rn.bf16x2.f32: packs (lo, hi) as two round-to-nearest bf16 values; lo in bits 0-15.
__device__ __forceinline__ std::uint32_t cvt_rn_bf16x2_f32(float lo, float hi) {
  std::uint32_t r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}

// max.f16x2 / max.bf16x2 (sm80+): elementwise max of two packed pairs, on the 32-bit
// registers themselves. Going through __half2 / __nv_bfloat162 instead made the
// compiler split each pair into halves and rejoin them (two PRMT per pair).
__device__ __forceinline__ std::uint32_t max_f16x2(std::uint32_t a, std::uint32_t b) {
  std::uint32_t r;
  asm("max.f16x2 %0, %1, %2;\n" : "=r"(r) : "r"(a), "r"(b));
  return r;
}
__device__ __forceinline__ std::uint32_t max_bf16x2(std::uint32_t a, std::uint32_t b) {
  std::uint32_t r;
  asm("max.bf16x2 %0, %1, %2;\n" : "=r"(r) : "r"(a), "r"(b));
  return r;
}

// cvta.to.shared: the 32-bit shared-window address of a generic pointer into shared memory.
__device__ __forceinline__ std::uint32_t smem_u32(const void* p) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}

}  // namespace flashpp::cuda::ptx
