#pragma once
// Whether a Hopper forward call may run the plain-loop kernel (fwd_kernel's Plain):
// every key tile after a query block's first (its highest visible one, which the
// kernel takes apart) is seen whole by every row of the block, and the score map
// folds into the exponent (no softcap, a positive scale). Its key loop then has
// no branch between a consumer's GEMM issue and its softmax, which is what lets
// ptxas keep the wait for the P V product after the row max instead of before it
// (docs/tuning.md, ninth session). Host-side: the launcher decides per call.
#include <algorithm>
#include <cstdint>

#include "common/mask.hpp"
#include "common/params.hpp"

namespace flashpp::cuda::sm90 {

inline bool plain_loop_safe(const AttnParams& p, int block_m, int block_n) {
  if (!(p.softcap <= 0.f && p.scale_log2 > 0.f)) return false;
  // Without a window only the sequence end masks, inside the highest key tile.
  if (!has_window(p.window_left, p.window_right)) return true;
  // A left window masks the lowest tiles; varlen batches have per-sequence
  // diagonals the host does not see.
  if (p.window_left >= 0 || p.cu_seqlens_q != nullptr || p.cu_seqlens_k != nullptr) return false;
  // Right window (causal): visible ranges grow with the row (common/mask.hpp), so
  // a block's first row has the smallest hi and its last row the largest. The
  // block's loop covers tiles below ceil(last.hi / block_n) - 1; each row must
  // see all of them.
  for (std::int64_t m0 = 0; m0 < p.seqlen_q; m0 += block_m) {
    const std::int64_t last_row = std::min<std::int64_t>(m0 + block_m, p.seqlen_q) - 1;
    const VisibleRange first = visible_keys(m0, p.seqlen_q, p.seqlen_k, p.window_left, p.window_right);
    const VisibleRange last = visible_keys(last_row, p.seqlen_q, p.seqlen_k, p.window_left, p.window_right);
    if (last.hi <= 0) continue;  // no row of the block sees a key
    const std::int64_t top = (last.hi + block_n - 1) / block_n - 1;  // the first tile taken
    if (top > 0 && first.hi < top * block_n) return false;
  }
  return true;
}

}  // namespace flashpp::cuda::sm90
