#pragma once
// The two 16-bit input types the kernels are compiled for, and what differs
// between them: the mma instruction, the float -> pair packing and the
// conversion back to float.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

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

// Unpacks a register holding two 16-bit values (lo in bits 0-15) to floats. Both
// forms read the 32-bit register as it is: splitting it into two 16-bit variables
// let the compiler keep pairs that are also stored whole as halves and rejoin them
// with two PRMT per store.
template <typename T>
__device__ __forceinline__ void unpack2(std::uint32_t r, float& lo, float& hi) {
  static_assert(sizeof(T) == 2, "two 16-bit elements");
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    lo = __uint_as_float(r << 16);  // a bf16 is the top half of an fp32
    hi = __uint_as_float(r & 0xffff0000u);
  } else {
    asm("{\n .reg .f16 l, h;\n mov.b32 {l, h}, %2;\n cvt.f32.f16 %0, l;\n cvt.f32.f16 %1, h;\n}\n"
        : "=f"(lo), "=f"(hi)
        : "r"(r));
  }
}

}  // namespace flashpp::cuda
