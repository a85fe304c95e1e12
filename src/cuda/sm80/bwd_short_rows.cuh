#pragma once
// D for query rows that see only a few keys, from the probabilities themselves:
// D = sum_j P_j dP_j / sum_j P_j, with P_j = exp2(S_j - LSE) recomputed from q, k
// and the forward's LSE and dP_j = dO . v_j, all in fp32. Dividing by the sum
// cancels the rounding of LSE, which under large logits (scores ~1e4 in the log2
// domain) puts P ~1e-3 away from a distribution.
//
// Why: D = rowsum(dO * O) reads O rounded to 16 bits. For a row with many keys that
// rounding is one error among many of the same size; for a row with two or three
// keys, one of them dominant, dS = P (dP - D) is a small difference and the rounding
// of O is most of it (a large softmax_scale then multiplies it into dQ and dK). The
// exact sum costs 2 * keys * head_dim multiply-adds per row, which is cheap exactly
// where it matters. Rows with a single key keep dot_do_o_kernel's D: its mma order
// matches the backward's dP exactly, so dP - D = 0 there. Not used with
// partial_keys: there O (and so D) covers keys this call does not see.
#include <cuda_runtime.h>

#include <cstdint>

#include "common/mask.hpp"
#include "common/params.hpp"
#include "cuda/common/element.cuh"
#include "cuda/common/scores.cuh"
#include "cuda/common/sequence.cuh"

namespace flashpp::cuda::sm80 {

// Rows with 2 .. kShortRowKeys visible keys take the sum over P (one key tile).
constexpr int kShortRowKeys = 64;
constexpr int kShortRowThreads = 256;
// Columns per lane in one pass over a row: head dims up to 256, two per 32-bit load.
constexpr int kShortRowPairs = 4;

// Sequence of a global query row: division for fixed length, binary search of
// cu_seqlens_q for varlen. Returns -1 for rows past the last sequence.
__device__ __forceinline__ int sequence_of_row(const AttnParams& p, std::int64_t row) {
  if (p.cu_seqlens_q == nullptr) return int(row / p.seqlen_q);
  int lo = 0, hi = p.batch;  // cu_seqlens_q[lo] <= row < cu_seqlens_q[hi]
  if (row >= p.cu_seqlens_q[hi]) return -1;
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (p.cu_seqlens_q[mid] <= row)
      lo = mid;
    else
      hi = mid;
  }
  return lo;
}

__device__ __forceinline__ float warp_sum(float x) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

// Sum of a[c] * b[c] over one warp's row pair, columns [0, n), two per lane per pass.
template <typename T>
__device__ __forceinline__ float warp_dot(const float (&a)[kShortRowPairs][2], const T* b, int n, int lane) {
  float acc = 0.f;
#pragma unroll
  for (int i = 0; i < kShortRowPairs; ++i) {
    const int c = 2 * (lane + 32 * i);
    if (c < n) {
      float lo, hi;
      unpack2<T>(*reinterpret_cast<const std::uint32_t*>(b + c), lo, hi);
      acc = fmaf(a[i][0], lo, fmaf(a[i][1], hi, acc));
    }
  }
  return warp_sum(acc);
}

template <typename T>
__device__ __forceinline__ void load_row(float (&dst)[kShortRowPairs][2], const T* src, int n, int lane) {
#pragma unroll
  for (int i = 0; i < kShortRowPairs; ++i) {
    const int c = 2 * (lane + 32 * i);
    dst[i][0] = dst[i][1] = 0.f;
    if (c < n) unpack2<T>(*reinterpret_cast<const std::uint32_t*>(src + c), dst[i][0], dst[i][1]);
  }
}

// One thread per (row, head) pair (the order of dot_do_o_kernel) finds whether its
// row is short; the warp then computes the short rows of its 32 pairs one by one.
template <typename T>
__global__ void __launch_bounds__(kShortRowThreads)
    short_row_dsum_kernel(const __grid_constant__ AttnParams p, float* dsum, std::int64_t total_rows) {
  const int lane = threadIdx.x & 31;
  const std::int64_t pair = std::int64_t(blockIdx.x) * kShortRowThreads + threadIdx.x;
  bool short_row = false;
  int b = -1, h = 0, r = 0;
  SeqRows seq;
  if (pair < total_rows * p.heads_q) {
    const std::int64_t row = pair / p.heads_q;
    h = int(pair - row * p.heads_q);
    b = sequence_of_row(p, row);
    if (b >= 0) {
      seq = sequence_rows(p, b);
      r = int(row - seq.q_global0);
      const KeyBounds kb = key_bounds(r, seq, p.window_left, p.window_right);
      short_row = kb.hi - kb.lo >= 2 && kb.hi - kb.lo <= kShortRowKeys;
    }
  }
  unsigned todo = __ballot_sync(0xffffffffu, short_row);
  const ScoreMap smap = ScoreMap::from(p);
  while (todo != 0) {
    const int src = __ffs(todo) - 1;
    todo &= todo - 1;
    const int wb = __shfl_sync(0xffffffffu, b, src), wh = __shfl_sync(0xffffffffu, h, src);
    const int wr = __shfl_sync(0xffffffffu, r, src);
    const SeqRows ws = sequence_rows(p, wb);
    const KeyBounds kb = key_bounds(wr, ws, p.window_left, p.window_right);
    const int hk = wh / p.gqa_ratio;
    const std::int64_t qrow = ws.q0 + wr;
    float q[kShortRowPairs][2], g[kShortRowPairs][2];
    load_row<T>(q, static_cast<const T*>(p.q) + wb * p.q_batch_stride + qrow * p.q_row_stride +
                       std::int64_t(wh) * p.q_head_stride,
                p.head_dim, lane);
    load_row<T>(g, static_cast<const T*>(p.dout) + wb * p.do_batch_stride + qrow * p.do_row_stride +
                       std::int64_t(wh) * p.do_head_stride,
                p.head_dim_v, lane);
    const float lse2 = lse_to_log2(
        p.lse[wb * p.lse_batch_stride + std::int64_t(wh) * p.lse_head_stride + qrow], true);
    const T* k = static_cast<const T*>(p.k) + wb * p.k_batch_stride + std::int64_t(hk) * p.k_head_stride;
    const T* v = static_cast<const T*>(p.v) + wb * p.v_batch_stride + std::int64_t(hk) * p.v_head_stride;
    float d = 0.f, l = 0.f;
    for (int j = kb.lo; j < kb.hi; ++j) {
      const float s = warp_dot<T>(q, k + (ws.k0 + j) * p.k_row_stride, p.head_dim, lane);
      const float dp = warp_dot<T>(g, v + (ws.k0 + j) * p.v_row_stride, p.head_dim_v, lane);
      const float x = smap.capped ? tanhf(s * smap.pre) * smap.log2sc : s * smap.log2sc;
      const float pr = exp2f(x - lse2);
      d = fmaf(pr, dp, d);
      l += pr;
    }
    if (lane == 0 && l > 0.f) dsum[std::int64_t(wh) * total_rows + ws.q_global0 + wr] = d / l;
  }
}

}  // namespace flashpp::cuda::sm80
