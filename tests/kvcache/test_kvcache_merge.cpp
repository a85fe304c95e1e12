// The merge of partial softmax results (common/lse_merge.hpp), the split
// spans (common/kvcache_params.hpp) and the rotary pairing (common/rotary.hpp),
// on random inputs.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "common/kvcache_params.hpp"
#include "common/lse_merge.hpp"
#include "common/rotary.hpp"
#include "support/seed.hpp"

namespace flashpp::test {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

double logsumexp(const std::vector<double>& x, std::size_t lo, std::size_t hi) {
  double m = -INFINITY;
  for (std::size_t i = lo; i < hi; ++i) m = std::max(m, x[i]);
  if (m == -INFINITY) return m;
  double s = 0;
  for (std::size_t i = lo; i < hi; ++i) s += std::exp(x[i] - m);
  return m + std::log(s);
}

// Softmax-weighted values over random scores, computed whole and as merged
// random pieces (some empty), agree to the fp32 rounding of the pieces' LSEs
// (an absolute error of 2^-24 |LSE| in each, which becomes a relative error
// of the weights); empty pieces are skipped even when their output is NaN.
TEST(LseMerge, MergedPiecesEqualTheWhole) {
  auto rng = make_rng("LseMerge.MergedPiecesEqualTheWhole");
  std::normal_distribution<double> nd(0, 1);
  for (int trial = 0; trial < 200; ++trial) {
    const double scale = trial % 4 == 0 ? 300.0 : 3.0;  // large logits too
    const int n = std::uniform_int_distribution<int>(1, 300)(rng);
    std::vector<double> s(n), v(n);
    for (int i = 0; i < n; ++i) {
      s[i] = nd(rng) * scale;
      v[i] = nd(rng);
    }
    const double lse = logsumexp(s, 0, n);
    double want = 0;
    for (int i = 0; i < n; ++i) want += std::exp(s[i] - lse) * v[i];

    std::vector<std::size_t> cuts = {0};
    while (cuts.back() < std::size_t(n)) cuts.push_back(cuts.back() + std::uniform_int_distribution<int>(0, 40)(rng));
    cuts.back() = n;
    LseMerge m;
    std::vector<float> part_lse, part_o;
    for (std::size_t k = 0; k + 1 < cuts.size(); ++k) {
      const double l = logsumexp(s, cuts[k], cuts[k + 1]);
      double o = 0;
      for (std::size_t i = cuts[k]; i < cuts[k + 1]; ++i) o += std::exp(s[i] - l) * v[i];
      part_lse.push_back(float(l));
      part_o.push_back(cuts[k] == cuts[k + 1] ? std::numeric_limits<float>::quiet_NaN() : float(o));
      m.add(float(l));
    }
    const float got_lse = m.lse();
    float got = 0;
    double magnitude = 0;  // sum of |w_k O_k|
    for (std::size_t k = 0; k < part_lse.size(); ++k) {
      const float w = merge_weight(part_lse[k], got_lse);
      if (w != 0.f) {
        got += w * part_o[k];
        magnitude += std::abs(double(w) * part_o[k]);
      }
    }
    const double lse_rounding = std::ldexp(std::abs(lse) + 1.0, -24);
    EXPECT_NEAR(got_lse, lse, 8 * lse_rounding) << "trial " << trial;
    EXPECT_NEAR(got, want, (4 * lse_rounding + 1e-6) * std::max(1.0, magnitude)) << "trial " << trial;
  }
}

TEST(LseMerge, TreeMergeEqualsSequential) {
  auto rng = make_rng("LseMerge.TreeMergeEqualsSequential");
  std::normal_distribution<float> nd(0, 20);
  for (int trial = 0; trial < 100; ++trial) {
    LseMerge all, left, right;
    for (int i = 0; i < 32; ++i) {
      const float x = i % 7 == 3 ? kNegInf : nd(rng);
      all.add(x);
      (i < 13 ? left : right).add(x);
    }
    LseMerge tree = left;
    tree.add(right);
    EXPECT_NEAR(tree.lse(), all.lse(), 1e-4f);
  }
}

TEST(LseMerge, EmptyPartsGiveMinusInfinity) {
  LseMerge m;
  EXPECT_EQ(m.lse(), kNegInf);
  m.add(kNegInf);
  m.add(LseMerge{});
  EXPECT_EQ(m.lse(), kNegInf);
  EXPECT_EQ(merge_weight(kNegInf, kNegInf), 0.f);
  m.add(2.5f);
  EXPECT_FLOAT_EQ(m.lse(), 2.5f);
  EXPECT_FLOAT_EQ(merge_weight(2.5f, m.lse()), 1.f);
  EXPECT_EQ(lse_from_log2_state(kNegInf, 0.f), kNegInf);
  EXPECT_NEAR(lse_from_log2_state(3.f, 2.f), (3.0 + 1.0) * std::log(2.0), 1e-6);
}

// The split spans of any key range cover it exactly once, in whole tiles.
TEST(SplitSpan, CoversTheRangeOnce) {
  auto rng = make_rng("SplitSpan.CoversTheRangeOnce");
  for (int trial = 0; trial < 500; ++trial) {
    const int tile = std::uniform_int_distribution<int>(0, 3)(rng) == 0 ? 1 : 64;
    const int lo = std::uniform_int_distribution<int>(0, 500)(rng);
    const int hi = lo + std::uniform_int_distribution<int>(-3, 2000)(rng);
    const int splits = std::uniform_int_distribution<int>(1, 130)(rng);
    std::vector<int> seen(std::size_t(std::max(hi, 0) + 1), 0);
    for (int s = 0; s < splits; ++s) {
      const KeySpan sp = split_span(lo, hi, tile, splits, s);
      if (sp.lo >= sp.hi) continue;
      ASSERT_GE(sp.lo, lo);
      ASSERT_LE(sp.hi, hi);
      if (sp.lo != lo) {
        ASSERT_EQ(sp.lo % tile, 0);
      }
      for (int j = sp.lo; j < sp.hi; ++j) ++seen[std::size_t(j)];
    }
    for (int j = lo; j < hi; ++j) ASSERT_EQ(seen[std::size_t(j)], 1) << "key " << j << " trial " << trial;
  }
}

// Ranges ending at the largest int key: the 32-bit tile arithmetic must not
// wrap (the non-empty spans, in split order, chain from lo to hi).
TEST(SplitSpan, CoversRangesNearIntMax) {
  auto rng = make_rng("SplitSpan.CoversRangesNearIntMax");
  const int top = std::numeric_limits<int>::max();
  for (int trial = 0; trial < 200; ++trial) {
    const int tile = trial % 2 == 0 ? 1 : 64;
    const int hi = top - std::uniform_int_distribution<int>(0, 100)(rng);
    const int lo = std::uniform_int_distribution<int>(0, 1)(rng) == 0 ? 0 : hi - std::uniform_int_distribution<int>(1, 100000)(rng);
    const int splits = std::uniform_int_distribution<int>(1, 128)(rng);
    int next = lo;
    for (int s = 0; s < splits; ++s) {
      const KeySpan sp = split_span(lo, hi, tile, splits, s);
      if (sp.lo >= sp.hi) continue;
      ASSERT_EQ(sp.lo, next) << "trial " << trial << " split " << s;
      next = sp.hi;
    }
    ASSERT_EQ(next, hi) << "trial " << trial;
  }
}

// The split planner on an H200's 132 SMs (8 kv heads, 64-key tiles): the
// counts that measured fastest in the decode benchmark (docs/kvcache.md).
TEST(SplitPlanner, PicksTheMeasuredCountsOnAnH200) {
  const int sms = 132;
  auto splits = [&](int batch, int len, bool paged) {
    return choose_num_splits(std::int64_t(batch) * 8, len / 64, sms * (paged ? 2 : 1), 128);
  };
  EXPECT_EQ(splits(1, 16384, false), 16);
  EXPECT_EQ(splits(1, 65536, false), 16);
  EXPECT_EQ(splits(1, 16384, true), 32);
  EXPECT_EQ(splits(1, 65536, true), 32);
  EXPECT_EQ(splits(1, 4096, true), 16);  // four tiles per split at least
  EXPECT_EQ(splits(16, 16384, false), 1);
  EXPECT_EQ(splits(16, 16384, true), 2);
  EXPECT_EQ(splits(64, 65536, true), 1);
}

TEST(SplitPlanner, StaysInRange) {
  auto rng = make_rng("SplitPlanner.StaysInRange");
  for (int trial = 0; trial < 1000; ++trial) {
    const std::int64_t blocks = std::uniform_int_distribution<int>(0, 5000)(rng);
    const int tiles = std::uniform_int_distribution<int>(0, 5000)(rng);
    const int slots = std::uniform_int_distribution<int>(1, 600)(rng);
    const int s = choose_num_splits(blocks, tiles, slots, 128);
    ASSERT_GE(s, 1);
    ASSERT_LE(s, 128);
    if (tiles >= 4) {
      ASSERT_LE(s, std::max(1, tiles / 4));
    }
  }
}

TEST(Rotary, PairOfInvertsPair) {
  for (bool inter : {false, true})
    for (int rd : {16, 32, 128}) {
      for (int p = 0; p < rd / 2; ++p) {
        const RotaryPair pr = rotary_pair(p, rd, inter);
        bool first = false;
        EXPECT_EQ(rotary_pair_of(pr.a, rd, inter, first), p);
        EXPECT_TRUE(first);
        EXPECT_EQ(rotary_pair_of(pr.b, rd, inter, first), p);
        EXPECT_FALSE(first);
      }
    }
  float a = 1.f, b = 0.f;
  rotate_pair(a, b, 0.f, 1.f);  // a quarter turn
  EXPECT_FLOAT_EQ(a, 0.f);
  EXPECT_FLOAT_EQ(b, 1.f);
}

}  // namespace
}  // namespace flashpp::test
