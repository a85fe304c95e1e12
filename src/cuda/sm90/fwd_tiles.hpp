#pragma once
// Tile sizes of the Hopper (sm90a) forward, one row per compiled head dim.
// A block is 3 warpgroups: one producer (TMA) and two consumers, each consumer
// owning 64 of the block's 128 query rows. K and V stream through `stages`
// shared-memory buffers. Every tile is stored as 64-column panels of 128-byte
// rows (the 128-byte swizzle atom), so head dims round up to a multiple of 64
// in shared memory; TMA fills the columns past the head dim with zeros.
#include <cstddef>

namespace flashpp::cuda::sm90 {

inline constexpr std::size_t kSmemLimit = 227 * 1024;
inline constexpr int kConsumers = 2;
inline constexpr int kThreads = 128 * (1 + kConsumers);

// Head dims this family is compiled for (others round up).
inline constexpr int kHeadDims[] = {64, 96, 128, 192, 256};

constexpr int round_head_dim(int d) {
  for (int h : kHeadDims)
    if (d <= h) return h;
  return 0;
}

struct FwdTiles {
  int head_dim;
  int block_m;  // query rows per block (64 per consumer warpgroup)
  int block_n;  // keys per K/V tile: the N of S = Q K^T, the K of O += P V
  int stages;   // K/V buffers
};

constexpr FwdTiles fwd_tiles(int d) {
  switch (d) {
    case 64: return {64, 128, 128, 3};
    case 96: return {96, 128, 128, 2};
    case 128: return {128, 128, 128, 2};
    case 192: return {192, 128, 96, 2};
    case 256: return {256, 128, 64, 2};
    default: return {0, 0, 0, 0};
  }
}

constexpr int panels(int d) { return (d + 63) / 64; }
constexpr std::size_t q_tile_bytes(const FwdTiles& t) { return std::size_t(panels(t.head_dim)) * t.block_m * 128; }
constexpr std::size_t kv_tile_bytes(const FwdTiles& t) { return std::size_t(panels(t.head_dim)) * t.block_n * 128; }
// Barriers: Q full/empty, K full/empty and V full/empty per stage (8 bytes each).
constexpr std::size_t barrier_bytes(const FwdTiles& t) { return 8 * (2 + 4 * std::size_t(t.stages)); }
// Dynamic shared memory asked for at launch: tiles, barriers, and 1 KiB to align the
// base to the 1024-byte swizzle atom.
constexpr std::size_t fwd_smem_bytes(const FwdTiles& t) {
  return 1024 + q_tile_bytes(t) + 2 * t.stages * kv_tile_bytes(t) + barrier_bytes(t);
}

constexpr bool fwd_row_ok(const FwdTiles& t) {
  return t.block_m == 64 * kConsumers && t.block_n % 16 == 0 && t.block_n <= 256 && t.head_dim % 16 == 0 &&
         t.stages >= 2 && fwd_smem_bytes(t) <= kSmemLimit;
}
static_assert(fwd_row_ok(fwd_tiles(64)) && fwd_row_ok(fwd_tiles(96)) && fwd_row_ok(fwd_tiles(128)) &&
                  fwd_row_ok(fwd_tiles(192)) && fwd_row_ok(fwd_tiles(256)),
              "every sm90 forward tile row must fit the kernel's rules");

}  // namespace flashpp::cuda::sm90
