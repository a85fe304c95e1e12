#pragma once
// The two 16-bit input types the kernels are compiled for, and what differs
// between them: the mma instruction, the float -> pair packing and the
// conversion back to float.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "cuda/ptx/math.cuh"
#include "cuda/ptx/mma.cuh"

namespace flashpp::cuda {

template <typename T>
struct Element;

template <>
struct Element<__half> {
  static constexpr const char* name = "f16";
  __device__ __forceinline__ static void mma(float (&c)[4], const std::uint32_t (&a)[4], const std::uint32_t (&b)[2]) {
    ptx::mma_m16n8k16_f16(c, a, b);
  }
  __device__ __forceinline__ static std::uint32_t pack(float lo, float hi) { return ptx::cvt_rn_f16x2_f32(lo, hi); }
  __device__ __forceinline__ static float to_float(__half x) { return __half2float(x); }
  __device__ __forceinline__ static __half from_float(float x) { return __float2half_rn(x); }
};

template <>
struct Element<__nv_bfloat16> {
  static constexpr const char* name = "bf16";
  __device__ __forceinline__ static void mma(float (&c)[4], const std::uint32_t (&a)[4], const std::uint32_t (&b)[2]) {
    ptx::mma_m16n8k16_bf16(c, a, b);
  }
  __device__ __forceinline__ static std::uint32_t pack(float lo, float hi) { return ptx::cvt_rn_bf16x2_f32(lo, hi); }
  __device__ __forceinline__ static float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
  __device__ __forceinline__ static __nv_bfloat16 from_float(float x) { return __float2bfloat16_rn(x); }
};

// Unpacks a register holding two 16-bit values (lo in bits 0-15) to floats.
template <typename T>
__device__ __forceinline__ void unpack2(std::uint32_t r, float& lo, float& hi) {
  T v[2];
  static_assert(sizeof(v) == 4, "two 16-bit elements");
  __builtin_memcpy(v, &r, 4);
  lo = Element<T>::to_float(v[0]);
  hi = Element<T>::to_float(v[1]);
}

}  // namespace flashpp::cuda
