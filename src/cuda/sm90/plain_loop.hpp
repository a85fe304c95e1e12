#pragma once
// Whether a Hopper forward call may run the plain-loop kernel (fwd_kernel's Plain):
// every key tile after a query block's first two (its highest visible ones, which
// the kernel takes apart when they need a mask) is seen whole by every row of the block, and the score map
// folds into the exponent (no softcap, a positive scale). Its key loop then has
// no branch between a consumer's GEMM issue and its softmax, which is what lets
// ptxas keep the wait for the P V product after the row max instead of before it
// (docs/tuning.md, ninth session). Host-side: the launcher decides per call.
#include <algorithm>

#include "common/mask.hpp"
#include "common/params.hpp"

namespace flashpp::cuda::sm90 {

inline bool plain_loop_safe(const AttnParams& p, int block_m, int block_n) {
  // The score map folds (ScoreMap::folds, cuda/common/scores.cuh, device-only).
  if (!(p.softcap <= 0.f && p.scale_log2 > 0.f)) return false;
  // Without a window only the sequence end masks, inside the highest key tile.
  if (!has_window(p.window_left, p.window_right)) return true;
  // A left window masks the lowest tiles; varlen batches have per-sequence
  // diagonals the host does not see.
  if (p.window_left >= 0 || p.cu_seqlens_q != nullptr || p.cu_seqlens_k != nullptr) return false;
  // Right window (causal): the kernel takes each query block's highest visible key
  // tile apart, and the one below it too where that needs a mask (wide tiles: a
  // diagonal of block_m rows can reach into it), and loops over the rest. Visible
  // ranges are monotone in the row, so if the third tile from the top is whole, so
  // are all lower ones (without a left window every row's range starts at key 0).
  for (int m0 = 0; m0 < p.seqlen_q; m0 += block_m) {
    const int rows = std::min(block_m, p.seqlen_q - m0);
    const KeyTileRange kt = key_tile_range(m0, rows, p.seqlen_q, p.seqlen_k, block_n, p.window_left, p.window_right);
    if (kt.hi - 2 > kt.lo && tile_needs_mask(m0, rows, (kt.hi - 3) * block_n, block_n,
                                             SeqLengths{p.seqlen_q, p.seqlen_k}, p.window_left, p.window_right))
      return false;
  }
  return true;
}

}  // namespace flashpp::cuda::sm90
