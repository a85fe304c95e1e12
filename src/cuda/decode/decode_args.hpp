#pragma once
// What the decode attention kernel receives (by value, as a
// __grid_constant__ argument), and the kernel entry each instance file
// provides. Host-visible: no CUDA device code here.
#include <cuda_runtime.h>

#include <cstdint>

#include "common/kvcache_params.hpp"

namespace flashpp::cuda::decode {

struct DecodeArgs {
  KVCacheParams p;
  // Split partials (num_splits > 1): partial row (split, row) of a call with
  // part_rows = batch * heads_q * seqlen_q rows, row = (b * heads_q + h) * seqlen_q + i.
  float* o_part = nullptr;    // (num_splits, part_rows, head_dim_v), normalized
  float* lse_part = nullptr;  // (num_splits, part_rows), -inf for a split that saw no key
  // One arrival counter per (sequence, kv head, row block), zero when the
  // launch starts (cleared on the stream, or caller-owned and left zero by the
  // previous call): the last split block to arrive merges and resets it.
  int* split_arrivals = nullptr;
  std::int64_t part_rows = 0;
  int rows_per_kv_head = 0;   // packed query rows sharing a kv head: seqlen_q * gqa_ratio
  // Programmatic dependent launch (sm90; no effect elsewhere): keys of the
  // block's split prefetched into L2 before the wait for the previous kernel
  // (span_prefetch.cuh), and when the block lets the next kernel launch: with
  // this many key tiles left to compute (0: after its last tile), or, when
  // negative, right after the wait.
  int prefetch_keys = 0;
  int dependents_tiles_left = -1;
  // sm90: when > 0 (it then equals p.num_splits), the launch's clusters are the
  // splits of one (sequence, kv head, row block) and the splits merge through
  // distributed shared memory (cluster_merge.cuh): no partials, no counters.
  int cluster_splits = 0;
};

// One compiled attention kernel (dtype, head dim, row tiles).
struct AttentionKernel {
  // Opts in to its shared memory on the current device and reports how many
  // blocks fit on one SM. Host-side only; call before capturing a graph.
  cudaError_t (*prepare)(int* blocks_per_sm);
  // sm90: how many clusters of `cluster` blocks (along the split dimension) can
  // be resident at once (0: none); opts the kernel in to clusters above 8.
  cudaError_t (*cluster_fit)(int cluster, int* max_clusters);
  // cluster > 1: launch with clusters of that many blocks along grid.y.
  cudaError_t (*launch)(const DecodeArgs& args, dim3 grid, cudaStream_t stream, bool dependent, int cluster);
  std::size_t smem_bytes;
};

// Defined by decode_kernel.cuh, instantiated in src/cuda/decode/instances/.
template <typename T, int D, int MT, bool WIDE>
AttentionKernel attention_kernel();

}  // namespace flashpp::cuda::decode
