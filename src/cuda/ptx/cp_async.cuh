#pragma once
// Asynchronous global -> shared copies that bypass registers (sm80+), tracked in
// per-thread commit groups.
#include <cstdint>

namespace flashpp::cuda::ptx {

// cp.async.cg.shared.global (16 bytes, L2 only): copies 16 bytes when `valid`, otherwise
// writes 16 zero bytes to shared memory and reads nothing (src-size 0). Both addresses
// must be 16-byte aligned.
__device__ __forceinline__ void cp_async_16(std::uint32_t smem_addr, const void* gmem, bool valid) {
  const int src_bytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr), "l"(gmem), "r"(src_bytes));
}

// cp.async.ca.shared.global (4 bytes): copies one 32-bit word when `valid`, otherwise zero-fills it.
__device__ __forceinline__ void cp_async_4(std::uint32_t smem_addr, const void* gmem, bool valid) {
  const int src_bytes = valid ? 4 : 0;
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(smem_addr), "l"(gmem), "r"(src_bytes));
}

// cp.async.commit_group: closes the group of this thread's copies issued since the last commit.
__device__ __forceinline__ void cp_async_commit_group() { asm volatile("cp.async.commit_group;\n" ::); }

// cp.async.wait_group N: waits until at most N of this thread's committed groups are still in flight.
// (Other threads' copies are visible only after a barrier that follows the wait.)
template <int N>
__device__ __forceinline__ void cp_async_wait_group() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

}  // namespace flashpp::cuda::ptx
