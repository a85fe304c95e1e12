#pragma once
// Split-KV merge, run by the last split block of a (sequence, kv head, row
// block) to finish: it reads every split's partial (O, LSE) of its rows and
// writes the final rows. The math is common/lse_merge.hpp's: LSE = logsumexp
// of the split LSEs, O = sum of exp(LSE_s - LSE) * O_s over the splits that
// saw a key. Fusing it into the attention kernel saves a second launch, and
// the merge of one kv head overlaps the other heads' streams.
//
// The partials of the other blocks were written by other SMs during this
// launch, so they are read with ld.global.cg (L2, never a stale L1 line). The
// loads of all splits of a row are issued before their sum needs them: the
// merge costs a few L2 round trips, not one per split.
#include <cuda_runtime.h>

#include <cstdint>

#include "common/lse_merge.hpp"
#include "cuda/common/element.cuh"
#include "cuda/decode/decode_args.hpp"
#include "cuda/decode/decode_config.hpp"

namespace flashpp::cuda::decode {

// Partial row of packed row `pr` (query position pr / gqa, head hk * gqa + pr % gqa).
__device__ __forceinline__ std::int64_t partial_row(const DecodeArgs& args, int b, int hk, int pr) {
  const AttnParams& a = args.p.attn;
  const int gq = a.gqa_ratio;
  return (std::int64_t(b) * a.heads_q + hk * gq + pr % gq) * a.seqlen_q + pr / gq;
}

// Block-wide (all threads call it). lse_s: rows x kMaxSplits floats of shared memory.
template <typename T, int D>
__device__ __forceinline__ void merge_split_partials(const DecodeArgs& args, int b, int hk, int row0, int rows,
                                                     float (*lse_s)[kMaxSplits]) {
  const AttnParams& a = args.p.attn;
  const int splits = args.p.num_splits, gq = a.gqa_ratio, dv = a.head_dim_v;
  for (int idx = threadIdx.x; idx < rows * splits; idx += blockDim.x) {
    const int r = idx / splits, s = idx % splits;
    lse_s[r][s] = __ldcg(args.lse_part + std::int64_t(s) * args.part_rows + partial_row(args, b, hk, row0 + r));
  }
  __syncthreads();

  constexpr int kUnroll = 8;
  for (int idx = threadIdx.x; idx < rows * (D / 4); idx += blockDim.x) {
    const int r = idx / (D / 4), c = (idx % (D / 4)) * 4;
    if (c >= dv) continue;
    LseMerge m;
    for (int s = 0; s < splits; ++s) m.add(lse_s[r][s]);
    const float lse = m.lse();
    const std::int64_t row = partial_row(args, b, hk, row0 + r);
    const float* src = args.o_part + row * dv + c;
    const std::int64_t split_step = args.part_rows * dv;
    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
    for (int s0 = 0; s0 < splits; s0 += kUnroll) {
      float4 x[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
        if (s0 + u < splits) x[u] = __ldcg(reinterpret_cast<const float4*>(src + (s0 + u) * split_step));
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        if (s0 + u >= splits) break;
        const float w = merge_weight(lse_s[r][s0 + u], lse);
        if (w == 0.f) continue;  // a split that saw no key adds nothing
        acc.x += w * x[u].x;
        acc.y += w * x[u].y;
        acc.z += w * x[u].z;
        acc.w += w * x[u].w;
      }
    }
    const int pr = row0 + r, i = pr / gq, h = hk * gq + pr % gq;
    T* out = static_cast<T*>(a.o) + b * a.o_batch_stride + std::int64_t(i) * a.o_row_stride +
             std::int64_t(h) * a.o_head_stride + c;
    uint2 packed;
    packed.x = Element<T>::pack(acc.x, acc.y);
    packed.y = Element<T>::pack(acc.z, acc.w);
    *reinterpret_cast<uint2*>(out) = packed;
    if (c == 0 && a.lse != nullptr) a.lse[b * a.lse_batch_stride + std::int64_t(h) * a.lse_head_stride + i] = lse;
  }
}

}  // namespace flashpp::cuda::decode
