#pragma once
// The two memory-bound passes around the backward kernel:
//  - dot_do_o_kernel:   D[h][row] = sum_c dO[row, h, c] * O[row, h, c] in fp32 (the
//    softmax-gradient correction, computed once instead of per key block, on the
//    tensor cores for the reason given at the kernel);
//  - dq_convert_kernel: dQ = scale * dQ_accum (fp32 workspace) -> T with dq's strides.
// Rows are "global" rows: b * seqlen_q + r for fixed length, the packed row for varlen.
#include <cuda_runtime.h>

#include <cstdint>

#include "common/params.hpp"
#include "cuda/common/element.cuh"
#include "cuda/sm80/bwd_args.hpp"

namespace flashpp::cuda::sm80 {

// Element offset of (global row, head) in a tensor with the given strides.
__device__ __forceinline__ std::int64_t row_offset(const AttnParams& p, std::int64_t row, int h, std::int64_t bs,
                                                   std::int64_t rs, std::int64_t hs) {
  if (p.cu_seqlens_q != nullptr) return row * rs + h * hs;
  const std::int64_t b = row / p.seqlen_q, r = row - b * p.seqlen_q;
  return b * bs + r * rs + h * hs;
}

// D is computed with the same mma.m16n8k16 sequence (k steps in order, from a zero
// accumulator) that the backward kernel uses for dP = dO . V. Where a row's output
// equals one value row exactly (a row that sees a single key, or one dominant key),
// dP - D is then exactly 0 instead of the difference of two fp32 summation orders,
// which dS = P (dP - D) would otherwise turn into gradient noise. Each warp takes 16
// (row, head) pairs: A = their O rows, B = their dO rows; D is the diagonal of A B^T.
constexpr int kDotPairsPerWarp = 16;
constexpr int kDotWarps = 4;

template <typename T>
__global__ void __launch_bounds__(kDotWarps * 32)
    dot_do_o_kernel(const __grid_constant__ AttnParams p, const __grid_constant__ BwdArgs a, std::int64_t total_rows) {
  // The concentrated-row marks start clear for every call (bwd_exact_d.cuh).
  for (std::int64_t w = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; w < a.flag_words;
       w += std::int64_t(gridDim.x) * blockDim.x)
    static_cast<uint4*>(a.flags)[w] = make_uint4(0, 0, 0, 0);
  const int lane = threadIdx.x & 31, g = lane >> 2, t4 = lane & 3;
  const std::int64_t total_pairs = total_rows * p.heads_q;
  const std::int64_t base = (std::int64_t(blockIdx.x) * kDotWarps + (threadIdx.x >> 5)) * kDotPairsPerWarp;
  if (base >= total_pairs) return;  // whole warp leaves together
  // This lane reads pairs base + g and base + g + 8.
  const T* o_row[2];
  const T* do_row[2];
  bool ok[2];
  std::int64_t row_of[2];
  int head_of[2];
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    const std::int64_t pair = base + g + 8 * j;
    ok[j] = pair < total_pairs;
    const std::int64_t pr = ok[j] ? pair : 0;
    row_of[j] = pr / p.heads_q;
    head_of[j] = int(pr - row_of[j] * p.heads_q);
    o_row[j] = static_cast<const T*>(p.o) +
               row_offset(p, row_of[j], head_of[j], p.o_batch_stride, p.o_row_stride, p.o_head_stride);
    do_row[j] = static_cast<const T*>(p.dout) +
                row_offset(p, row_of[j], head_of[j], p.do_batch_stride, p.do_row_stride, p.do_head_stride);
  }
  auto pair_at = [&](const T* row, bool valid, int col) -> std::uint32_t {
    return valid && col < p.head_dim_v ? *reinterpret_cast<const std::uint32_t*>(row + col) : 0u;
  };
  float acc0[4] = {0.f, 0.f, 0.f, 0.f}, acc1[4] = {0.f, 0.f, 0.f, 0.f};
  for (int k0 = 0; k0 < p.head_dim_v; k0 += 16) {
    const int c = k0 + 2 * t4;
    const std::uint32_t a[4] = {pair_at(o_row[0], ok[0], c), pair_at(o_row[1], ok[1], c),
                                pair_at(o_row[0], ok[0], c + 8), pair_at(o_row[1], ok[1], c + 8)};
    const std::uint32_t b0[2] = {pair_at(do_row[0], ok[0], c), pair_at(do_row[0], ok[0], c + 8)};
    const std::uint32_t b1[2] = {pair_at(do_row[1], ok[1], c), pair_at(do_row[1], ok[1], c + 8)};
    Element<T>::mma(acc0, a, b0);
    Element<T>::mma(acc1, a, b1);
  }
  // Diagonal: (g, g) sits in acc0[g & 1] of the lane with t4 == g / 2, (g + 8, g + 8)
  // in acc1[2 + (g & 1)] of the same lane.
  if (t4 == (g >> 1)) {
    const bool odd = (g & 1) != 0;  // selects, not a runtime index (which would go to local memory)
    if (ok[0]) a.dsum[std::int64_t(head_of[0]) * total_rows + row_of[0]] = odd ? acc0[1] : acc0[0];
    if (ok[1]) a.dsum[std::int64_t(head_of[1]) * total_rows + row_of[1]] = odd ? acc1[3] : acc1[2];
    // Exact D minus this D starts at 0 (bwd_exact_d.cuh rewrites it where it runs).
    if (ok[0]) a.ddelta[std::int64_t(head_of[0]) * total_rows + row_of[0]] = 0.f;
    if (ok[1]) a.ddelta[std::int64_t(head_of[1]) * total_rows + row_of[1]] = 0.f;
  }
}

template <typename T>
__global__ void dq_convert_kernel(const __grid_constant__ AttnParams p, const float* acc, std::int64_t total_rows,
                                  int acc_head_dim) {
  const int chunks = p.head_dim / 8;
  const std::int64_t idx = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= total_rows * p.heads_q * chunks) return;
  const int chunk = int(idx % chunks);
  const std::int64_t rh = idx / chunks;
  const int h = int(rh % p.heads_q);
  const std::int64_t row = rh / p.heads_q;
  const std::int64_t width = std::int64_t(p.heads_q) * acc_head_dim;
  const float* src = acc + dq_accum_index(row, std::int64_t(h) * acc_head_dim + chunk * 8, width);
  const float4 lo = *reinterpret_cast<const float4*>(src);
  const float4 hi = *reinterpret_cast<const float4*>(src + 4);
  const float s = p.scale;
  uint4 outv;
  outv.x = Element<T>::pack(lo.x * s, lo.y * s);
  outv.y = Element<T>::pack(lo.z * s, lo.w * s);
  outv.z = Element<T>::pack(hi.x * s, hi.y * s);
  outv.w = Element<T>::pack(hi.z * s, hi.w * s);
  T* dst = static_cast<T*>(p.dq) + row_offset(p, row, h, p.dq_batch_stride, p.dq_row_stride, p.dq_head_stride) +
           chunk * 8;
  *reinterpret_cast<uint4*>(dst) = outv;
}

}  // namespace flashpp::cuda::sm80
