#pragma once
// Tile configuration of the decode kernels, one row per compiled head dim, read
// by the launcher and the kernel alike. A block holds 16 * MT packed query rows
// (the query heads of one kv head times the query positions) and streams the
// K/V tiles of its key span through a STAGES-deep cp.async ring; each of its
// warps takes keys_per_warp keys of every tile and keeps its own online
// softmax, and the warps merge at the end (common/lse_merge.hpp).
//
// Why these sizes: a decode step moves bytes, not FLOPs. One tile stage is
// block_n * head_dim * 2 (K and V) * 2 bytes = 32 KiB at every head dim, and
// STAGES - 1 stages are in flight per block. With two blocks per SM (head dims
// up to 128) that is 128 KiB of loads in flight per SM, well above the ~40 KiB
// an H200 SM needs to cover HBM latency at its share of bandwidth. A deeper
// ring at one block per SM (6 stages) measured slower everywhere
// (docs/kvcache.md). The page ids of a split's span (page_ids entries) are
// staged in shared memory beside the ring; two blocks per SM still fit.
#include <cstddef>

namespace flashpp::cuda::decode {

inline constexpr std::size_t kSmemLimit = 227 * 1024;  // opt-in shared memory per block (sm80/sm90)
inline constexpr int kMaxSplits = 128;
// Largest cluster of split blocks (sm90; the most a cluster may hold when the
// kernel opts in to non-portable sizes).
inline constexpr int kMaxClusterSplits = 16;

struct DecodeTiles {
  int head_dim;       // compiled head dim (q/k and v both fit in it)
  int keys_per_warp;  // multiple of 16: one k16 step of the P.V product
  int stages;
  int blocks_per_sm;  // occupancy the launch bounds ask for
  int page_ids;       // page ids of the key span held in shared memory at once
  int warps;
  constexpr int threads() const { return warps * 32; }
  constexpr int block_n() const { return keys_per_warp * warps; }
};

// The wide variant (8 warps, twice the keys per tile, one block per SM) is for
// paged caches with pages smaller than a 4-warp tile, whose per-row page lookups
// make the loop issue-bound: twice the warps per SM issue it (docs/kvcache.md).
constexpr DecodeTiles decode_tiles(int d, bool wide = false) {
  switch (d) {
    case 64: return wide ? DecodeTiles{64, 32, 3, 1, 2048, 8} : DecodeTiles{64, 32, 3, 2, 2048, 4};
    case 128: return wide ? DecodeTiles{128, 16, 3, 1, 2048, 8} : DecodeTiles{128, 16, 3, 2, 2048, 4};
    case 256: return {256, 16, 3, 1, 2048, 4};
    default: return {0, 0, 0, 0, 0, 0};
  }
}

// Head dims with a wide variant (compiled for one row tile).
constexpr bool has_wide_variant(int d) { return d == 64 || d == 128; }

// Head dims the kernels are compiled for; others round up (the columns past
// the real head dim are zero-filled in shared memory and never read from HBM).
inline constexpr int kDecodeHeadDims[] = {64, 128, 256};

constexpr int decode_head_dim(int d) {
  for (int h : kDecodeHeadDims)
    if (d <= h) return h;
  return 0;
}

// Row tiles (16 rows each) per block: 2 where the accumulators fit, else 1.
constexpr int max_row_tiles(int d) { return d <= 128 ? 2 : 1; }

constexpr std::size_t stage_bytes(const DecodeTiles& t) { return std::size_t(2) * t.block_n() * t.head_dim * 2; }

// The warps' fp32 outputs, merged in shared memory after the main loop, reuse
// the stage buffers; rows are padded by 4 floats to spread banks.
constexpr std::size_t merge_bytes(const DecodeTiles& t, int mt) {
  return std::size_t(t.warps) * 16 * mt * (t.head_dim + 4) * 4;
}

// A split's partial (O as [rows][head_dim] floats and a log2-domain LSE per
// row), kept in shared memory for the cluster merge; placed after the merge
// buffer, inside the ring.
constexpr std::size_t cluster_part_bytes(const DecodeTiles& t, int mt) {
  return std::size_t(16) * mt * t.head_dim * 4 + std::size_t(16) * mt * 4;
}
constexpr std::size_t smem_bytes(const DecodeTiles& t, int mt) {
  const std::size_t ring = t.stages * stage_bytes(t);
  const std::size_t q = std::size_t(16) * mt * t.head_dim * 2;
  const std::size_t lse = std::size_t(t.warps) * 16 * mt * 4;
  const std::size_t ids = std::size_t(t.page_ids) * 4;
  const std::size_t total = (ring > merge_bytes(t, mt) ? ring : merge_bytes(t, mt)) + q + lse + ids;
  return (total + 127) / 128 * 128;  // the struct's 128-byte alignment pads it
}

// Shared memory a cluster launch asks for: at least enough that a second block
// cannot share the SM. The cluster merge is for few groups (batch-1 steps), where
// each block should have an SM's share of HBM to itself; the GPC-local placement
// of a cluster's blocks could otherwise pair two of them on one SM.
inline constexpr std::size_t kClusterSmemFloor = 116 * 1024;
constexpr std::size_t cluster_launch_smem(std::size_t bytes) {
  return bytes > kClusterSmemFloor ? bytes : kClusterSmemFloor;
}

constexpr bool decode_row_ok(const DecodeTiles& t, int max_mt) {
  const std::size_t per_sm = 228 * 1024;  // shared memory of one SM, 1 KiB of it reserved per block
  // The page-id window must cover the S - 1 tiles the prologue issues.
  bool ok = t.keys_per_warp % 16 == 0 && t.head_dim % 32 == 0 && t.stages >= 2 &&
            (t.stages - 1) * t.block_n() <= t.page_ids;
  for (int mt = 1; mt <= max_mt; ++mt)
    ok = ok && smem_bytes(t, mt) <= kSmemLimit && (smem_bytes(t, mt) + 1024) * t.blocks_per_sm <= per_sm &&
         merge_bytes(t, mt) + cluster_part_bytes(t, mt) <= t.stages * stage_bytes(t);
  return ok;
}

static_assert(decode_row_ok(decode_tiles(64), max_row_tiles(64)) && decode_row_ok(decode_tiles(128), max_row_tiles(128)) &&
              decode_row_ok(decode_tiles(256), max_row_tiles(256)));
static_assert(decode_row_ok(decode_tiles(64, true), 1) && decode_row_ok(decode_tiles(128, true), 1));

}  // namespace flashpp::cuda::decode
