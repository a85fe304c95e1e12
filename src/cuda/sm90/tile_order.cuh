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

  FLASHPP_HD static TileOrder make(const AttnParams& p, int block_m, bool snake_rounds = false) {
    TileOrder o;
    o.snake = snake_rounds;
    o.m_blocks = (p.seqlen_q + block_m - 1) / block_m;
    o.heads = p.heads_q;
    o.heads_batch = p.heads_q * p.batch;
    o.count = o.m_blocks * o.heads_batch;
    o.block_major = has_window(p.window_left, p.window_right);
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
      const int step = tile / heads_batch;
      bh = tile - step * heads_batch;
      m = m_blocks - 1 - step;
    } else {
      bh = tile / m_blocks;
      m = m_blocks - 1 - (tile - bh * m_blocks);
    }
    return {m, bh % heads, bh / heads};
  }
};

}  // namespace flashpp::cuda::sm90
