#pragma once
// The query blocks a backward key block walks: those with a row that sees a key of
// [n0, n0 + rows_k) under the window (causal: wr = 0). Visible ranges are monotone
// in the row, so they are one run of blocks; a key block's steps walk them for each
// query head of its kv head's group. Shared by the FA2-class and the Hopper backward.
#include <cstdint>

#include "cuda/common/sequence.cuh"

namespace flashpp::cuda {

struct QueryBlocks {
  int first = 0;  // index of the first block (block_m rows each)
  int count = 0;
};

__device__ __forceinline__ QueryBlocks query_blocks_seeing(const SeqRows& seq, int n0, int rows_k, int block_m,
                                                           int wl, int wr) {
  const std::int64_t shift = std::int64_t(seq.len_k) - seq.len_q;
  std::int64_t q_lo = 0, q_hi = seq.len_q;
  if (wr >= 0) q_lo = max(std::int64_t(0), std::int64_t(n0) - shift - wr);
  if (wl >= 0) q_hi = min(std::int64_t(seq.len_q), std::int64_t(n0) + rows_k - 1 - shift + wl + 1);
  QueryBlocks r;
  r.first = int(q_lo / block_m);
  r.count = q_hi > q_lo ? int((q_hi + block_m - 1) / block_m) - r.first : 0;
  return r;
}

// A key block's steps: the query blocks [first, end) of each query head of the kv
// head's group in turn (the Hopper kernel's producer and consumers walk them alike,
// each with its own copy). The head and block advance as counters: an i / count per
// step was two integer divisions, ~50 instructions, in the FA2-class loop.
struct StepWalk {
  int h, m_blk, first, end;
  __device__ __forceinline__ void advance() {
    if (++m_blk == end) {
      m_blk = first;
      ++h;
    }
  }
  __device__ __forceinline__ StepWalk next() const {
    StepWalk w = *this;
    w.advance();
    return w;
  }
};

}  // namespace flashpp::cuda
