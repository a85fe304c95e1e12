#pragma once
// Which rows the backward's short-row D pass (bwd_short_rows.cuh) must visit. Host
// arithmetic only, so it is tested without a GPU (tests/cuda/test_short_row_lead.cpp).
#include <algorithm>
#include <cstdint>

#include "common/params.hpp"
#include "cuda/sm80/bwd_args.hpp"

namespace flashpp::cuda::sm80 {

// Rows of a fixed-length sequence that can see at most kShortRowKeys keys are its
// first ones when the mask bounds keys on the right only (causal): row r sees
// min(len_k, r + shift + wr + 1) keys, shift = len_k - len_q. Returns the number of
// leading rows per sequence to check (at least 1), or 0 to check every row (varlen, a
// left window, or len_k <= kShortRowKeys, where any row may be short). A causal grid
// over every row ran one warp per row and head, nearly all of them only to return.
inline int short_row_lead(const AttnParams& p) {
  if (p.cu_seqlens_q != nullptr || p.window_left >= 0 || p.window_right < 0 || p.seqlen_k <= kShortRowKeys) return 0;
  const std::int64_t shift = std::int64_t(p.seqlen_k) - p.seqlen_q;
  // r + shift + wr + 1 <= kShortRowKeys  <=>  r < kShortRowKeys - shift - wr
  const std::int64_t lead = std::int64_t(kShortRowKeys) - shift - p.window_right;
  return int(std::clamp<std::int64_t>(lead, 1, p.seqlen_q));
}

}  // namespace flashpp::cuda::sm80
