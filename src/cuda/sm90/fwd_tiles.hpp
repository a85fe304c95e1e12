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

// Two rows per head dim. Variant 0 (key tile 128, or 3 stages at d=64) is the
// default; variant 1 widens the key tile to what the register budget allows
// with 2 stages, which halves the per-tile softmax/barrier overhead on long
// rows but leaves more of the last wave idle and costs more on short ones.
// fwd_long_keys_from(d) says from which key length variant 1 runs; it is 0 for
// head dims where variant 1 was not measured ahead (docs/tuning.md). Tuning
// builds (-DFLASHPP_SM90_TUNING=ON) compile variant 1 for every head dim and
// let FLASHPP_SM90_TILES=0/1 force either one.
inline constexpr int kTileVariants = 2;

constexpr int fwd_long_keys_from(int d) {
  switch (d) {
    case 64: return 4096;   // H200: +9..12% from 4K keys on, -6..16% below 2K
    case 128: return 4096;  // +2..4% from 4K (non-causal), -2..17% below 2K
    case 256: return 8192;  // +5..8% from 8K; at 4K non-causal still -3%
    default: return 0;
  }
}

constexpr FwdTiles fwd_tiles(int d, int variant = 0) {
  if (variant == 1) {
    switch (d) {
      case 64: return {64, 128, 192, 2};
      case 96: return {96, 128, 160, 2};
      case 128: return {128, 128, 176, 2};
      case 192: return {192, 128, 112, 2};
      case 256: return {256, 128, 80, 2};
      default: return {0, 0, 0, 0};
    }
  }
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
  return t.block_m == 64 * kConsumers && t.block_n % 16 == 0 && (t.block_n * 128) % 1024 == 0 && t.block_n <= 256 && t.head_dim % 16 == 0 &&
         t.stages >= 2 && fwd_smem_bytes(t) <= kSmemLimit;
}
constexpr bool fwd_table_ok() {
  for (int v = 0; v < kTileVariants; ++v)
    for (int d : kHeadDims)
      if (!fwd_row_ok(fwd_tiles(d, v))) return false;
  return true;
}
static_assert(fwd_table_ok(), "every sm90 forward tile row must fit the kernel's rules");

}  // namespace flashpp::cuda::sm90
