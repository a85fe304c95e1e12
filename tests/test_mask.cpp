// The visibility rule (common/mask.hpp) and the property the GPU kernels build on:
// a row's visible keys [lo, hi) never move left as the row grows. The forward's key
// range per block, tile_needs_mask, the backward's short-row retake and the forward's
// warp skip all bound a block's rows by its first and last row only.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "common/mask.hpp"
#include "common/params.hpp"
#include "common/score_fold.hpp"
#include "cuda/sm90/plain_loop.hpp"

namespace flashpp::test {
namespace {

TEST(Mask, VisibleRangesAreMonotoneInTheRow) {
  const int lengths[] = {1, 2, 7, 64, 65, 130, 333};
  const int windows[] = {-1, 0, 1, 5, 64, 500};
  for (int sq : lengths)
    for (int sk : lengths)
      for (int wl : windows)
        for (int wr : windows) {
          VisibleRange prev = visible_keys(0, sq, sk, wl, wr);
          for (int r = 1; r < sq; ++r) {
            const VisibleRange cur = visible_keys(r, sq, sk, wl, wr);
            const std::string where = "seqlen_q " + std::to_string(sq) + ", seqlen_k " + std::to_string(sk) +
                                      ", window (" + std::to_string(wl) + ", " + std::to_string(wr) + "), row " +
                                      std::to_string(r);
            EXPECT_GE(cur.lo, prev.lo) << where;
            EXPECT_GE(cur.hi, prev.hi) << where;
            EXPECT_GE(cur.lo, 0) << where;
            EXPECT_LE(cur.hi, sk) << where;
            prev = cur;
          }
        }
}

TEST(Mask, CausalIsAlignedToTheBottomRight) {
  // seqlen_q 3, seqlen_k 5, causal: the last row sees every key, the first row three.
  EXPECT_EQ(visible_keys(2, 3, 5, -1, 0).hi, 5);
  EXPECT_EQ(visible_keys(0, 3, 5, -1, 0).hi, 3);
  EXPECT_EQ(visible_keys(0, 3, 5, -1, 0).lo, 0);
  // More queries than keys: the first rows see nothing.
  const VisibleRange r = visible_keys(0, 5, 3, -1, 0);
  EXPECT_LE(r.hi, r.lo);
  // A left window of 1 under causal: row i sees keys i + shift - 1 .. i + shift.
  EXPECT_EQ(visible_keys(2, 3, 5, 1, 0).lo, 3);
}

// The Hopper forward's plain-loop kernel has no mask in its key loop, so the
// launcher's test (plain_loop_safe) must say yes only where every row of every
// query block sees every key of every tile the loop takes: all visible tiles but
// the block's highest one, or two on tiles that are not square (the kernel takes
// those apart with a mask). Checked here key by key against the visibility rule.
bool loop_tiles_unmasked(int sq, int sk, int wl, int wr, int bm, int bn) {
  const int peeled = bm == bn ? 1 : 2;
  for (int m0 = 0; m0 < sq; m0 += bm) {
    const int rows = std::min(bm, sq - m0);
    std::int64_t block_lo = sk, block_hi = 0;  // keys some row of the block sees
    for (int r = m0; r < m0 + rows; ++r) {
      const VisibleRange v = visible_keys(r, sq, sk, wl, wr);
      if (v.lo < v.hi) {
        block_lo = std::min(block_lo, v.lo);
        block_hi = std::max(block_hi, v.hi);
      }
    }
    if (block_lo >= block_hi) continue;
    const std::int64_t top = (block_hi + bn - 1) / bn - 1;
    for (std::int64_t t = block_lo / bn; t <= top - peeled; ++t)
      for (int r = m0; r < m0 + rows; ++r) {
        const VisibleRange v = visible_keys(r, sq, sk, wl, wr);
        if (v.lo > t * bn || v.hi < (t + 1) * bn) return false;
      }
  }
  return true;
}

TEST(Mask, PlainLoopOnlyWhereTheLoopTilesAreWhole) {
  const int lengths[] = {1, 63, 64, 128, 129, 200, 256, 320, 500};
  const int windows[] = {-1, 0, 1, 63, 64, 130};
  const int tiles[][2] = {{128, 128}, {128, 176}, {192, 128}, {128, 80}, {128, 64}};
  int safe = 0, cases = 0;
  for (auto [bm, bn] : tiles)
    for (int sq : lengths)
      for (int sk : lengths)
        for (int wl : windows)
          for (int wr : windows) {
            AttnParams p;
            p.seqlen_q = sq;
            p.seqlen_k = sk;
            p.window_left = wl;
            p.window_right = wr;
            p.scale_log2 = 0.18f;
            const bool said = cuda::sm90::plain_loop_safe(p, bm, bn);
            ++cases;
            safe += said ? 1 : 0;
            // Never plain where the loop would meet a masked tile.
            if (said)
              EXPECT_TRUE(loop_tiles_unmasked(sq, sk, wl, wr, bm, bn))
                  << "tile " << bm << "x" << bn << ", seqlen_q " << sq << ", seqlen_k " << sk << ", window (" << wl
                  << ", " << wr << ")";
            // And exact for calls without a left window (the launcher's only cases).
            if (wl < 0)
              EXPECT_EQ(said, loop_tiles_unmasked(sq, sk, wl, wr, bm, bn))
                  << "tile " << bm << "x" << bn << ", seqlen_q " << sq << ", seqlen_k " << sk << ", window (" << wl
                  << ", " << wr << ")";
          }
  // Both answers occur (the test would pass vacuously otherwise).
  EXPECT_GT(safe, cases / 20);
  EXPECT_LT(safe, cases);
  // Square causal shapes are plain where a block's diagonal touches no more key
  // tiles than the kernel peels: 128 x 128 (one), 128 x 64, the wide 128 x 176 and
  // the 192 x 128 tile (two); not 128 x 80, where a block's diagonal can touch
  // three. Softcap, a non-positive scale and varlen with a window never are.
  AttnParams p;
  p.seqlen_q = p.seqlen_k = 4096;
  p.window_right = 0;
  p.scale_log2 = 0.18f;
  EXPECT_TRUE(cuda::sm90::plain_loop_safe(p, 128, 128));
  EXPECT_TRUE(cuda::sm90::plain_loop_safe(p, 128, 176));
  EXPECT_TRUE(cuda::sm90::plain_loop_safe(p, 192, 128));
  EXPECT_TRUE(cuda::sm90::plain_loop_safe(p, 128, 64));
  EXPECT_FALSE(cuda::sm90::plain_loop_safe(p, 128, 80));
  // Square tiles peel one: a diagonal shifted off the tile grid is not plain there.
  p.seqlen_k = 4096 + 64;
  EXPECT_FALSE(cuda::sm90::plain_loop_safe(p, 128, 128));
  p.seqlen_k = 4096;
  p.softcap = 30.f;
  EXPECT_FALSE(cuda::sm90::plain_loop_safe(p, 128, 128));
  p.softcap = 0.f;
  p.scale_log2 = -0.18f;
  EXPECT_FALSE(cuda::sm90::plain_loop_safe(p, 128, 128));
  p.scale_log2 = 0.18f;
  int cu[2] = {0, 4096};
  p.cu_seqlens_q = cu;
  p.cu_seqlens_k = cu;
  EXPECT_FALSE(cuda::sm90::plain_loop_safe(p, 128, 128));
  p.window_right = -1;
  EXPECT_TRUE(cuda::sm90::plain_loop_safe(p, 128, 128));
}

// unmasked_query_rows, found once per key tile, answers as tile_needs_mask does for
// every query block of every sequence shape, window and key tile (including tiles
// past the keys' end, partial last blocks and rows that see no key).
TEST(Mask, UnmaskedQueryRowsAgreeWithTileNeedsMask) {
  const int lengths[] = {1, 63, 64, 65, 128, 200, 333};
  const int windows[] = {-1, 0, 1, 63, 64, 130};
  long unmasked = 0, masked = 0;
  for (int sq : lengths)
    for (int sk : lengths)
      for (int wl : windows)
        for (int wr : windows)
          for (int cols : {16, 64})
            for (int n0 = 0; n0 < sk; n0 += cols)
              for (int bm : {16, 64}) {
                const SeqLengths seq{sq, sk};
                const UnmaskedQueryRows u = unmasked_query_rows(n0, cols, seq, wl, wr);
                for (int m0 = 0; m0 < sq; m0 += bm) {
                  const int rows = std::min(bm, sq - m0);
                  const bool needs = tile_needs_mask(m0, rows, n0, cols, seq, wl, wr);
                  ASSERT_EQ(!u.covers(m0, rows), needs)
                      << "seqlen_q " << sq << ", seqlen_k " << sk << ", window (" << wl << ", " << wr << "), keys "
                      << n0 << " + " << cols << ", rows " << m0 << " + " << rows;
                  (needs ? masked : unmasked) += 1;
                }
              }
  // Both answers occur (the test would pass vacuously otherwise).
  EXPECT_GT(unmasked, masked / 10);
  EXPECT_GT(masked, unmasked / 10);
}

// tile_element_mask, found once per tile, answers as visible_keys does for every
// element of tiles anywhere in sequences of every shape and window, including
// lengths and windows near the int range, where its bounds are clamped.
TEST(Mask, TileElementMaskAgreesWithVisibleKeys) {
  const int lengths[] = {1, 63, 64, 65, 200, 333};
  const int windows[] = {-1, 0, 1, 63, 64, 130};
  long visible = 0, hidden = 0;
  auto check = [&](int sq, int sk, int wl, int wr, int m0, int n0, int tile_rows, int tile_cols) {
    const SeqLengths seq{sq, sk};
    const TileElementMask t = tile_element_mask(m0, n0, seq, wl, wr);
    for (int rr = 0; rr < tile_rows && m0 + rr < sq; ++rr) {
      const VisibleRange v = visible_keys(m0 + rr, sq, sk, wl, wr);
      for (int kk = 0; kk < tile_cols; ++kk) {
        const std::int64_t key = std::int64_t(n0) + kk;
        const bool want = key >= v.lo && key < v.hi;
        ASSERT_EQ(t.has(kk, rr), want) << "seqlen_q " << sq << ", seqlen_k " << sk << ", window (" << wl << ", "
                                       << wr << "), row " << m0 << " + " << rr << ", key " << n0 << " + " << kk;
        (want ? visible : hidden) += 1;
      }
    }
  };
  for (int sq : lengths)
    for (int sk : lengths)
      for (int wl : windows)
        for (int wr : windows)
          for (int m0 = 0; m0 < sq; m0 += 48)
            for (int n0 = 0; n0 < sk + 64; n0 += 40) check(sq, sk, wl, wr, m0, n0, 64, 64);
  // Far from the diagonal of long sequences, and windows near the int range.
  const int big = 2147483647 - 200;
  for (int wl : {-1, 0, 5, big})
    for (int wr : {-1, 0, 5, big}) {
      check(big, big, wl, wr, big - 70, 0, 64, 64);
      check(big, big, wl, wr, 0, big - 70, 64, 64);
      check(big, big, wl, wr, big - 70, big - 90, 64, 64);
      check(100, big, wl, wr, 40, big - 64, 64, 64);
      check(big, 100, wl, wr, big - 100, 40, 64, 64);
    }
  // Both answers occur (the test would pass vacuously otherwise).
  EXPECT_GT(visible, hidden / 10);
  EXPECT_GT(hidden, visible / 10);
}

// The one rule for folding the score map into the exponent, which the kernels'
// ScoreMap and the host's plain-loop test share: no softcap and a positive scale.
TEST(Mask, ScoreMapFoldsOnlyWithoutSoftcapAndWithAPositiveScale) {
  EXPECT_TRUE(score_map_folds(false, 0.18f));
  EXPECT_FALSE(score_map_folds(true, 0.18f));
  EXPECT_FALSE(score_map_folds(false, 0.f));
  EXPECT_FALSE(score_map_folds(false, -0.18f));
  EXPECT_FALSE(score_map_folds(false, std::nanf("")));
}

}  // namespace
}  // namespace flashpp::test
