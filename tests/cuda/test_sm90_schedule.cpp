// Host-side checks of the Hopper forward's static tile order (no GPU needed):
// every round-based walk visits each tile exactly once, and for causal masks the
// snake rounds spread the key-tile work over the grid's blocks evenly where
// forward rounds leave the first blocks with the most.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <vector>

#include "common/mask.hpp"
#include "common/params.hpp"
#include "cuda/sm90/tile_order.cuh"

namespace flashpp::test {
namespace {

using flashpp::cuda::sm90::head_group_rule;
using flashpp::cuda::sm90::head_group_rule_d64;
using flashpp::cuda::sm90::kSharedTiles;
using flashpp::cuda::sm90::TileOrder;

AttnParams shape(int batch, int heads, int seqlen, bool causal) {
  AttnParams p;
  p.batch = batch;
  p.heads_q = p.heads_kv = heads;
  p.seqlen_q = p.seqlen_k = seqlen;
  p.window_left = -1;
  p.window_right = causal ? 0 : -1;
  return p;
}

// Tiles per grid block, in the order each block takes them.
std::vector<std::vector<int>> walk(const TileOrder& order, int grid) {
  std::vector<std::vector<int>> taken(static_cast<std::size_t>(grid));
  for (int b = 0; b < grid; ++b)
    for (int r = 0;; ++r) {
      const int t = order.tile_of(r, b, grid);
      if (t >= order.count) break;
      taken[std::size_t(b)].push_back(t);
    }
  return taken;
}

TEST(Sm90Schedule, RoundsVisitEveryTileOnce) {
  for (int group : {0, 1, 2, 4, 7, 15, 16})
  for (bool snake : {false, true})
    for (bool causal : {false, true})
      for (int grid : {1, 7, 132})
        for (int seqlen : {1, 128, 129, 1000, 4096}) {
          const TileOrder order = TileOrder::make(shape(3, 5, seqlen, causal), 128, snake, group);
          std::vector<int> seen(std::size_t(order.count), 0);
          for (const auto& tiles : walk(order, grid))
            for (int t : tiles) ++seen[std::size_t(t)];
          for (int t = 0; t < order.count; ++t)
            ASSERT_EQ(seen[std::size_t(t)], 1) << "tile " << t << " of " << order.count << ", grid " << grid
                                               << ", seqlen " << seqlen << (snake ? ", snake" : "") << ", group "
                                               << group;
          // Coordinates stay in range and name distinct tiles.
          std::vector<int> ids;
          for (int t = 0; t < order.count; ++t) {
            const auto c = order.at(t);
            ASSERT_TRUE(c.m_block >= 0 && c.m_block < order.m_blocks && c.h >= 0 && c.h < 5 && c.b >= 0 && c.b < 3);
            ids.push_back((c.b * 5 + c.h) * order.m_blocks + c.m_block);
          }
          std::sort(ids.begin(), ids.end());
          ASSERT_TRUE(std::adjacent_find(ids.begin(), ids.end()) == ids.end());
        }
}

// Largest over mean key-tile work per block (1 = perfectly even) for a causal
// grid shape: batch * seqlen = 16K tokens, 2048 / head_dim heads, 132 blocks.
double causal_spread(int head_dim, int seqlen, int bm, int bn, bool snake) {
  const AttnParams p = shape(16384 / seqlen, 2048 / head_dim, seqlen, true);
  const TileOrder order = TileOrder::make(p, bm, snake);
  const int grid = 132;
  std::vector<double> work;
  for (const auto& tiles : walk(order, grid)) {
    double w = 0;
    for (int t : tiles) {
      const int m0 = order.at(t).m_block * bm;
      const int last = std::min(m0 + bm, seqlen) - 1;
      const VisibleRange r = visible_keys(last, seqlen, seqlen, p.window_left, p.window_right);
      w += double((r.hi + bn - 1) / bn);  // key tiles of the block's rows (lo is 0 when causal)
    }
    work.push_back(w);
  }
  const double mean = std::accumulate(work.begin(), work.end(), 0.0) / double(grid);
  return *std::max_element(work.begin(), work.end()) / mean;
}

TEST(Sm90Schedule, SnakeRoundsEvenOutCausalWork) {
  // The default tiles of these shapes (fwd_tiles.hpp): head dim 128 from 8K keys is
  // 128 x 176, head dim 256 from 4K is 128 x 80. Forward rounds leave the busiest
  // block 6-13% above the mean; snake rounds within a key tile's worth of it.
  struct Shape {
    int d, n, bm, bn;
  };
  for (const Shape s : {Shape{128, 4096, 128, 128}, Shape{128, 16384, 128, 176}, Shape{256, 4096, 128, 80},
                        Shape{256, 16384, 128, 80}}) {
    const double plain = causal_spread(s.d, s.n, s.bm, s.bn, false);
    const double snake = causal_spread(s.d, s.n, s.bm, s.bn, true);
    EXPECT_GT(plain, 1.05) << "d " << s.d << " N " << s.n;
    EXPECT_LT(snake, 1.01) << "d " << s.d << " N " << s.n;
  }
}

// Head groups: every tile of a group comes before the next group's, longest first
// inside a group, and a group's pairs are consecutive.
TEST(Sm90Schedule, HeadGroupsAreContiguousAndLongestFirst) {
  const TileOrder order = TileOrder::make(shape(4, 5, 1000, true), 128, false, 6);  // 20 pairs: 6, 6, 6, 2
  ASSERT_EQ(order.group, 6);
  int prev_group = 0, prev_m = order.m_blocks;
  for (int t = 0; t < order.count; ++t) {
    const auto c = order.at(t);
    const int g = (c.b * 5 + c.h) / 6;
    ASSERT_GE(g, prev_group) << "tile " << t;
    if (g != prev_group) prev_m = order.m_blocks;
    ASSERT_LE(c.m_block, prev_m) << "tile " << t;
    prev_group = g;
    prev_m = c.m_block;
  }
  // Unmasked orders never group (every tile the same work, head-major already).
  EXPECT_EQ(TileOrder::make(shape(4, 5, 1000, false), 128, false, 6).group, 0);
}

AttnParams grid_shape(int head_dim, int seqlen) {
  AttnParams p = shape(16384 / seqlen, 2048 / head_dim, seqlen, true);
  p.head_dim = p.head_dim_v = head_dim;
  return p;
}

TEST(Sm90Schedule, HeadGroupRule) {
  const long long budget = 25ll << 20;  // half of an H100's L2
  const int grid = 132;
  // Causal 1K, head dim 128: 256 pairs of 512 KiB of K/V each: groups of <= 50
  // pairs, cut evenly (6 groups of 43, not 5 of 50 and one of 6).
  const int g = head_group_rule(grid_shape(128, 1024), grid, budget);
  EXPECT_EQ(g, 43);
  for (int d : {64, 128, 256})
    for (int n : {512, 1024, 2048, 4096, 8192, 16384}) {
      const AttnParams p = grid_shape(d, n);
      const int pairs = p.batch * p.heads_q;
      const int r = head_group_rule(p, grid, budget);
      const long long bytes = static_cast<long long>(n) * 2 * d * 2;
      if (pairs * kSharedTiles <= grid) {
        EXPECT_EQ(r, 0) << "d " << d << " N " << n << ": the plain order shares K/V already";
        continue;
      }
      ASSERT_GT(r, 0) << "d " << d << " N " << n;
      EXPECT_LE(r * bytes, budget) << "d " << d << " N " << n;
      const int groups = (pairs + r - 1) / r;
      EXPECT_GE(pairs - (groups - 1) * r, r - groups) << "d " << d << " N " << n << ": last group too small";
    }
  // Unmasked, or K/V of every pair within the budget: no groups.
  AttnParams p = grid_shape(128, 1024);
  p.window_right = -1;
  EXPECT_EQ(head_group_rule(p, grid, budget), 0);
  EXPECT_EQ(head_group_rule(grid_shape(128, 1024), grid, 1ll << 40), 0);
}

TEST(Sm90Schedule, HeadGroupRuleAtHeadDim64) {
  // Groups of 86 pairs for masked calls over 1K-2K keys, where the grid's shapes
  // have 512 and 256 pairs; none at 512 keys, from 4K, without a mask, or where
  // one group would hold every pair.
  EXPECT_EQ(head_group_rule_d64(grid_shape(64, 1024), 132), 86);
  EXPECT_EQ(head_group_rule_d64(grid_shape(64, 2048), 132), 86);
  for (int n : {512, 4096, 8192, 16384}) EXPECT_EQ(head_group_rule_d64(grid_shape(64, n), 132), 0) << "N " << n;
  AttnParams p = grid_shape(64, 1024);
  p.window_right = -1;
  EXPECT_EQ(head_group_rule_d64(p, 132), 0);
  p = grid_shape(64, 1024);
  p.batch = 2;  // 64 pairs: one group would be the whole order
  EXPECT_EQ(head_group_rule_d64(p, 132), 0);
}

// Largest over mean work per block when each block claims the next tile as it
// finishes the last (the dynamic schedule), each tile costing its key tiles plus
// a fixed half tile of overhead.
double greedy_spread(const TileOrder& order, int seqlen, int bm, int bn, int grid) {
  std::vector<double> busy(std::size_t(grid), 0.0);
  double total = 0;
  for (int t = 0; t < order.count; ++t) {
    const int m0 = order.at(t).m_block * bm;
    const double w = double((std::min(m0 + bm, seqlen) + bn - 1) / bn) + 0.5;
    auto it = std::min_element(busy.begin(), busy.end());
    *it += w;
    total += w;
  }
  return *std::max_element(busy.begin(), busy.end()) / (total / grid);
}

TEST(Sm90Schedule, ClaimedHeadGroupsStayEven) {
  // The grid's causal shapes that the rule groups, with their default tiles:
  // greedy claims over the grouped order keep the busiest block within 8% of the
  // mean (ungrouped: within 3%); the price of keeping each group's K/V in L2.
  struct Shape {
    int d, n, bm, bn;
  };
  for (const Shape s : {Shape{64, 1024, 128, 128}, Shape{64, 4096, 192, 128}, Shape{128, 1024, 128, 128},
                        Shape{128, 2048, 128, 128}, Shape{128, 4096, 128, 128}, Shape{256, 1024, 128, 64},
                        Shape{256, 2048, 128, 64}}) {
    const AttnParams p = grid_shape(s.d, s.n);
    const int g = head_group_rule(p, 132, 25ll << 20);
    ASSERT_GT(g, 0) << "d " << s.d << " N " << s.n;
    const double plain = greedy_spread(TileOrder::make(p, s.bm), s.n, s.bm, s.bn, 132);
    const double grouped = greedy_spread(TileOrder::make(p, s.bm, false, g), s.n, s.bm, s.bn, 132);
    EXPECT_LT(plain, 1.03) << "d " << s.d << " N " << s.n;
    EXPECT_LT(grouped, 1.08) << "d " << s.d << " N " << s.n;
  }
  // Head dim 64's groups of 86 pairs (1K: the 128-row tile; 2K: the 192-row one).
  for (const Shape s : {Shape{64, 1024, 128, 128}, Shape{64, 2048, 192, 128}}) {
    const AttnParams p = grid_shape(s.d, s.n);
    const int g = head_group_rule_d64(p, 132);
    ASSERT_GT(g, 0) << "N " << s.n;
    EXPECT_LT(greedy_spread(TileOrder::make(p, s.bm, false, g), s.n, s.bm, s.bn, 132), 1.08) << "N " << s.n;
  }
}

}  // namespace
}  // namespace flashpp::test
