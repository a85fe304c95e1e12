#pragma once
// Warpgroup matrix multiply (wgmma, sm_90a): 128 threads (4 consecutive warps
// starting at a warp index divisible by 4) issue one asynchronous m64nNk16 MMA.
// B, and A in the SS form, are read from shared memory through 64-bit matrix
// descriptors; A in the RS form comes from registers in the mma.m16n8k16 A layout
// (per warp: 16 rows). The f32 accumulator of a warp covers rows 16w..16w+15 of
// the 64 with the mma.m16n8 C layout repeated every 8 columns:
//   d[4j + 0..1] = D[g][8j + 2t .. 8j + 2t + 1],  d[4j + 2..3] = D[g + 8][same]
// (g = lane / 4, t = lane % 4).
//
// Everything here assembles only for sm_90a: callers guard with FLASHPP_SM90_ENABLED.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define FLASHPP_SM90_ENABLED 1
#else
#define FLASHPP_SM90_ENABLED 0
#endif

namespace flashpp::cuda::ptx {

// Shared-memory matrix descriptor with the 128-byte swizzle (the layout a TMA load
// with CU_TENSOR_MAP_SWIZZLE_128B writes): rows of 128 bytes, 8-row atoms of 1024 bytes
// whose 16-byte chunks are XOR-permuted by the row index. Tiles must start 1024-aligned;
// moving the start by a multiple of 16 bytes inside an atom (a k-step) is allowed.
//   K-major operand (contiguous along K): lbo unused, sbo = bytes between 8-row groups.
//   MN-major operand (contiguous along M/N): lbo = bytes between 64-element chunks of
//   M/N, sbo = bytes between 8-row groups along K.
__device__ __forceinline__ std::uint64_t sw128_desc(std::uint32_t smem_addr, std::uint32_t lbo, std::uint32_t sbo) {
  std::uint64_t d = 0;
  d |= std::uint64_t((smem_addr & 0x3FFFFu) >> 4);
  d |= std::uint64_t((lbo >> 4) & 0x3FFFu) << 16;
  d |= std::uint64_t((sbo >> 4) & 0x3FFFu) << 32;
  d |= std::uint64_t(1) << 62;  // swizzle mode 1 = 128 bytes
  return d;
}

// A descriptor built once and moved along its tile: at(bytes) is the descriptor of
// the same layout starting `bytes` (a multiple of 16) further. Only the 14-bit
// address field changes, with one 32-bit add and no re-encoding, which keeps the
// per-wgmma work in a kernel's inner loop to that add (uniform registers when the
// base is warp-uniform). The shifted address must stay below 256 KB, where the
// field cannot carry into the leading-byte offset: true of any shared-memory
// address of one block.
struct Sw128Desc {
  std::uint32_t lo = 0, hi = 0;
  __device__ __forceinline__ static Sw128Desc make(std::uint32_t smem_addr, std::uint32_t lbo, std::uint32_t sbo) {
    const std::uint64_t d = sw128_desc(smem_addr, lbo, sbo);
    return {std::uint32_t(d), std::uint32_t(d >> 32)};
  }
  __device__ __forceinline__ std::uint64_t at(std::uint32_t bytes) const {
    return (std::uint64_t(hi) << 32) | (lo + (bytes >> 4));
  }
};

#if FLASHPP_SM90_ENABLED
// Orders register accesses before the first wgmma of a sequence that reads or
// writes those registers (accumulators touched by ordinary instructions).
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
// Waits until at most N committed groups of this warpgroup are still in flight.
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
#include "cuda/ptx/wgmma_ops.inc"
#else
__device__ __forceinline__ void wgmma_fence() {}
__device__ __forceinline__ void wgmma_commit() {}
template <int N>
__device__ __forceinline__ void wgmma_wait() {}
#endif

// Keeps the compiler from moving reads or writes of accumulator registers across a
// wgmma wait (the asm above does not tell it the registers change asynchronously).
template <int N>
__device__ __forceinline__ void fence_registers(float (&d)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}
template <int N>
__device__ __forceinline__ void fence_registers(std::uint32_t (&d)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+r"(d[i])::"memory");
}

// Declares accumulator registers that the next wgmma overwrites (scale-d 0) as
// defined, with no instruction. Without it the compiler feeds the asm's in-out
// operands whatever the registers held and may copy stale values into them between
// the wgmmas of one sequence, which makes ptxas serialize the sequence (C7514).
template <int N>
__device__ __forceinline__ void fresh_registers(float (&d)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "=f"(d[i]));
}

// One m64nNk16 wgmma for element type T, by N.
template <typename T, int N>
struct Wgmma;

#if FLASHPP_SM90_ENABLED
#define FLASHPP_WGMMA_SHAPE(N)                                                                                    \
  template <>                                                                                                     \
  struct Wgmma<__half, N> {                                                                                       \
    template <int TA, int TB>                                                                                     \
    __device__ __forceinline__ static void ss(float (&d)[N / 2], std::uint64_t a, std::uint64_t b, int acc) {     \
      wgmma_ss_m64n##N##k16_f16<TA, TB>(d, a, b, acc);                                                            \
    }                                                                                                             \
    template <int TB>                                                                                             \
    __device__ __forceinline__ static void rs(float (&d)[N / 2], const std::uint32_t (&a)[4], std::uint64_t b,    \
                                              int acc) {                                                          \
      wgmma_rs_m64n##N##k16_f16<TB>(d, a, b, acc);                                                                \
    }                                                                                                             \
  };                                                                                                              \
  template <>                                                                                                     \
  struct Wgmma<__nv_bfloat16, N> {                                                                                \
    template <int TA, int TB>                                                                                     \
    __device__ __forceinline__ static void ss(float (&d)[N / 2], std::uint64_t a, std::uint64_t b, int acc) {     \
      wgmma_ss_m64n##N##k16_bf16<TA, TB>(d, a, b, acc);                                                           \
    }                                                                                                             \
    template <int TB>                                                                                             \
    __device__ __forceinline__ static void rs(float (&d)[N / 2], const std::uint32_t (&a)[4], std::uint64_t b,    \
                                              int acc) {                                                          \
      wgmma_rs_m64n##N##k16_bf16<TB>(d, a, b, acc);                                                               \
    }                                                                                                             \
  };
FLASHPP_WGMMA_SHAPE(16)
FLASHPP_WGMMA_SHAPE(32)
FLASHPP_WGMMA_SHAPE(64)
FLASHPP_WGMMA_SHAPE(72)
FLASHPP_WGMMA_SHAPE(80)
FLASHPP_WGMMA_SHAPE(96)
FLASHPP_WGMMA_SHAPE(112)
FLASHPP_WGMMA_SHAPE(128)
FLASHPP_WGMMA_SHAPE(160)
FLASHPP_WGMMA_SHAPE(176)
FLASHPP_WGMMA_SHAPE(192)
FLASHPP_WGMMA_SHAPE(256)
#undef FLASHPP_WGMMA_SHAPE
#else
// Host and non-sm_90a passes: the same interface, never executed (select() only
// picks Hopper kernels on sm_90 devices with an sm_90a image).
template <typename T, int N>
struct Wgmma {
  template <int TA, int TB>
  __device__ __forceinline__ static void ss(float (&)[N / 2], std::uint64_t, std::uint64_t, int) {}
  template <int TB>
  __device__ __forceinline__ static void rs(float (&)[N / 2], const std::uint32_t (&)[4], std::uint64_t, int) {}
};
#endif

}  // namespace flashpp::cuda::ptx
