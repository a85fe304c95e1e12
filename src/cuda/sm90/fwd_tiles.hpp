#pragma once
// Tile sizes of the Hopper (sm90a) forward, one row per compiled head dim and
// variant. A block is one producer warpgroup (TMA) and two or three consumer
// warpgroups, each consumer owning 64 of the block's query rows. K and V stream
// through `stages` shared-memory buffers. Every tile is stored as 64-column
// panels of 128-byte rows (the 128-byte swizzle atom), so head dims round up to
// a multiple of 64 in shared memory; TMA fills the columns past the head dim
// with zeros.
#include <cstddef>
#include <initializer_list>

namespace flashpp::cuda::sm90 {

inline constexpr std::size_t kSmemLimit = 227 * 1024;
// What the producer warpgroup keeps after setmaxnreg. Every register the
// consumers raise themselves to must come from the producer's release: the block
// holds only its launch allocation (168 per thread for 384 threads), so 24 here
// is what lets two consumers reach 240 (a producer of 32 leaves them waiting
// in setmaxnreg.inc forever).
inline constexpr int kProducerRegisters = 24;

// Head dims this family is compiled for (others round up).
inline constexpr int kHeadDims[] = {64, 96, 128, 192, 256};

constexpr int round_head_dim(int d) {
  for (int h : kHeadDims)
    if (d <= h) return h;
  return 0;
}

struct FwdTiles {
  int head_dim;
  int block_m;    // query rows per block (64 per consumer warpgroup)
  int block_n;    // keys per K/V tile: the N of S = Q K^T, the K of O += P V
  int stages;     // K/V buffers
  int consumers;  // consumer warpgroups (block_m / 64)
};

constexpr int fwd_threads(const FwdTiles& t) { return 128 * (1 + t.consumers); }
// Registers a consumer thread raises itself to (setmaxnreg): what the register
// block's launch allocation leaves after the producer's, rounded down to a
// multiple of 8 (setmaxnreg.inc waits until the registers are free: asking for
// more than the producer released never returns).
constexpr int launch_registers(const FwdTiles& t) { return 65536 / fwd_threads(t) / 8 * 8; }
constexpr int consumer_registers(const FwdTiles& t) {
  const int fit = (launch_registers(t) * fwd_threads(t) - 128 * kProducerRegisters) / (128 * t.consumers) / 8 * 8;
  return fit < 240 ? fit : 240;  // 240: the most setmaxnreg grants
}

// Variants per head dim. Variant 0 (key tile 128, or 3 stages at d=64) is the
// default for short keys; variant 1 widens the key tile to what the register
// budget allows with 2 stages, which halves the per-tile softmax/barrier
// overhead on long rows but leaves more of the last wave idle and costs more on
// short ones. Variant 2 (head dim 64 only) is three consumers of 64 rows (a
// 192-row block): with the softmax per FLOP twice hdim 128's, a third
// warpgroup gives the tensor pipe one more GEMM stream to switch to while two
// run their softmax; at 160 registers per consumer it fits only d = 64.
// fwd_default_variant() is the rule (head dim 64 runs variants 0 and 2, 128 and
// 256 variants 0 and 1, 96 and 192 variant 0); tuning builds (-DFLASHPP_SM90_TUNING=ON)
// compile every variant and let FLASHPP_SM90_TILES=0/1/2 force one.
inline constexpr int kTileVariants = 3;

constexpr FwdTiles fwd_tiles(int d, int variant = 0) {
  if (variant == 2) {
    switch (d) {
      case 64: return {64, 192, 128, 3, 3};
      default: return {0, 0, 0, 0, 0};
    }
  }
  if (variant == 1) {
    switch (d) {
      case 64: return {64, 128, 192, 2, 2};
      case 96: return {96, 128, 160, 2, 2};
      case 128: return {128, 128, 176, 2, 2};
      case 192: return {192, 128, 112, 2, 2};
      case 256: return {256, 128, 80, 2, 2};
      default: return {0, 0, 0, 0, 0};
    }
  }
  switch (d) {
    case 64: return {64, 128, 128, 3, 2};
    case 96: return {96, 128, 128, 2, 2};
    case 128: return {128, 128, 128, 2, 2};
    case 192: return {192, 128, 96, 2, 2};
    case 256: return {256, 128, 64, 2, 2};
    default: return {0, 0, 0, 0, 0};
  }
}

// Key tiles the plain-loop kernel (plain_loop.hpp) takes apart, with the mask, at
// the top of a query block's walk: the highest visible one, and where the tile is
// not square also the one below it, which a causal diagonal of a square call
// reaches into (128 x 176, 192 x 128, 128 x 64, 128 x 80). Square tiles peel one:
// the second peel's code, even where it never runs, cost them 1.5-3% (same-run
// A/B on an H100, docs/tuning.md, eleventh session).
constexpr int plain_peeled_tiles(int block_m, int block_n) { return block_m == block_n ? 1 : 2; }

constexpr bool fwd_has_variant(int d, int variant) { return fwd_tiles(d, variant).head_dim != 0; }

// The variant the library runs for head dim d, key length seqlen_k (the longest
// sequence for varlen) and whether a causal/window mask applies. From the
// same-run tiles table of the H200 (bench/results/h200-2026-12-04-tiles, every
// variant forced in turn; docs/hopper_forward.md): the wider tiles pay off
// once rows are long enough to amortize a longer last wave, later with a mask
// (masked query blocks are shorter).
constexpr int fwd_default_variant(int d, long long seqlen_k, bool masked) {
  switch (d) {
    case 64: return seqlen_k >= 2048 ? 2 : 0;  // 3 consumers: +9..16% from 2K; causal 512-1K -13%
    case 128: return seqlen_k >= (masked ? 8192 : 4096) ? 1 : 0;  // causal 4K: -5% with the wide tile
    case 256: return seqlen_k >= (masked ? 4096 : 2048) ? 1 : 0;  // +3..9% from 2K, causal from 4K
    default: return 0;
  }
}

// Whether the rule can pick `variant` at head dim d (what a default build compiles).
constexpr bool fwd_rule_picks(int d, int variant) {
  for (bool masked : {false, true})
    for (long long n : {0LL, 1LL << 11, 1LL << 12, 1LL << 13, 1LL << 40})
      if (fwd_default_variant(d, n, masked) == variant) return true;
  return false;
}

constexpr int panels(int d) { return (d + 63) / 64; }
constexpr std::size_t q_tile_bytes(const FwdTiles& t) { return std::size_t(panels(t.head_dim)) * t.block_m * 128; }
constexpr std::size_t kv_tile_bytes(const FwdTiles& t) { return std::size_t(panels(t.head_dim)) * t.block_n * 128; }
// The O tile of a TMA-store epilogue has Q's shape (64-column panels of block_m rows).
constexpr std::size_t o_tile_bytes(const FwdTiles& t) { return q_tile_bytes(t); }
// The dynamic schedule's queue of tile indices (tile_queue.cuh): kTileSlots ints and
// a full and an empty mbarrier per slot.
inline constexpr int kTileSlots = 4;
inline constexpr std::size_t kTileQueueBytes = 4 * kTileSlots + 16 * kTileSlots;
// Barriers: Q full/empty per Q buffer, O empty (the staged O read out), K full/empty
// and V full/empty per stage (8 bytes each), then the tile queue.
// Head dims whose plain kernels take the softmax's row sums from the tensor pipe:
// P V runs 8 columns wider, over a shared-memory panel of ones, so the extra
// accumulator columns hold the sums of the probabilities, rescaled with O. At d 64
// the key loop is bound by issue, and the sum's ~64 FADD per key tile are 13% of it;
// the wider P V costs 1/16 more tensor time. (From d 128 the loop is bound by the
// tensor pipe.)
constexpr bool row_sums_by_tensor(int d) { return d == 64; }
// That panel: one 128-byte row of ones per key of a tile.
constexpr std::size_t ones_panel_bytes(const FwdTiles& t) {
  return row_sums_by_tensor(t.head_dim) ? std::size_t(t.block_n) * 128 : 0;
}
constexpr std::size_t barrier_bytes(const FwdTiles& t) { return 8 * (5 + 4 * std::size_t(t.stages)) + kTileQueueBytes; }
// Q buffers: two where the budget has room (the narrow tiles of head dims up to
// 128), so the next tile's Q can load while this tile runs instead of in the gap
// between them (FwdKnobs::q_double); one otherwise.
constexpr int q_buffers(const FwdTiles& t) {
  return 1024 + 2 * q_tile_bytes(t) + 2 * t.stages * kv_tile_bytes(t) + ones_panel_bytes(t) + barrier_bytes(t) <=
                 kSmemLimit
             ? 2
             : 1;
}
// Dynamic shared memory asked for at launch: Q, the K/V stages, barriers, and 1 KiB
// to align the base to the 1024-byte swizzle atom.
constexpr std::size_t fwd_smem_bytes(const FwdTiles& t) {
  return 1024 + q_buffers(t) * q_tile_bytes(t) + 2 * t.stages * kv_tile_bytes(t) + ones_panel_bytes(t) + barrier_bytes(t);
}
// A buffer of O's own for the TMA-store epilogue sits after the barriers, on the
// next swizzle atom; launches with that epilogue ask for it on top.
constexpr std::size_t o_buffer_offset(const FwdTiles& t) { return (fwd_smem_bytes(t) - 1024 + 1023) / 1024 * 1024; }
constexpr std::size_t fwd_smem_bytes_o_buffer(const FwdTiles& t) { return 1024 + o_buffer_offset(t) + o_tile_bytes(t); }
// Where the epilogue stages O for its TMA store: a buffer of its own when the
// budget has room (head dims 64-128 with the narrow tiles), else over the V
// stages, which the producer then refills for the next tile only once the store
// has read them (the wide tiles and head dims 192/256 use 200+ KB for Q, K, V).
enum class OStaging { own_buffer, over_v };
constexpr OStaging o_staging(const FwdTiles& t) {
  return fwd_smem_bytes_o_buffer(t) <= kSmemLimit ? OStaging::own_buffer : OStaging::over_v;
}
// What a launch asks for, with or without the TMA-store epilogue.
constexpr std::size_t fwd_launch_smem(const FwdTiles& t, bool o_tma) {
  return o_tma && o_staging(t) == OStaging::own_buffer ? fwd_smem_bytes_o_buffer(t) : fwd_smem_bytes(t);
}

constexpr bool fwd_row_ok(const FwdTiles& t) {
  return (t.consumers == 2 || t.consumers == 3) && t.block_m == 64 * t.consumers && t.block_m <= 256 &&
         t.block_n % 16 == 0 && (t.block_n * 128) % 1024 == 0 && t.block_n <= 256 && t.head_dim % 16 == 0 &&
         t.stages >= 2 && fwd_smem_bytes(t) <= kSmemLimit && 128 * fwd_threads(t) <= 65536 &&
         o_tile_bytes(t) <= t.stages * kv_tile_bytes(t);  // O fits over the V stages
}
constexpr bool fwd_table_ok() {
  for (int v = 0; v < kTileVariants; ++v)
    for (int d : kHeadDims)
      if (fwd_has_variant(d, v) && !fwd_row_ok(fwd_tiles(d, v))) return false;
  for (int d : kHeadDims)
    if (!fwd_has_variant(d, 0)) return false;
  return true;
}
static_assert(fwd_table_ok(), "every sm90 forward tile row must fit the kernel's rules");
static_assert(o_staging(fwd_tiles(64, 2)) == OStaging::own_buffer && o_staging(fwd_tiles(128, 0)) == OStaging::own_buffer &&
                  o_staging(fwd_tiles(128, 1)) == OStaging::over_v && o_staging(fwd_tiles(256, 0)) == OStaging::over_v,
              "where the epilogue stages O");
static_assert(q_buffers(fwd_tiles(64, 2)) == 2 && q_buffers(fwd_tiles(128, 0)) == 2 && q_buffers(fwd_tiles(128, 1)) == 1 &&
                  q_buffers(fwd_tiles(256, 0)) == 1,
              "which tiles double-buffer Q");
static_assert(consumer_registers({64, 128, 128, 3, 2}) == 240 && consumer_registers({64, 192, 128, 3, 3}) == 160,
              "register split of two and three consumers");

}  // namespace flashpp::cuda::sm90
