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
  for (bool snake : {false, true})
    for (bool causal : {false, true})
      for (int grid : {1, 7, 132})
        for (int seqlen : {1, 128, 129, 1000, 4096}) {
          const TileOrder order = TileOrder::make(shape(3, 5, seqlen, causal), 128, snake);
          std::vector<int> seen(std::size_t(order.count), 0);
          for (const auto& tiles : walk(order, grid))
            for (int t : tiles) ++seen[std::size_t(t)];
          for (int t = 0; t < order.count; ++t)
            ASSERT_EQ(seen[std::size_t(t)], 1) << "tile " << t << " of " << order.count << ", grid " << grid
                                               << ", seqlen " << seqlen << (snake ? ", snake" : "");
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

}  // namespace
}  // namespace flashpp::test
