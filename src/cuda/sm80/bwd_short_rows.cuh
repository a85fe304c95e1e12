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
// One warp per (row, head) pair; lane l takes keys lo + l and lo + l + 32.
constexpr int kShortRowWarps = 8;
constexpr int kShortRowThreads = 32 * kShortRowWarps;

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

// a . b0 and a . b1 over columns [0, n) (n a multiple of 8), two columns per 32-bit
// load, four loads in flight per row. a is the same row for every lane (one
// broadcast load), b0 and b1 are this lane's two key rows.
template <typename T>
__device__ __forceinline__ void dot2(const T* a, const T* b0, const T* b1, int n, float& r0, float& r1) {
  float acc0 = 0.f, acc1 = 0.f;
  for (int c = 0; c < n; c += 8) {
#pragma unroll
    for (int u = 0; u < 8; u += 2) {
      float x0, x1, y0, y1, z0, z1;
      unpack2<T>(*reinterpret_cast<const std::uint32_t*>(a + c + u), x0, x1);
      unpack2<T>(*reinterpret_cast<const std::uint32_t*>(b0 + c + u), y0, y1);
      unpack2<T>(*reinterpret_cast<const std::uint32_t*>(b1 + c + u), z0, z1);
      acc0 = fmaf(x0, y0, fmaf(x1, y1, acc0));
      acc1 = fmaf(x0, z0, fmaf(x1, z1, acc1));
    }
  }
  r0 = acc0;
  r1 = acc1;
}

// One warp per (row, head) pair (the order of dot_do_o_kernel: head fastest). A
// short row's keys are spread over the lanes, so its at most 64 keys cost one pass
// over the head dim, not one dependent L2 round trip and shuffle reduction per key
// (a warp walking its rows and keys in turn took ~1 ms per call under a causal
// mask, where the first 63 rows of every sequence and head are short).
template <typename T>
__global__ void __launch_bounds__(kShortRowThreads)
    short_row_dsum_kernel(const __grid_constant__ AttnParams p, float* dsum, std::int64_t total_rows) {
  const int lane = threadIdx.x & 31;
  const std::int64_t pair = std::int64_t(blockIdx.x) * kShortRowWarps + (threadIdx.x >> 5);
  if (pair >= total_rows * p.heads_q) return;
  const std::int64_t row = pair / p.heads_q;
  const int h = int(pair - row * p.heads_q);
  const int b = sequence_of_row(p, row);
  if (b < 0) return;
  const SeqRows seq = sequence_rows(p, b);
  const int r = int(row - seq.q_global0);
  const KeyBounds kb = key_bounds(r, seq, p.window_left, p.window_right);
  const int n = kb.hi - kb.lo;
  if (n < 2 || n > kShortRowKeys) return;  // warp-uniform: every lane has the same pair

  const int hk = h / p.gqa_ratio;
  const std::int64_t qrow = seq.q0 + r;
  const T* q = static_cast<const T*>(p.q) + b * p.q_batch_stride + qrow * p.q_row_stride +
               std::int64_t(h) * p.q_head_stride;
  const T* g = static_cast<const T*>(p.dout) + b * p.do_batch_stride + qrow * p.do_row_stride +
               std::int64_t(h) * p.do_head_stride;
  const float lse2 = lse_to_log2(p.lse[b * p.lse_batch_stride + std::int64_t(h) * p.lse_head_stride + qrow], true);
  // This lane's keys; lanes past the row's end read its first key and drop it.
  const bool has0 = lane < n, has1 = lane + 32 < n;
  const std::int64_t j0 = seq.k0 + kb.lo + (has0 ? lane : 0), j1 = seq.k0 + kb.lo + (has1 ? lane + 32 : 0);
  const T* k = static_cast<const T*>(p.k) + b * p.k_batch_stride + std::int64_t(hk) * p.k_head_stride;
  const T* v = static_cast<const T*>(p.v) + b * p.v_batch_stride + std::int64_t(hk) * p.v_head_stride;
  float s0, s1, dp0, dp1;
  dot2<T>(q, k + j0 * p.k_row_stride, k + j1 * p.k_row_stride, p.head_dim, s0, s1);
  dot2<T>(g, v + j0 * p.v_row_stride, v + j1 * p.v_row_stride, p.head_dim_v, dp0, dp1);
  const ScoreMap smap = ScoreMap::from(p);
  auto prob = [&](float sc) {
    const float x = smap.capped ? tanhf(sc * smap.pre) * smap.log2sc : sc * smap.log2sc;
    return exp2f(x - lse2);
  };
  const float p0 = has0 ? prob(s0) : 0.f, p1 = has1 ? prob(s1) : 0.f;
  const float d = warp_sum(fmaf(p0, dp0, p1 * dp1));
  const float l = warp_sum(p0 + p1);
  if (lane == 0 && l > 0.f) dsum[std::int64_t(h) * total_rows + seq.q_global0 + r] = d / l;
}

}  // namespace flashpp::cuda::sm80
