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

}  // namespace flashpp::cuda::ptx
