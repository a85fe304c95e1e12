#pragma once
// Shared-memory transaction barriers (mbarrier, sm_90): the completion signal of
// TMA loads and the full/empty handshake of the producer/consumer pipeline.
// A phase completes when `count` arrivals have happened and every expected
// transaction byte has landed; waiters name the parity of the phase they wait for.
#include <cstdint>

#include "cuda/ptx/wgmma.cuh"  // FLASHPP_SM90_ENABLED

namespace flashpp::cuda::ptx {

#if FLASHPP_SM90_ENABLED
__device__ __forceinline__ void mbarrier_init(std::uint32_t bar, std::uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
// Makes initialized barriers visible to the async proxy (the TMA unit) and to the
// other threads; follow with a block-wide barrier.
__device__ __forceinline__ void mbarrier_init_fence() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
// One arrival that also announces `bytes` of transactions still to land this phase.
__device__ __forceinline__ void mbarrier_arrive_expect_tx(std::uint32_t bar, std::uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.release.cta.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void mbarrier_arrive(std::uint32_t bar) {
  asm volatile("mbarrier.arrive.release.cta.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
// Non-blocking probe of the phase with the given parity (the hardware may suspend
// the thread for a bounded time inside try_wait).
__device__ __forceinline__ bool mbarrier_try_wait(std::uint32_t bar, std::uint32_t parity) {
  std::uint32_t done;
  asm volatile(
      "{\n.reg .pred p;\n"
      "mbarrier.try_wait.parity.acquire.cta.shared::cta.b64 p, [%1], %2;\n"
      "selp.u32 %0, 1, 0, p;\n}\n"
      : "=r"(done)
      : "r"(bar), "r"(parity)
      : "memory");
  return done != 0;
}
__device__ __forceinline__ void mbarrier_wait(std::uint32_t bar, std::uint32_t parity) {
  while (!mbarrier_try_wait(bar, parity)) {
  }
}
#else
__device__ __forceinline__ void mbarrier_init(std::uint32_t, std::uint32_t) {}
__device__ __forceinline__ void mbarrier_init_fence() {}
__device__ __forceinline__ void mbarrier_arrive_expect_tx(std::uint32_t, std::uint32_t) {}
__device__ __forceinline__ void mbarrier_arrive(std::uint32_t) {}
__device__ __forceinline__ bool mbarrier_try_wait(std::uint32_t, std::uint32_t) { return true; }
__device__ __forceinline__ void mbarrier_wait(std::uint32_t, std::uint32_t) {}
#endif

}  // namespace flashpp::cuda::ptx
