// The visibility rule (common/mask.hpp) and the property the GPU kernels build on:
// a row's visible keys [lo, hi) never move left as the row grows. The forward's key
// range per block, tile_needs_mask, the backward's short-row retake and the forward's
// warp skip all bound a block's rows by its first and last row only.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "common/mask.hpp"

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

}  // namespace
}  // namespace flashpp::test
