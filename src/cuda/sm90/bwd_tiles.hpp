#pragma once
// Shape of the Hopper backward (bwd_kernel.cuh): one block per 128-key block, one
// producer and two consumer warpgroups, 64-query steps through a three-stage ring.
#include <cstddef>

#include "cuda/sm90/fwd_tiles.hpp"  // kProducerRegisters, kSmemLimit

namespace flashpp::cuda::sm90 {

inline constexpr int kBwdBlockN = 128;  // keys per block: 64 per consumer warpgroup
inline constexpr int kBwdBlockM = 64;   // queries per step
inline constexpr int kBwdStages = 3;    // Q / dO / LSE / D buffers (a stage is freed a step late)
inline constexpr int kBwdPanels = 3;    // dS^T panels (bwd_kernel.cuh says why three)
inline constexpr int kBwdThreads = 384;
// What a consumer raises itself to: the launch allocation (168 per thread) less the
// producer's kProducerRegisters, shared by the two consumers (as the forward's).
inline constexpr int kBwdConsumerRegisters = 240;
// Shared memory at head dim d (64 or 128: d / 64 panels of 64 columns per tile): K and
// V (128 rows), Q and dO per stage (64 rows), the dS^T panels (16 KiB), LSE and D per
// stage, barriers; plus 1 KiB to align the base. 210 KiB at d 128.
constexpr std::size_t bwd90_smem_bytes(int d) {
  return 1024 + 2 * std::size_t(kBwdBlockN) * 2 * d + 2 * kBwdStages * std::size_t(kBwdBlockM) * 2 * d +
         kBwdPanels * 16384 + 2 * kBwdStages * 256 + 128;
}
static_assert(bwd90_smem_bytes(128) <= kSmemLimit, "the Hopper backward's shared memory must fit one block");

// Head dims this kernel is compiled for.
constexpr bool bwd90_head_dim(int d) { return d == 64 || d == 128; }

}  // namespace flashpp::cuda::sm90
