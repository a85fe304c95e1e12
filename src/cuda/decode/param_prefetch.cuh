#pragma once
// Warms the constant cache with a kernel's whole __grid_constant__ parameter
// block. Parameters are launch constants, so the decode kernel reads them
// before it waits for the previous grid: without this, each line of the
// ~600-byte block misses the first time the code touches it, and the
// prologue, the epilogue and the split merge each paid such misses in series
// (docs/kvcache.md, fifth round). Thread i reads one word of line i, so all
// lines miss at once.
#include <cstdint>

namespace flashpp::cuda::decode {

inline constexpr int kParamLineBytes = 32;  // at most one constant-cache line

template <typename Args>
__device__ __forceinline__ std::uint32_t touch_params(const Args& args) {
  constexpr int kLines = int((sizeof(Args) + kParamLineBytes - 1) / kParamLineBytes);
  std::uint32_t v = 0;
  if (threadIdx.x < kLines) v = reinterpret_cast<const std::uint32_t*>(&args)[threadIdx.x * (kParamLineBytes / 4)];
  return v;
}

// Consumes the touched word so the load stays, without an observable effect:
// a store to `scratch` (shared memory the kernel overwrites before reading)
// under a condition the compiler cannot fold. Call it after the wait, so the
// load's latency hides behind it.
__device__ __forceinline__ void keep_touched(std::uint32_t v, std::uint32_t scratch) {
  asm volatile(
      "{\n .reg .pred p;\n setp.eq.u32 p, %0, 0x7fc00001;\n @p st.shared.u32 [%1], %0;\n}\n" ::"r"(v), "r"(scratch)
      : "memory");
}

}  // namespace flashpp::cuda::decode
