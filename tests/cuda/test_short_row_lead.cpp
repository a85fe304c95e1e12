// Host-side check (no GPU needed) of the rows the backward's short-row D pass visits:
// under a right-bounded mask on fixed-length batches it covers only the first
// short_row_lead(p) rows of every sequence, so every row that can see 2 ..
// kShortRowKeys keys must be among them, by the visibility rule all backends share.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "common/mask.hpp"
#include "common/params.hpp"
#include "cuda/sm80/short_row_lead.hpp"

namespace flashpp::test {
namespace {

using flashpp::cuda::sm80::kShortRowKeys;
using flashpp::cuda::sm80::short_row_lead;

AttnParams causal_params(int seqlen_q, int seqlen_k, int window_left, int window_right) {
  AttnParams p;
  p.batch = 2;
  p.seqlen_q = seqlen_q;
  p.seqlen_k = seqlen_k;
  p.window_left = window_left;
  p.window_right = window_right;
  return p;
}

std::int64_t visible_count(std::int64_t row, const AttnParams& p) {
  const VisibleRange r = visible_keys(row, p.seqlen_q, p.seqlen_k, p.window_left, p.window_right);
  return r.hi > r.lo ? r.hi - r.lo : 0;
}

TEST(CudaShortRowLead, CoversEveryShortRowOfRightBoundedMasks) {
  const int lengths[] = {1, 2, 17, 63, 64, 65, 66, 100, 127, 128, 129, 200, 513, 1000};
  const int rights[] = {0, 1, 3, 30, 63, 64, 65, 200};
  for (int sq : lengths)
    for (int sk : lengths)
      for (int wr : rights) {
        const AttnParams p = causal_params(sq, sk, -1, wr);
        const int lead = short_row_lead(p);
        const std::string where = "seqlen_q " + std::to_string(sq) + ", seqlen_k " + std::to_string(sk) +
                                  ", window_right " + std::to_string(wr) + ", lead " + std::to_string(lead);
        if (sk <= kShortRowKeys) {
          EXPECT_EQ(lead, 0) << where;  // every row may be short: the pass visits them all
          continue;
        }
        ASSERT_GE(lead, 1) << where;
        ASSERT_LE(lead, sq) << where;
        for (int r = lead; r < sq; ++r) {
          const std::int64_t keys = visible_count(r, p);
          EXPECT_FALSE(keys >= 2 && keys <= kShortRowKeys) << where << ": row " << r << " sees " << keys << " keys";
        }
        // The lead is tight up to the clamp: the row before it is short (or there is none).
        if (lead > 1) {
          EXPECT_LE(visible_count(lead - 1, p), kShortRowKeys) << where;
        }
      }
}

TEST(CudaShortRowLead, VisitsEveryRowWhereShortRowsAreNotLeading) {
  // A left window makes rows short anywhere; varlen sequences differ in length.
  EXPECT_EQ(short_row_lead(causal_params(512, 512, 16, 0)), 0);
  EXPECT_EQ(short_row_lead(causal_params(512, 512, 100, -1)), 0);
  AttnParams varlen = causal_params(512, 512, -1, 0);
  const std::int32_t cu[] = {0, 100, 512};
  varlen.cu_seqlens_q = cu;
  varlen.cu_seqlens_k = cu;
  EXPECT_EQ(short_row_lead(varlen), 0);
  // Causal, square: rows 0 .. kShortRowKeys - 1 see at most kShortRowKeys keys.
  EXPECT_EQ(short_row_lead(causal_params(512, 512, -1, 0)), kShortRowKeys);
}

}  // namespace
}  // namespace flashpp::test
