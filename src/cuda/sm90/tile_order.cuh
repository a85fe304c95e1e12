#pragma once
// The order in which a persistent grid takes (query block, head, batch) tiles:
// block i of the grid takes tiles i, i + gridDim.x, ... (a static schedule).
//  - Unmasked attention (every tile the same work): head-major, and inside one
//    (batch, head) the query blocks from the last to the first. Consecutive tiles
//    share a head, so the blocks running at one time read the same K/V and mostly
//    hit in L2.
//  - Causal or windowed masks (query block m sees about m + 1 key tiles):
//    block-major, longest first: all heads of the last query block, then all heads
//    of the one before, ... Head-major would hand one grid block only long tiles
//    and another only short ones (the grid stride moves the query block by a
//    fixed step modulo the blocks per head), leaving SMs idle at the end; in this
//    order every grid block gets an evenly spaced sample of lengths, longest
//    first, so the grid finishes together. Tiles running together still share
//    keys: they are the same few query blocks of every head, walking the same
//    key tiles downwards.
// Snake rounds (an option): round r hands tiles r * grid .. r * grid + grid - 1 to
// the blocks in forward order when r is even and in reverse when r is odd. With
// longest-first tiles, forward rounds alone give block 0 the longest tile of
// every round and the last block the shortest, so the spread between blocks grows
// with the number of rounds (up to one whole query row of key tiles at causal
// 1K-2K); alternating the direction bounds it by one round's spread.
// Head groups (an option, masked orders): the (batch, head) pairs are cut into
// groups of `group` and the order above runs group by group (all of group 0's
// tiles, longest first, then group 1's, ...). With many short rows (causal
// 512-2K keys: 128-1024 (batch, head) pairs) one step of the plain order is one
// query block of ~grid different heads: no two running tiles share K/V, and by
// the time the next query block of a head comes, its K/V has left L2, so every
// tile re-reads its keys from HBM. A group whose K/V fits in L2 keeps the reads of
// its query blocks in L2. Groups break the global longest-first order, which the
// static rounds need to stay even, so the launcher pairs them with the dynamic
// schedule (tile_queue.cuh), whose greedy claims stay even on the sawtooth.
#include "common/mask.hpp"
#include "common/params.hpp"

namespace flashpp::cuda::sm90 {

struct TileCoord {
  int m_block, h, b;
};

struct TileOrder {
  int m_blocks = 0;  // query blocks per (batch, head)
  int heads = 0;
  int heads_batch = 0;
  int count = 0;     // tiles in all
  bool block_major = false;
  bool snake = false;
  int group = 0;     // (batch, head) pairs per head group; 0 = one group (masked orders only)

  FLASHPP_HD static TileOrder make(const AttnParams& p, int block_m, bool snake_rounds = false, int head_group = 0) {
    TileOrder o;
    o.snake = snake_rounds;
    o.m_blocks = (p.seqlen_q + block_m - 1) / block_m;
    o.heads = p.heads_q;
    o.heads_batch = p.heads_q * p.batch;
    o.count = o.m_blocks * o.heads_batch;
    o.block_major = has_window(p.window_left, p.window_right);
    o.group = o.block_major && head_group > 0 && head_group < o.heads_batch ? head_group : 0;
    return o;
  }

  // The tile grid block `block` of `grid` takes in round `round` (>= count: none;
  // then none in later rounds either).
  FLASHPP_HD int tile_of(int round, int block, int grid) const {
    return round * grid + (snake && (round & 1) ? grid - 1 - block : block);
  }

  FLASHPP_HD TileCoord at(int tile) const {
    int bh, m;
    if (block_major) {
      // The group of the tile, its first pair and size (the last may be smaller).
      int first = 0, size = heads_batch, local = tile;
      if (group > 0) {
        const int g = tile / (group * m_blocks);
        first = g * group;
        local = tile - first * m_blocks;
        size = heads_batch - first < group ? heads_batch - first : group;
      }
      const int step = local / size;
      bh = first + local - step * size;
      m = m_blocks - 1 - step;
    } else {
      bh = tile / m_blocks;
      m = m_blocks - 1 - (tile - bh * m_blocks);
    }
    return {m, bh % heads, bh / heads};
  }
};

// The head-group rule (host): (batch, head) pairs per group of a masked order,
// 0 for none. Groups are cut where the plain order would run fewer than
// kSharedTiles tiles of one head at a time (grid / pairs; with more, the running
// tiles of a head already read its K/V together) and all heads' K/V exceed
// `l2_budget` bytes; each group's K/V then fits in the budget, and the groups
// are made as even as their count allows (a small last group would start its
// long tiles late). K/V bytes of a pair: its keys times both head dims, shared by
// the gqa_ratio query heads of one KV head (adjacent in the order).
inline constexpr int kSharedTiles = 4;
inline int head_group_rule(const AttnParams& p, int grid, long long l2_budget) {
  const int pairs = p.batch * p.heads_q;
  if (!has_window(p.window_left, p.window_right) || pairs * kSharedTiles <= grid) return 0;
  const long long bytes = static_cast<long long>(p.seqlen_k) * (p.head_dim + p.head_dim_v) * 2 / p.gqa_ratio;
  if (bytes <= 0 || bytes * pairs <= l2_budget) return 0;
  const long long fit = l2_budget / bytes;
  const int size = fit < 1 ? 1 : static_cast<int>(fit);
  const int groups = (pairs + size - 1) / size;
  return (pairs + groups - 1) / groups;
}

// Head dim 64 (masked calls over 512 to 2K keys): groups of 86 pairs. The rule
// above (groups whose K/V fit half the L2) gains nothing measurable there; groups
// of 86 pairs, forced over the grid on an H100 (same run, three rounds), took the
// DRAM reads of causal 1K from 663 to 206 MB (L2 hit rate 29% -> 66%) and gained
// +3.9% at 1K and +3.3% at 2K, -1.2% at 512 and -0.5% to +0.3% from 4K on; groups
// of 16 lost at 2K (-2.1%) and 4K (-2.7%). d 64's forward is limited more by its
// softmax than by DRAM, hence the small gain for a 3x cut in traffic.
inline constexpr int kHeadGroupD64 = 86;
inline int head_group_rule_d64(const AttnParams& p, int grid) {
  const int pairs = p.batch * p.heads_q;
  if (!has_window(p.window_left, p.window_right) || pairs * kSharedTiles <= grid) return 0;
  if (p.seqlen_k <= 512 || p.seqlen_k > 2048 || pairs <= kHeadGroupD64) return 0;
  return kHeadGroupD64;
}

}  // namespace flashpp::cuda::sm90
