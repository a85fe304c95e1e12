#pragma once
// L2 prefetch without a destination (sm90+): the bytes are fetched into L2 and
// nothing else changes, so a prefetch from an address whose contents are about
// to change is harmless (L2 is where every SM's writes meet). Below sm90 it
// compiles to nothing.
#include <cstdint>

namespace flashpp::cuda::ptx {

// cp.async.bulk.prefetch.L2.global: [gmem, gmem + bytes) into L2. gmem 16-byte
// aligned, bytes a multiple of 16; the range must lie inside an allocation.
__device__ __forceinline__ void prefetch_l2_bulk(const void* gmem, std::uint32_t bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n" ::"l"(gmem), "r"(bytes) : "memory");
#endif
}

}  // namespace flashpp::cuda::ptx
