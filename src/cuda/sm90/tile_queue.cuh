#pragma once
// The dynamic schedule of the Hopper forward (FwdKnobs::tile_counter): after its
// first tile (its block index), the producer thread claims each next tile from a
// global counter and hands the index to the consumer warpgroups through a ring of
// kTileSlots ints in shared memory with full/empty mbarriers; -1 ends the walk.
// Blocks that finish early claim more, so the grid ends together however uneven
// the tiles are (varlen batches: the static order's busiest block carries 10-70%
// more than the mean for spread-out lengths, a greedy claim ~1-3%).
#include <cstdint>

#include "cuda/ptx/mbarrier.cuh"
#include "cuda/sm90/fwd_tiles.hpp"  // kTileSlots, kTileQueueBytes

namespace flashpp::cuda::sm90 {

static_assert(kTileQueueBytes == 4 * kTileSlots + 16 * kTileSlots, "the slots, then full and empty mbarriers per slot");

struct TileQueue {
  std::uint32_t base;  // shared address of the slots, 8-byte aligned

  __device__ std::uint32_t full(int s) const { return base + 4 * kTileSlots + 8 * s; }
  __device__ std::uint32_t empty(int s) const { return base + 12 * kTileSlots + 8 * s; }

  // One thread, before the block-wide barrier that publishes the mbarriers.
  __device__ void init(std::uint32_t consumer_warps) const {
    for (int s = 0; s < kTileSlots; ++s) {
      ptx::mbarrier_init(full(s), 1);
      ptx::mbarrier_init(empty(s), consumer_warps);
    }
  }

  // Producer: the n-th index it hands over (waits for the slot's previous reader).
  __device__ void push(std::uint32_t n, int tile) const {
    const int s = int(n % kTileSlots);
    ptx::mbarrier_wait(empty(s), ((n / kTileSlots) & 1u) ^ 1u);
    asm volatile("st.shared.s32 [%0], %1;\n" ::"r"(base + 4 * s), "r"(tile) : "memory");
    ptx::mbarrier_arrive(full(s));  // release: the store above is seen by the acquiring waiters
  }

  // Every lane of a consumer warp: the n-th index; the warp's leader frees the slot
  // once all lanes have read it.
  __device__ int pop(std::uint32_t n, bool leader) const {
    const int s = int(n % kTileSlots);
    ptx::mbarrier_wait(full(s), (n / kTileSlots) & 1u);
    int tile;
    asm volatile("ld.shared.s32 %0, [%1];\n" : "=r"(tile) : "r"(base + 4 * s) : "memory");
    __syncwarp();
    if (leader) ptx::mbarrier_arrive(empty(s));
    return tile;
  }
};

}  // namespace flashpp::cuda::sm90
