#pragma once
// Tile sizes of the FA2-class kernels, one row per compiled head dim. Launchers and
// kernels both read these; each row is checked below against the rules the kernels
// rely on (warp tiling, register fragments, shared-memory budget).
#include <cstddef>

namespace flashpp::cuda::sm80 {

// Shared memory one block may use on sm80/sm90 (227 KiB opt-in).
inline constexpr std::size_t kSmemLimit = 227 * 1024;

// Head dims the kernels are compiled for; others round up to the next one.
inline constexpr int kHeadDims[] = {32, 64, 96, 128, 192, 256};

constexpr int round_head_dim(int d) {
  for (int h : kHeadDims)
    if (d <= h) return h;
  return 0;
}

// ---- forward: one block per (query block, head, batch) ----
struct FwdTiles {
  int head_dim;
  int block_m;    // query rows per block
  int block_n;    // keys per K/V tile
  int warps;      // each warp owns m_tiles * 16 query rows
  int m_tiles;
  int kv_stages = 2;  // K/V buffers: 2 (a ring) or 1 (each load overlaps the other's product)
};

// Variants: 0 is the head dim's main tile. Variant 1, head dim 256 only: 64 query
// rows, 4 warps and single K and V buffers (V's load overlaps S = Q K^T and the
// softmax, the next K's overlaps P V), 96 KiB, so two blocks share an SM and one's
// barriers and prologue hide behind the other's products. Variant 0 (128 rows, 8
// warps, a two-stage ring, 192 KiB) leaves one block per SM with nothing to hide
// them. Measured on an H100 against variant 0 with its warp skip and persistent form
// (same run, three rounds): causal +0.8 / +3.3 / +1.4 / +0.7% at 512 / 1K / 2K / 4K,
// -1.4 / -2.8% at 8K / 16K, unmasked -2.4 to -3.9%. fwd_short_tiles_pay says where
// it is launched.
inline constexpr int kFwdVariants = 2;

constexpr FwdTiles fwd_tiles(int d, int variant = 0) {
  if (variant == 1) return d == 256 ? FwdTiles{256, 64, 64, 4, 1, 1} : FwdTiles{0, 0, 0, 0, 0};
  switch (d) {
    case 32: return {32, 128, 64, 4, 2};
    case 64: return {64, 128, 64, 4, 2};
    case 96: return {96, 128, 64, 4, 2};
    case 128: return {128, 128, 64, 4, 2};
    case 192: return {192, 128, 64, 8, 1};
    case 256: return {256, 128, 64, 8, 1};
    default: return {0, 0, 0, 0, 0};
  }
}

constexpr bool fwd_has_variant(int d, int variant) { return fwd_tiles(d, variant).head_dim != 0; }

// Whether a masked call (a window bounds some row's keys: causal included) takes tile
// variant 1 at this many keys: short rows, where variant 0's one block per SM spends
// the largest share of its time in prologue, barriers and the diagonal tiles. With
// this rule the d 256 causal forward measured +5.3% at 1K and -1.1% at 512 (within
// its rounds' 3% spread) against the rule without variant 1. It reaches 4K keys: in
// the forced run above variant 1 also gained at causal 2K / 4K (+1.4 / +0.7%), the
// cells where this forward sits closest to torch flash (0.99-1.03x across runs), and
// lost from 8K.
constexpr bool fwd_short_tiles_pay(int d, int seqlen_k) { return fwd_has_variant(d, 1) && seqlen_k <= 4096; }

// Whether the forward skips the O rescale while no row max has grown past the
// online softmax's slack (OnlineSoftmax::update_lazy). Same-run on an H100 it won
// 5-10% at head dim 128 without a mask (0-7% causal) and lost 2-8% at 64 and 256,
// where the warp-wide test costs more than the rescales it saves (docs/tuning.md);
// 96 and 192 are unmeasured and keep the plain update.
constexpr bool fwd_lazy_rescale(int d) { return d == 128; }

// Whether the forward has a flavour whose warps leave out the masked tiles none of
// their rows can see (fwd_kernel.cuh's Skip), launched for masks with a window.
// Only where a warp holds 16 rows (8 warps, one m tile): with 32 rows per warp few
// diagonal tiles are invisible to a whole warp. Unmasked launches keep the kernel
// without it: in the loop of every step the test moved above S = Q K^T, which cost
// 1-3% at d 256 without a mask when it was the only kernel (docs/tuning.md).
constexpr bool fwd_warp_skip(int d) { return fwd_tiles(d).m_tiles == 1; }

// Whether the flavour pays at this many keys. Under a causal mask a warp leaves out
// one of a block's ~N / 64 tiles in four warps of eight, about 12% of a block's work
// at N = 512 and 1.5% at 4K, while its loop is 1% longer (d 256: 1729 instructions
// against 1711). Measured on an H100 against the kernel without it (same run, three
// rounds): +7% / +3% / +0.6% at 512 / 1K / 2K, -0.4 / -0.6 / -1.0% at 4K / 8K / 16K.
constexpr bool fwd_warp_skip_pays(int seqlen_k) { return seqlen_k <= 2048; }

// Whether the forward has a persistent form (fwd_persistent_kernel): where one block
// of 8 warps fills an SM (d 192, 256), nothing hides a block's prologue (Q and the
// first K/V tile, 128 KiB at d 256) and epilogue; the persistent form issues the next
// query block's prologue under the current one's epilogue.
constexpr bool fwd_persist(int d) { return fwd_tiles(d).warps == 8; }

// Whether it pays at this many keys: a prologue is a larger share of a short block.
// Measured on an H100 against the plain kernel (same run, three rounds, d 256):
// causal +3.4 / +0.7 / -8.4% at 512 / 1K / 2K, unmasked +1.3 / +0.2 / +0.2%
// (predicted +5-10% at 512-1K); so only the shortest rows take it.
constexpr bool fwd_persist_pays(int seqlen_k) { return seqlen_k <= 512; }

// Whether the forward's full K/V tiles skip the per-copy bounds and zero fill
// (copy_tile_async's full-tile path): ~10 integer instructions fewer per 16-byte copy,
// 16 copies per warp and tile at head dim 256. ptxas (nvcc 13.0) keeps the default
// flavours free of spills with it.
constexpr bool fwd_full_tile_copies(int) { return true; }

// Whether the forward's products address their ldmatrix loads from one lane address
// per operand (stepped_addr, fragments.cuh). At head dim 96 ptxas (nvcc 13.0) then
// spills 14 instructions' worth on sm_80 and 2 on sm_90a, and none without. At head
// dim 64 it saves 16 of ~3500 static instructions but ran 0.7-3.1% slower on an H100
// (bench/results/h100-2026-12-06-s3-verify); d 128 gained 1-4%, d 256 up to 3%.
constexpr bool fwd_stepped(int d) { return d != 96 && d != 64; }

// Q tile plus kv_stages K and V tiles each.
constexpr std::size_t fwd_smem_bytes(const FwdTiles& t) {
  return std::size_t(2) * t.head_dim * (t.block_m + 2 * t.kv_stages * t.block_n);
}

// Blocks per SM the launch bounds ask for: two for the single-buffer tiles.
constexpr int fwd_min_blocks(const FwdTiles& t) { return t.kv_stages == 1 ? 2 : 1; }

constexpr bool fwd_row_ok(const FwdTiles& t) {
  return t.block_m == t.warps * 16 * t.m_tiles && t.block_n % 16 == 0 && t.head_dim % 32 == 0 &&
         (t.kv_stages == 1 || t.kv_stages == 2) && fwd_smem_bytes(t) * fwd_min_blocks(t) <= kSmemLimit;
}

// ---- backward: one block per (key block, kv head, batch) ----
// Each product is split over the warps as a (rows x columns) grid; a warp's share is
// a multiple of 16 rows (m tiles) by a multiple of 16 columns (pairs of n tiles).
// Square-ish 32x32 shares reuse every loaded fragment twice, which is what keeps the
// shared-memory traffic per mma down (the backward is limited by it, not by the mma).
struct BwdTiles {
  int head_dim;
  int block_m;      // query rows per step
  int block_n;      // keys per block
  int warps;
  int sdp_warps_n;  // S^T, dP^T (keys x queries): warps along keys
  int dkv_warps_n;  // dK, dV (keys x dims): warps along keys
  int dq_warps_m;   // dQ (queries x dims): warps along queries
  constexpr int sdp_keys() const { return block_n / sdp_warps_n; }
  constexpr int sdp_queries() const { return block_m / (warps / sdp_warps_n); }
  constexpr int dkv_keys() const { return block_n / dkv_warps_n; }
  constexpr int dkv_dims() const { return head_dim / (warps / dkv_warps_n); }
  constexpr int dq_queries() const { return block_m / dq_warps_m; }
  constexpr int dq_dims() const { return head_dim / (warps / dq_warps_m); }
};

// Variants: 0 is what the library runs. Tuning builds (-DFLASHPP_SM80_TUNING=ON)
// also compile variant 1 where a head dim has one, and FLASHPP_SM80_BWD_TILES=1
// forces it, so one benchmark run can compare both on the same inputs.
//  - head dim 64 takes 128 query rows per step (FA2's shape for d = 64): the
//    per-step barriers, the LSE/D loads and the loop overhead are shared by twice
//    the FLOPs, at the cost of a 64-float S^T/dP^T share per thread (255 registers).
//    Same-run on an H100 it beat the 64-row step by 2.5-11% on every grid config
//    (docs/tuning.md); the 64-row step stays as variant 1 for comparison.
inline constexpr int kBwdVariants = 2;

constexpr BwdTiles bwd_tiles(int d, int variant = 0) {
  if (variant == 1) {
    switch (d) {
      case 64: return {64, 64, 128, 8, 4, 4, 2};
      default: return {0, 0, 0, 0, 1, 1, 1};
    }
  }
  switch (d) {
    case 32: return {32, 64, 128, 8, 4, 4, 4};
    case 64: return {64, 128, 128, 8, 4, 4, 4};
    case 96: return {96, 64, 128, 8, 4, 4, 4};
    case 128: return {128, 64, 128, 8, 4, 4, 2};
    case 192: return {192, 64, 64, 8, 2, 2, 2};
    case 256: return {256, 64, 64, 8, 2, 2, 2};
    default: return {0, 0, 0, 0, 1, 1, 1};
  }
}

constexpr bool bwd_has_variant(int d, int variant) { return bwd_tiles(d, variant).head_dim != 0; }

// Which backward products address their ldmatrix loads from one lane address per
// operand (stepped_addr, fragments.cuh) instead of recomputing the swizzle per load:
// phase A (S^T, dP^T), phase B's [m][k] operand (P^T, dS^T), and the [k][m] operands
// of phases B and C at warp offsets (only where those keep the steps inside a
// swizzle group). Fewer integer instructions, but the lane addresses stay live and
// ptxas (nvcc 13.0, sm_90a) allocates registers differently for each choice; the
// rows below are the choices with the fewest spills in both dtypes (static SASS:
// spill instructions f16 / bf16, main kernel):
//   d 64:  B/C only: 0 / 0 (all on: 22 / 0)
//   d 128: none: 2 / 2 (A and B on: 7 / 4; B/C on: 7 / 5)
//   d 256: A and B: 2 / 2 (all on: 23 in bf16; measured 1-3% slower on an H100)
// 32, 96 and 192 keep every product that may step.
struct BwdStepped {
  bool a, b_mk, bc;
};
constexpr BwdStepped bwd_stepped(int d) {
  switch (d) {
    case 64: return {false, false, true};
    case 128: return {false, false, false};
    default: return {true, true, d != 256};
  }
}

// Column parts of the backward's dQ product (phase C), each reduced into the
// accumulator before the next is computed (bwd_kernel.cuh). At d 256 two parts (with
// bwd_late_prefetch) take the loop's spills from 2 to 0; measured on an H100 (same
// run, three rounds): d 256 +4 to +7.3% at every length, masked or not.
constexpr int bwd_dq_parts(int d) { return d == 256 ? 2 : 1; }

// Whether the backward issues the next step's copies after phase A rather than at
// the top of the step, where they follow the previous step's dQ reductions at once:
// the two bursts of global-memory instructions fill the LSU queue (LG throttle, the
// d 256 backward's largest stall beside torch flash's under ncu). Measured on an H100
// (same run, three rounds): d 256 +0.6 to +1.2%, d 64 -2 to -3%, d 128 -1.5%.
constexpr bool bwd_late_prefetch(int d) { return d == 256; }

// K, V; double-buffered Q, dO, LSE and D; P^T and dS^T.
constexpr std::size_t bwd_smem_bytes(const BwdTiles& t) {
  return std::size_t(2) * t.head_dim * (2 * t.block_n + 2 * 2 * t.block_m) +
         std::size_t(2) * 2 * t.block_n * t.block_m + std::size_t(4) * 2 * 2 * t.block_m;
}

constexpr bool bwd_row_ok(const BwdTiles& t) {
  return t.warps % t.sdp_warps_n == 0 && t.warps % t.dkv_warps_n == 0 && t.warps % t.dq_warps_m == 0 &&
         t.sdp_keys() % 16 == 0 && t.sdp_queries() % 16 == 0 && t.dkv_keys() % 16 == 0 && t.dkv_dims() % 16 == 0 &&
         t.dq_queries() % 16 == 0 && t.dq_dims() % 16 == 0 && t.block_m % 32 == 0 && t.block_n % 32 == 0 &&
         2 * t.block_m <= t.warps * 32 &&  // LSE and D rows are fetched one per thread
         bwd_smem_bytes(t) <= kSmemLimit;
}

// ---- deterministic dQ: one block per (query block, head, batch), no atomics ----
struct DqTiles {
  int head_dim;
  int block_m;
  int block_n;
  int warps;  // 16 query rows each
};

// 256 takes 32-key tiles: its 64x256 fp32 dQ accumulator leaves no room for wider S/dP.
constexpr DqTiles dq_tiles(int d) { return {d, 64, d >= 256 ? 32 : 64, 4}; }

// Q, dO; double-buffered K and V.
constexpr std::size_t dq_smem_bytes(const DqTiles& t) {
  return std::size_t(2) * t.head_dim * (2 * t.block_m + 2 * 2 * t.block_n);
}

constexpr bool dq_row_ok(const DqTiles& t) {
  return t.block_m == 16 * t.warps && t.block_n % 32 == 0 && dq_smem_bytes(t) <= kSmemLimit;
}

static_assert(fwd_row_ok(fwd_tiles(32)));
static_assert(fwd_row_ok(fwd_tiles(64)));
static_assert(fwd_row_ok(fwd_tiles(96)));
static_assert(fwd_row_ok(fwd_tiles(128)));
static_assert(fwd_row_ok(fwd_tiles(192)));
static_assert(fwd_row_ok(fwd_tiles(256)));
static_assert(fwd_row_ok(fwd_tiles(256, 1)));
static_assert(bwd_row_ok(bwd_tiles(32)));
static_assert(bwd_row_ok(bwd_tiles(64)));
static_assert(bwd_row_ok(bwd_tiles(96)));
static_assert(bwd_row_ok(bwd_tiles(128)));
static_assert(bwd_row_ok(bwd_tiles(192)));
static_assert(bwd_row_ok(bwd_tiles(256)));
static_assert(bwd_row_ok(bwd_tiles(64, 1)));
static_assert(dq_row_ok(dq_tiles(32)));
static_assert(dq_row_ok(dq_tiles(64)));
static_assert(dq_row_ok(dq_tiles(96)));
static_assert(dq_row_ok(dq_tiles(128)));
static_assert(dq_row_ok(dq_tiles(192)));
static_assert(dq_row_ok(dq_tiles(256)));

}  // namespace flashpp::cuda::sm80
