#pragma once
// Whether a Hopper forward call may run the plain-loop kernel (fwd_kernel's Plain):
// every key tile after the ones a query block's walk takes apart at its top (its
// highest visible one, and on tiles that are not square the one below it too:
// plain_peeled_tiles) is seen whole by every row of the block, and the score map
// folds into the exponent (no softcap, a positive scale). Its key loop then has
// no branch between a consumer's GEMM issue and its softmax, which is what lets
// ptxas keep the wait for the P V product after the row max instead of before it
// (docs/tuning.md, ninth session). Host-side: the launcher decides per call.
#include <algorithm>

#include "common/mask.hpp"
#include "common/params.hpp"
#include "common/score_fold.hpp"
#include "cuda/sm90/fwd_tiles.hpp"

namespace flashpp::cuda::sm90 {

inline bool plain_loop_safe(const AttnParams& p, int block_m, int block_n) {
  // The score map folds (the rule ScoreMap::folds applies in the kernel).
  if (!score_map_folds(p.softcap > 0.f, p.scale_log2)) return false;
  // Without a window only the sequence end masks, inside the highest key tile.
  if (!has_window(p.window_left, p.window_right)) return true;
  // A left window masks the lowest tiles; varlen batches have per-sequence
  // diagonals the host does not see.
  if (p.window_left >= 0 || p.cu_seqlens_q != nullptr || p.cu_seqlens_k != nullptr) return false;
  // Right window (causal): the kernel takes each query block's top `peeled` visible
  // key tiles apart and loops over the rest. Visible ranges are monotone in the
  // row, so if the highest tile below the peeled ones is whole, so are all lower
  // ones (without a left window every row's range starts at key 0).
  const int peeled = plain_peeled_tiles(block_m, block_n);
  for (int m0 = 0; m0 < p.seqlen_q; m0 += block_m) {
    const int rows = std::min(block_m, p.seqlen_q - m0);
    const KeyTileRange kt = key_tile_range(m0, rows, p.seqlen_q, p.seqlen_k, block_n, p.window_left, p.window_right);
    const int below = kt.hi - 1 - peeled;
    if (below >= kt.lo && tile_needs_mask(m0, rows, below * block_n, block_n,
                                          SeqLengths{p.seqlen_q, p.seqlen_k}, p.window_left, p.window_right))
      return false;
  }
  return true;
}

}  // namespace flashpp::cuda::sm90
