#pragma once
// Where one batch entry's rows live, for fixed-length and varlen batches alike, and
// the block-level visibility ranges derived from the shared rule in common/mask.hpp.
#include <cstdint>

#include "common/mask.hpp"
#include "common/params.hpp"

namespace flashpp::cuda {

struct SeqRows {
  int len_q = 0, len_k = 0;
  std::int64_t q0 = 0, k0 = 0;  // first row in the (total) row dimension
  std::int64_t q_global0 = 0;   // first row in a (total_q)-row buffer (LSE, workspace)
};

__device__ __forceinline__ SeqRows sequence_rows(const AttnParams& p, int b) {
  SeqRows s;
  if (p.cu_seqlens_q != nullptr) {
    const int q0 = p.cu_seqlens_q[b], k0 = p.cu_seqlens_k[b];
    s.len_q = p.cu_seqlens_q[b + 1] - q0;
    s.len_k = p.cu_seqlens_k[b + 1] - k0;
    s.q0 = q0;
    s.k0 = k0;
    s.q_global0 = q0;
  } else {
    s.len_q = p.seqlen_q;
    s.len_k = p.seqlen_k;
    s.q_global0 = std::int64_t(b) * p.seqlen_q;
  }
  return s;
}

// Visible keys [lo, hi) of one row as 32-bit bounds (clamped to [0, len_k], so they fit).
struct KeyBounds {
  int lo, hi;
  __device__ __forceinline__ bool has(int key) const { return key >= lo && key < hi; }
};

__device__ __forceinline__ KeyBounds key_bounds(int row, const SeqRows& s, int wl, int wr) {
  const VisibleRange r = visible_keys(row, s.len_q, s.len_k, wl, wr);
  return {int(r.lo), int(r.hi)};
}

}  // namespace flashpp::cuda
