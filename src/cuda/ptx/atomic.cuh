#pragma once
// Atomics with explicit memory-model semantics (PTX ISA, memory consistency
// model): a counter that publishes data written before it and, for the thread
// that reads the final count, acquires the data of every other arrival.
#include <cstdint>

namespace flashpp::cuda::ptx {

// atom.acq_rel.gpu.global.add: returns the old value. Release orders the
// calling thread's earlier memory operations (and, cumulatively, those a CTA
// barrier ordered before it) ahead of the add; acquire orders the add ahead of
// the thread's later operations.
__device__ __forceinline__ int atomic_add_acq_rel_gpu(int* addr, int value) {
  int old;
  asm volatile("atom.acq_rel.gpu.global.add.s32 %0, [%1], %2;\n" : "=r"(old) : "l"(addr), "r"(value) : "memory");
  return old;
}

}  // namespace flashpp::cuda::ptx
