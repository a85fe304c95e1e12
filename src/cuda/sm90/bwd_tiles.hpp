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
// K, V (16 KiB each), Q and dO per stage (8 KiB each), the dS^T panels (16 KiB),
// LSE and D per stage, barriers; plus 1 KiB to align the base.
inline constexpr std::size_t kBwdSmemBytes =
    1024 + 2 * 16384 + 2 * kBwdStages * 8192 + kBwdPanels * 16384 + 2 * kBwdStages * 256 + 128;
static_assert(kBwdSmemBytes <= kSmemLimit, "the Hopper backward's shared memory must fit one block");

// Head dims this kernel is compiled for.
constexpr bool bwd90_head_dim(int d) { return d == 64; }

}  // namespace flashpp::cuda::sm90
