#pragma once
// Fire-and-forget atomic reductions into global memory.

namespace flashpp::cuda::ptx {

// red.global.add.v2.f32 (sm90+): adds (a, b) to the two consecutive floats at addr
// (8-byte aligned) as one reduction; earlier GPUs issue two red.global.add.f32.
__device__ __forceinline__ void red_add_v2_f32(float* addr, float a, float b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("red.global.add.v2.f32 [%0], {%1, %2};\n" ::"l"(addr), "f"(a), "f"(b) : "memory");
#else
  atomicAdd(addr, a);
  atomicAdd(addr + 1, b);
#endif
}

// red.global.add.v4.f32 (sm90+): adds (a, b, c, d) to the four consecutive floats at
// addr (16-byte aligned) as one reduction; earlier GPUs issue four red.global.add.f32.
__device__ __forceinline__ void red_add_v4_f32(float* addr, float a, float b, float c, float d) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("red.global.add.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"l"(addr), "f"(a), "f"(b), "f"(c), "f"(d)
               : "memory");
#else
  atomicAdd(addr, a);
  atomicAdd(addr + 1, b);
  atomicAdd(addr + 2, c);
  atomicAdd(addr + 3, d);
#endif
}

}  // namespace flashpp::cuda::ptx
