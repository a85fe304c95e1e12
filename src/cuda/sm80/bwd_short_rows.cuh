#pragma once
// D for query rows that see only a few keys, from the probabilities themselves:
// D = sum_j P_j dP_j / sum_j P_j, with P_j = exp2(S_j - LSE) recomputed from q, k
// and the forward's LSE and dP_j = dO . v_j, in fp32. Dividing by the sum cancels
// the rounding of LSE, which under large logits (scores ~1e4 in the log2 domain)
// puts P ~1e-3 away from a distribution. The sum runs in fp32 dot products, in
// another order than the kernels' mma dP; for a row whose softmax sits on one key
// that order difference (~1e-6 of |dP|) still matters under large logits, and the
// main kernel marks such rows for the exact-D pass (bwd_exact_d.cuh), which
// replaces this D there.
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
#include "cuda/sm80/bwd_args.hpp"

namespace flashpp::cuda::sm80 {

// One warp per (row, head) pair.
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

// Eight elements from a 16-byte aligned address (row starts are, on CUDA).
template <typename T>
__device__ __forceinline__ void load8(const T* src, float (&dst)[8]) {
  const uint4 u = *reinterpret_cast<const uint4*>(src);
  unpack2<T>(u.x, dst[0], dst[1]);
  unpack2<T>(u.y, dst[2], dst[3]);
  unpack2<T>(u.z, dst[4], dst[5]);
  unpack2<T>(u.w, dst[6], dst[7]);
}

__device__ __forceinline__ float dot8(const float (&a)[8], const float (&b)[8]) {
  float acc = 0.f;
#pragma unroll
  for (int i = 0; i < 8; ++i) acc = fmaf(a[i], b[i], acc);
  return acc;
}

// One warp per (row, head) pair (the order of dot_do_o_kernel: head fastest). The
// warp splits into groups of `group` lanes, each group one key row (8 columns per
// lane, 16-byte loads, so a row is read coalesced); the 32 / group groups take
// different keys, and a group sums its row with log2(group) shuffles. Keys are not
// walked one dependent L2 round trip at a time (a warp walking its rows and keys in
// turn took ~1 ms per call under a causal mask, where the first 63 rows of every
// sequence and head are short), and no lane reads a row 4 bytes at a time (32 rows
// per load instruction cost the L1 one wavefront per row).
// lead_rows > 0 (fixed-length batches only): only the first lead_rows rows of every
// sequence can be short (short_row_lead), and the grid covers just those.
template <typename T>
__global__ void __launch_bounds__(kShortRowThreads)
    short_row_dsum_kernel(const __grid_constant__ AttnParams p, float* dsum, std::int64_t total_rows, int lead_rows) {
  const int lane = threadIdx.x & 31;
  const std::int64_t pair = std::int64_t(blockIdx.x) * kShortRowWarps + (threadIdx.x >> 5);
  std::int64_t row;
  int h, b;
  if (lead_rows > 0) {
    if (pair >= std::int64_t(p.batch) * lead_rows * p.heads_q) return;
    const std::int64_t seq_row = pair / p.heads_q;  // b * lead_rows + r
    h = int(pair - seq_row * p.heads_q);
    b = int(seq_row / lead_rows);
    row = std::int64_t(b) * p.seqlen_q + (seq_row - std::int64_t(b) * lead_rows);
  } else {
    if (pair >= total_rows * p.heads_q) return;
    row = pair / p.heads_q;
    h = int(pair - row * p.heads_q);
    b = sequence_of_row(p, row);
    if (b < 0) return;
  }
  const SeqRows seq = sequence_rows(p, b);
  const int r = int(row - seq.q_global0);
  const KeyBounds kb = key_bounds(r, seq, p.window_left, p.window_right);
  const int n = kb.hi - kb.lo;
  if (n < 2 || n > kShortRowKeys) return;  // warp-uniform: every lane has the same pair

  int group = 1;  // lanes per key row: head dim / 8, rounded up to a power of two
  while (8 * group < max(p.head_dim, p.head_dim_v)) group *= 2;
  const int keys_per_pass = 32 / group, sub = lane & (group - 1), slot = lane / group, c = 8 * sub;
  const bool has_k = c < p.head_dim, has_v = c < p.head_dim_v;

  const int hk = h / p.gqa_ratio;
  const std::int64_t qrow = seq.q0 + r;
  float qv[8] = {}, gv[8] = {};
  if (has_k)
    load8<T>(static_cast<const T*>(p.q) + b * p.q_batch_stride + qrow * p.q_row_stride +
                 std::int64_t(h) * p.q_head_stride + c,
             qv);
  if (has_v)
    load8<T>(static_cast<const T*>(p.dout) + b * p.do_batch_stride + qrow * p.do_row_stride +
                 std::int64_t(h) * p.do_head_stride + c,
             gv);
  const float lse2 = lse_to_log2(p.lse[b * p.lse_batch_stride + std::int64_t(h) * p.lse_head_stride + qrow], true);
  const T* k = static_cast<const T*>(p.k) + b * p.k_batch_stride + std::int64_t(hk) * p.k_head_stride + c;
  const T* v = static_cast<const T*>(p.v) + b * p.v_batch_stride + std::int64_t(hk) * p.v_head_stride + c;
  const ScoreMap smap = ScoreMap::from(p);

  float d_acc = 0.f, l_acc = 0.f;
  // The same trip count on every lane (the shuffles need the whole warp); groups
  // past the row's end read its first key and drop it.
#pragma unroll 4
  for (int base = 0; base < n; base += keys_per_pass) {
    const bool valid = base + slot < n;
    const std::int64_t key = seq.k0 + kb.lo + (valid ? base + slot : 0);
    float kv[8], vv[8], s = 0.f, dp = 0.f;
    if (has_k) {
      load8<T>(k + key * p.k_row_stride, kv);
      s = dot8(qv, kv);
    }
    if (has_v) {
      load8<T>(v + key * p.v_row_stride, vv);
      dp = dot8(gv, vv);
    }
    for (int o = group / 2; o > 0; o >>= 1) {
      s += __shfl_xor_sync(0xffffffffu, s, o);
      dp += __shfl_xor_sync(0xffffffffu, dp, o);
    }
    if (sub == 0 && valid) {
      const float x = smap.capped ? tanhf(s * smap.pre) * smap.log2sc : s * smap.log2sc;
      const float pr = exp2f(x - lse2);
      d_acc = fmaf(pr, dp, d_acc);
      l_acc += pr;
    }
  }
  const float d = warp_sum(d_acc), l = warp_sum(l_acc);
  if (lane == 0 && l > 0.f) dsum[std::int64_t(h) * total_rows + seq.q_global0 + r] = d / l;
}

}  // namespace flashpp::cuda::sm80
