#pragma once
// Split-KV merge, run by the last split block of a (sequence, kv head, row
// block) to finish: it reads every split's partial (O, LSE) of its rows and
// writes the final rows. The math is common/lse_merge.hpp's: LSE = logsumexp
// of the split LSEs, O = sum of exp(LSE_s - LSE) * O_s over the splits that
// saw a key. Fusing it into the attention kernel saves a second launch, and
// the merge of one kv head overlaps the other heads' streams.
//
// The partials of the other blocks were written by other SMs during this
// launch, so they are read with ld.global.cg (L2, never a stale L1 line).
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/common/element.cuh"
#include "cuda/decode/decode_args.hpp"
#include "cuda/decode/decode_config.hpp"
#include "cuda/ptx/math.cuh"

namespace flashpp::cuda::decode {

// Partial row of packed row `pr` (query position pr / gqa, head hk * gqa + pr % gqa).
__device__ __forceinline__ std::int64_t partial_row(const DecodeArgs& args, int b, int hk, int pr) {
  const AttnParams& a = args.p.attn;
  const int gq = a.gqa_ratio;
  return (std::int64_t(b) * a.heads_q + hk * gq + pr % gq) * a.seqlen_q + pr / gq;
}

// (acc, sum) += the partials x[u] weighted by 2^(l[u] - m): l holds their
// log2-domain LSEs, -inf for a split that saw no key (it adds nothing; its O
// was never written), and m is at least their max.
template <int N>
__device__ __forceinline__ void add_weighted_partials(float4& acc, float& sum, const float (&l)[N], const float4 (&x)[N],
                                                      float m) {
#pragma unroll
  for (int u = 0; u < N; ++u) {
    if (l[u] == -INFINITY) continue;
    const float w = ptx::ex2_approx(l[u] - m);
    sum += w;
    acc.x += w * x[u].x;
    acc.y += w * x[u].y;
    acc.z += w * x[u].z;
    acc.w += w * x[u].w;
  }
}

// Writes 4 columns (from c) of merged packed row pr: O = acc / sum and, at c = 0,
// LSE = (m + log2 sum) ln 2 (m: the log2-domain max the weights were taken
// against); O = 0 and LSE = -inf where no split saw a key (sum = 0).
template <typename T>
__device__ __forceinline__ void store_merged_row(const AttnParams& a, int b, int hk, int pr, int c, const float4& acc,
                                                 float sum, float m) {
  constexpr float kLn2 = 0.69314718055994531f;
  const float inv = sum > 0.f ? __frcp_rn(sum) : 0.f;
  const int i = pr / a.gqa_ratio, h = hk * a.gqa_ratio + pr % a.gqa_ratio;
  T* out = static_cast<T*>(a.o) + b * a.o_batch_stride + std::int64_t(i) * a.o_row_stride +
           std::int64_t(h) * a.o_head_stride + c;
  uint2 packed;
  packed.x = Element<T>::pack(acc.x * inv, acc.y * inv);
  packed.y = Element<T>::pack(acc.z * inv, acc.w * inv);
  *reinterpret_cast<uint2*>(out) = packed;
  if (c == 0 && a.lse != nullptr)
    a.lse[b * a.lse_batch_stride + std::int64_t(h) * a.lse_head_stride + i] =
        sum > 0.f ? (m + __log2f(sum)) * kLn2 : -INFINITY;
}

// Block-wide (all threads call it). Each thread owns 4 output columns of a
// row and loads the LSE and O partials of kChunk splits at once, so the merge
// costs one L2 round trip per kChunk splits (the LSEs of a row are the same
// address across the row's threads: one request per warp). The chunks fold
// into a running max as in online softmax (the sums of common/lse_merge.hpp,
// with the exp2 instruction on log2-domain LSEs).
template <typename T, int D>
__device__ __forceinline__ void merge_split_partials(const DecodeArgs& args, int b, int hk, int row0, int rows) {
  const AttnParams& a = args.p.attn;
  const int splits = args.p.num_splits, dv = a.head_dim_v;
  constexpr int kChunk = 16;
  constexpr float kLog2e = 1.4426950408889634f;
  const std::int64_t split_step = args.part_rows;
  for (int idx = threadIdx.x; idx < rows * (D / 4); idx += blockDim.x) {
    const int r = idx / (D / 4), c = (idx % (D / 4)) * 4;
    if (c >= dv) continue;
    const std::int64_t row = partial_row(args, b, hk, row0 + r);
    const float* lse_src = args.lse_part + row;
    const float* o_src = args.o_part + row * dv + c;
    float run_max = -INFINITY, run_sum = 0.f;
    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
    for (int s0 = 0; s0 < splits; s0 += kChunk) {
      float l[kChunk];
      float4 x[kChunk];
#pragma unroll
      for (int u = 0; u < kChunk; ++u) {
        l[u] = -INFINITY;
        if (s0 + u < splits) {
          l[u] = __ldcg(lse_src + (s0 + u) * split_step);
          x[u] = __ldcg(reinterpret_cast<const float4*>(o_src + (s0 + u) * split_step * dv));
        }
      }
      float m = run_max;
#pragma unroll
      for (int u = 0; u < kChunk; ++u) {
        l[u] *= kLog2e;  // -inf stays -inf
        m = fmaxf(m, l[u]);
      }
      if (m == -INFINITY) continue;  // no split of this chunk (or before) saw a key
      // 2^(-inf - m) = 0 rescales the empty start away.
      const float rescale = ptx::ex2_approx(run_max - m);
      run_sum *= rescale;
      acc.x *= rescale;
      acc.y *= rescale;
      acc.z *= rescale;
      acc.w *= rescale;
      add_weighted_partials(acc, run_sum, l, x, m);
      run_max = m;
    }
    store_merged_row<T>(a, b, hk, row0 + r, c, acc, run_sum, run_max);
  }
}

}  // namespace flashpp::cuda::decode
