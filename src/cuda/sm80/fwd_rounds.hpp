#pragma once
// The persistent FA2-class forward's schedule (fwd_persistent_kernel.cuh): which
// query block of the grid order (query block fastest, then head, batch) block c of
// a grid of G blocks of threads takes in round r. Host arithmetic too, so it is
// tested without a GPU (tests/cuda/test_fwd_rounds.cpp).
//
// Round r covers indices r G .. r G + G - 1, the same set as a wave of the plain
// kernel's grid, and hands them out rotated by r: block c takes r G + (c + r) % G.
// Without the rotation, when G is a multiple of a head's query-block count (132
// blocks of threads, 4 query blocks per head at N = 512), block c would get the same
// position of every head in every round, and under a causal mask that is the same
// length: the blocks holding the longest query blocks would finish rounds behind.
#if defined(__CUDACC__)
#define FLASHPP_ROUNDS_FN __host__ __device__ __forceinline__
#else
#define FLASHPP_ROUNDS_FN inline
#endif

namespace flashpp::cuda::sm80 {

FLASHPP_ROUNDS_FN constexpr int round_index(int round, int block, int grid) {
  return round * grid + (block + round) % grid;
}

}  // namespace flashpp::cuda::sm80
