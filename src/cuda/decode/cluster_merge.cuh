#pragma once
// Split-KV merge through distributed shared memory (sm90), for launches whose
// cluster is the num_splits blocks of one (sequence, kv head, row block): each
// block leaves its split's partial (O, normalized, and its LSE in the log2
// domain) in its own shared memory; after one cluster barrier every block
// merges a share of the output elements, reading the splits' partials from
// their blocks' shared memory, and writes the final rows. Against the global
// path (split_combine.cuh) this drops the partial stores to L2, the arrival
// atomic and the last block's L2 reads from a batch-1 step's critical path;
// what stays is two cluster barriers and one round of remote shared-memory loads.
// The math is common/lse_merge.hpp's: LSE = logsumexp of the split LSEs,
// O = sum of 2^(lse2_s - LSE2) * O_s over the splits that saw a key.
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/common/element.cuh"
#include "cuda/decode/decode_args.hpp"
#include "cuda/decode/decode_config.hpp"
#include "cuda/decode/split_combine.cuh"  // add_weighted_partials, store_merged_row
#include "cuda/ptx/cluster.cuh"
#include "cuda/ptx/math.cuh"

namespace flashpp::cuda::decode {

// Block-wide (every thread of every block of the cluster calls it), after a
// cluster_sync() that follows every block's partial writes. part_o:
// shared-memory address of this block's partial, [rows][D] floats (row stride
// D); part_lse2: its [rows] log2-domain LSEs (-inf where the split saw no key).
template <typename T, int D>
__device__ __forceinline__ void merge_cluster_partials(const DecodeArgs& args, int b, int hk, int row0, int rows,
                                                       std::uint32_t part_o, std::uint32_t part_lse2) {
  const AttnParams& a = args.p.attn;
  const int splits = args.cluster_splits, dv = a.head_dim_v;
  const int rank = int(ptx::cluster_rank());

  // Output element idx (a row and 4 columns) is merged by block idx % splits.
  const int items = rows * (D / 4);
  for (int idx = rank + splits * int(threadIdx.x); idx < items; idx += splits * int(blockDim.x)) {
    const int r = idx / (D / 4), c = (idx % (D / 4)) * 4;
    if (c >= dv) continue;
    const std::uint32_t lse_off = part_lse2 + 4u * std::uint32_t(r);
    const std::uint32_t o_off = part_o + 4u * std::uint32_t(r * D + c);
    // All loads first (independent remote round trips), then the sums.
    float l[kMaxClusterSplits];
    float4 x[kMaxClusterSplits];
#pragma unroll
    for (int s = 0; s < kMaxClusterSplits; ++s) {
      l[s] = -INFINITY;
      if (s < splits) {
        l[s] = ptx::ld_cluster_f32(ptx::cluster_map(lse_off, std::uint32_t(s)));
        x[s] = ptx::ld_cluster_f32x4(ptx::cluster_map(o_off, std::uint32_t(s)));
      }
    }
    float m = -INFINITY;
#pragma unroll
    for (int s = 0; s < kMaxClusterSplits; ++s) m = fmaxf(m, l[s]);
    float sum = 0.f;
    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
    if (m != -INFINITY) add_weighted_partials(acc, sum, l, x, m);
    store_merged_row<T>(a, b, hk, row0 + r, c, acc, sum, m);
  }
  ptx::cluster_sync();  // no block exits while another may still read its shared memory
}

}  // namespace flashpp::cuda::decode
