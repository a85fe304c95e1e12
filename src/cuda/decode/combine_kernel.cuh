#pragma once
// Merges the split partials of the decode kernel into the final rows: one warp
// per (sequence, query head, position). The math is common/lse_merge.hpp's:
// LSE = logsumexp of the split LSEs, O = sum of exp(LSE_s - LSE) * O_s over
// the splits that saw a key (the others are never read).
#include <cuda_runtime.h>

#include <cstdint>

#include "common/lse_merge.hpp"
#include "cuda/common/element.cuh"
#include "cuda/decode/decode_args.hpp"
#include "cuda/decode/decode_config.hpp"

namespace flashpp::cuda::decode {

inline constexpr int kCombineWarps = 4;

template <typename T>
__global__ void __launch_bounds__(kCombineWarps * 32) combine_kernel(const __grid_constant__ DecodeArgs args) {
  __shared__ float split_lse[kCombineWarps][kMaxSplits];
  const AttnParams& a = args.p.attn;
  const int splits = args.p.num_splits;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const std::int64_t row = std::int64_t(blockIdx.x) * kCombineWarps + warp;
  if (row >= args.part_rows) return;  // whole warps only; no block barrier below

  LseMerge m;
  for (int s = lane; s < splits; s += 32) {
    const float x = args.lse_part[std::int64_t(s) * args.part_rows + row];
    split_lse[warp][s] = x;
    m.add(x);
  }
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) {
    LseMerge o;
    o.max = __shfl_xor_sync(0xffffffffu, m.max, off);
    o.sum = __shfl_xor_sync(0xffffffffu, m.sum, off);
    m.add(o);
  }
  const float lse = m.lse();
  __syncwarp();

  const int i = int(row % a.seqlen_q);
  const int h = int((row / a.seqlen_q) % a.heads_q);
  const int b = int(row / (std::int64_t(a.seqlen_q) * a.heads_q));
  const int dv = a.head_dim_v;
  T* out = static_cast<T*>(a.o) + b * a.o_batch_stride + std::int64_t(i) * a.o_row_stride + std::int64_t(h) * a.o_head_stride;
  for (int c = lane * 4; c < dv; c += 128) {
    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
    for (int s = 0; s < splits; ++s) {
      const float w = merge_weight(split_lse[warp][s], lse);
      if (w == 0.f) continue;
      const float4 x = *reinterpret_cast<const float4*>(args.o_part + (std::int64_t(s) * args.part_rows + row) * dv + c);
      acc.x += w * x.x;
      acc.y += w * x.y;
      acc.z += w * x.z;
      acc.w += w * x.w;
    }
    uint2 packed;
    packed.x = Element<T>::pack(acc.x, acc.y);
    packed.y = Element<T>::pack(acc.z, acc.w);
    *reinterpret_cast<uint2*>(out + c) = packed;
  }
  if (lane == 0 && a.lse != nullptr) a.lse[b * a.lse_batch_stride + std::int64_t(h) * a.lse_head_stride + i] = lse;
}

}  // namespace flashpp::cuda::decode
