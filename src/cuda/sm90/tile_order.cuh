#pragma once
// The order in which a persistent grid takes (query block, head, batch) tiles:
// block i of the grid takes tiles i, i + gridDim.x, ... Within one (batch, head)
// the query blocks run from the last to the first: with causal masks the last
// blocks see the most keys, so the longest tiles start first and the grid ends
// together; consecutive tiles share a head, so the blocks running at one time read
// the same K/V and mostly hit in L2.
#include "common/params.hpp"

namespace flashpp::cuda::sm90 {

struct TileCoord {
  int m_block, h, b;
};

struct TileOrder {
  int m_blocks = 0;  // query blocks per (batch, head)
  int heads = 0;
  int count = 0;     // tiles in all

  __host__ __device__ static TileOrder make(const AttnParams& p, int block_m) {
    TileOrder o;
    o.m_blocks = (p.seqlen_q + block_m - 1) / block_m;
    o.heads = p.heads_q;
    o.count = o.m_blocks * p.heads_q * p.batch;
    return o;
  }

  __device__ __forceinline__ TileCoord at(int tile) const {
    const int bh = tile / m_blocks;
    const int m = m_blocks - 1 - (tile - bh * m_blocks);
    return {m, bh % heads, bh / heads};
  }
};

}  // namespace flashpp::cuda::sm90
