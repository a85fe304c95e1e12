#pragma once
// D for query rows that see only a few keys, from the probabilities themselves:
// D = sum_j P_j dP_j / sum_j P_j, with P_j = exp2(S_j - LSE) recomputed from q, k
// and the forward's LSE and dP_j = dO . v_j, in fp32. Dividing by the sum cancels
// the rounding of LSE, which under large logits (scores ~1e4 in the log2 domain)
// puts P ~1e-3 away from a distribution. Rows with large scores (kMmaScoreLimit)
// take S_j and dP_j from the mma.m16n8k16 sequence the backward kernels use
// (16-column k steps in order, from a zero accumulator), so for the dominant key of
// a nearly one-hot row dP - D is the softmax's own small difference: summed in
// another order (an fp32 dot product), the two orders' difference (~1e-6 of |dP|)
// times a large q made dK miss the tolerance by 3x. That path is slower
// (short_row_dsum_mma), so the other rows keep the coalesced fp32 walk. Measured
// (H100): the mma order fixes the large-logit short-row cases; applied to every short
// row it cost 28-31% of the backward at causal N = 512. The large-score-only selection
// below is not yet timed, so it is opt-in (see short_row_dsum_kernel).
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
// Rows whose largest |score| (log2 domain) exceeds this take the mma-order D. Below
// it, q . k * scale is small enough that the fp32 walk's summation-order difference
// (~1e-6 of |dP|) stays far inside the tolerance in dK = sum dS q * scale.
constexpr float kMmaScoreLimit = 64.f;
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

__device__ __forceinline__ float warp_max(float x) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
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

// The row's D from the backward kernels' mma sequence (see the top of the file): one
// warp, whose 16 x 8 mma tiles have all 16 A rows holding the pair's q (or dO) row and
// 8 keys as B columns; lanes read their fragment elements (two 4-byte pairs per k
// step) straight from global memory. Slower than the coalesced fp32 walk below (4-byte
// loads of 8 rows per instruction), so only rows with large scores take it.
template <typename T>
__device__ __forceinline__ void short_row_dsum_mma(const AttnParams& p, float* dsum, std::int64_t total_rows, int b,
                                                   const SeqRows& seq, int r, int h, const KeyBounds& kb, int n,
                                                   float lse2, const ScoreMap& smap, int lane) {
  constexpr int kTiles = kShortRowKeys / 8;
  const int g = lane >> 2, t4 = lane & 3;
  const int hk = h / p.gqa_ratio;
  const std::int64_t qrow = seq.q0 + r;
  const T* q = static_cast<const T*>(p.q) + b * p.q_batch_stride + qrow * p.q_row_stride +
               std::int64_t(h) * p.q_head_stride;
  const T* dout = static_cast<const T*>(p.dout) + b * p.do_batch_stride + qrow * p.do_row_stride +
                  std::int64_t(h) * p.do_head_stride;
  const T* k = static_cast<const T*>(p.k) + b * p.k_batch_stride + (seq.k0 + kb.lo) * p.k_row_stride +
               std::int64_t(hk) * p.k_head_stride;
  const T* v = static_cast<const T*>(p.v) + b * p.v_batch_stride + (seq.k0 + kb.lo) * p.v_row_stride +
               std::int64_t(hk) * p.v_head_stride;
  // Two elements at an even column, zero past the row's width (the kernels' tiles
  // are zero-filled there, and a zero k step adds exactly nothing).
  auto two = [](const T* src, int col, int cols) -> std::uint32_t {
    return col < cols ? *reinterpret_cast<const std::uint32_t*>(src + col) : 0u;
  };

  // One n tile (8 keys) at a time, so the path needs few registers (it shares the
  // kernel's register budget with the fp32 walk); each score's k steps are the same
  // sequence either way.
  const bool fold = smap.folds();
  const int k_end = max(p.head_dim, p.head_dim_v);
  float d_acc = 0.f, l_acc = 0.f;
  for (int nt = 0; nt < kTiles && nt * 8 < n; ++nt) {  // warp-uniform bounds
    const int key = nt * 8 + g;
    const bool valid = key < n;
    const T* krow = k + std::int64_t(valid ? key : 0) * p.k_row_stride;
    const T* vrow = v + std::int64_t(valid ? key : 0) * p.v_row_stride;
    float s[4] = {0.f, 0.f, 0.f, 0.f}, dp[4] = {0.f, 0.f, 0.f, 0.f};
    for (int k0 = 0; k0 < k_end; k0 += 16) {
      const int c0 = k0 + 2 * t4, c1 = c0 + 8;
      const std::uint32_t qa0 = two(q, c0, p.head_dim), qa1 = two(q, c1, p.head_dim);
      const std::uint32_t ga0 = two(dout, c0, p.head_dim_v), ga1 = two(dout, c1, p.head_dim_v);
      const std::uint32_t qa[4] = {qa0, qa0, qa1, qa1}, ga[4] = {ga0, ga0, ga1, ga1};
      const std::uint32_t kf[2] = {valid ? two(krow, c0, p.head_dim) : 0u, valid ? two(krow, c1, p.head_dim) : 0u};
      const std::uint32_t vf[2] = {valid ? two(vrow, c0, p.head_dim_v) : 0u, valid ? two(vrow, c1, p.head_dim_v) : 0u};
      Element<T>::mma(s, qa, kf);
      Element<T>::mma(dp, ga, vf);
    }
    // Lane (g, t4) holds keys nt * 8 + 2 t4 + {0, 1} in elements 0 and 1 (every g the
    // same row); lanes 0..3 sum them, mapped and exponentiated as the kernels do.
    if (g == 0) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        if (nt * 8 + 2 * t4 + e >= n) continue;
        float x = s[e];
        if (!fold) x = smap.capped ? tanhf(x * smap.pre) * smap.log2sc : x * smap.log2sc;
        const float pr = ptx::ex2_approx(fmaf(x, fold ? smap.log2sc : 1.f, -lse2));
        d_acc = fmaf(pr, dp[e], d_acc);
        l_acc += pr;
      }
    }
  }
  d_acc += __shfl_xor_sync(0xffffffffu, d_acc, 1);
  l_acc += __shfl_xor_sync(0xffffffffu, l_acc, 1);
  d_acc += __shfl_xor_sync(0xffffffffu, d_acc, 2);
  l_acc += __shfl_xor_sync(0xffffffffu, l_acc, 2);
  if (lane == 0 && l_acc > 0.f) dsum[std::int64_t(h) * total_rows + seq.q_global0 + r] = d_acc / l_acc;
}

// One warp per (row, head) pair (the order of dot_do_o_kernel: head fastest). The
// warp splits into groups of `group` lanes, each group one key row (8 columns per
// lane, 16-byte loads, so a row is read coalesced); the 32 / group groups take
// different keys, and a group sums its row with log2(group) shuffles. Keys are not
// walked one dependent L2 round trip at a time (a warp walking its rows and keys in
// turn took ~1 ms per call under a causal mask, where the first 63 rows of every
// sequence and head are short), and no lane reads a row 4 bytes at a time (32 rows
// per load instruction cost the L1 one wavefront per row).
// kMmaLargeScores: rows whose largest |score| exceeds kMmaScoreLimit redo the sum
// in mma order (short_row_dsum_mma). Off by default (FLASHPP_BWD_SHORT_ROW_MMA=1 turns
// it on) until timed on a GPU: the instantiation without it is the pass as measured.
template <typename T, bool kMmaLargeScores = false>
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

  float d_acc = 0.f, l_acc = 0.f, x_max = 0.f;
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
      if constexpr (kMmaLargeScores) x_max = fmaxf(x_max, fabsf(x));
    }
  }
  if constexpr (kMmaLargeScores) {
    if (warp_max(x_max) > kMmaScoreLimit)
      return short_row_dsum_mma<T>(p, dsum, total_rows, b, seq, r, h, kb, n, lse2, smap, lane);
  }
  const float d = warp_sum(d_acc), l = warp_sum(l_acc);
  if (lane == 0 && l > 0.f) dsum[std::int64_t(h) * total_rows + seq.q_global0 + r] = d / l;
}

}  // namespace flashpp::cuda::sm80
