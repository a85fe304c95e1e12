#pragma once
// Warp-specialization primitives (sm_90a): register reallocation between
// warpgroups (setmaxnreg) and named barriers that a subset of the block's warps
// use to hand work to each other without stopping the rest.
#include <cstdint>

#include "cuda/ptx/wgmma.cuh"  // FLASHPP_SM90_ENABLED

namespace flashpp::cuda::ptx {

#if FLASHPP_SM90_ENABLED
// Every thread of a warpgroup executes the same call; the kernel needs a register cap
// at entry (__launch_bounds__(threads, 1)) for these to take effect.
template <int Regs>
__device__ __forceinline__ void setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(Regs));
}
template <int Regs>
__device__ __forceinline__ void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(Regs));
}
#else
template <int Regs>
__device__ __forceinline__ void setmaxnreg_inc() {}
template <int Regs>
__device__ __forceinline__ void setmaxnreg_dec() {}
#endif

// Named barrier `id` (1..15; 0 is __syncthreads) over `threads` threads (multiple of 32):
// sync waits for all of them, arrive counts this warp and goes on.
__device__ __forceinline__ void named_barrier_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void named_barrier_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

}  // namespace flashpp::cuda::ptx
