#pragma once
// FA2-class forward kernel: one block per (query block, head, batch). The Q tile stays
// in shared memory; K/V tiles stream through a two-stage cp.async ring (or, with
// single buffers, K's load overlaps P V and V's overlaps S = Q K^T), walking from
// the last visible key tile to the first so that the tiles that need masks (the
// diagonal for causal, the sequence end) come first and the rest run unmasked.
// S and P live in registers; normalization happens once at the end.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "common/params.hpp"
#include "cuda/common/element.cuh"
#include "cuda/common/online_softmax.cuh"
#include "cuda/common/scores.cuh"
#include "cuda/common/sequence.cuh"
#include "cuda/common/smem_tile.cuh"
#include "cuda/common/tile_copy.cuh"
#include "cuda/common/warp_gemm.cuh"
#include "cuda/ptx/cp_async.cuh"
#include "cuda/sm80/fwd_store_o.cuh"
#include "cuda/sm80/tile_configs.hpp"

namespace flashpp::cuda::sm80 {

template <int D, int V = 0>
struct FwdSmem {
  static constexpr FwdTiles kT = fwd_tiles(D, V);
  using QTile = SmemTile<kT.block_m, D>;
  using KVTile = SmemTile<kT.block_n, D>;
  alignas(128) unsigned char q[QTile::kBytes];
  alignas(128) unsigned char k[kT.kv_stages][KVTile::kBytes];
  alignas(128) unsigned char v[kT.kv_stages][KVTile::kBytes];
};

// Issues the copies of key tile n (K or V; base: the head's first row, cols: the
// head dim the copy covers) into the tile at dst. V: the tile variant.
template <int D, bool FullKV, int V = 0, typename T>
__device__ __forceinline__ void fwd_load_tile(std::uint32_t dst, const T* base, std::int64_t row_stride, int n,
                                              int len_k, int cols, int tid) {
  constexpr FwdTiles kT = fwd_tiles(D, V);
  const int n0 = n * kT.block_n;
  copy_tile_async<typename FwdSmem<D, V>::KVTile, kT.warps * 32, FullKV>(dst, base + std::int64_t(n0) * row_stride,
                                                                      row_stride, min(kT.block_n, len_k - n0), cols,
                                                                      tid);
}

// The key loop of one query block (fwd_kernel and fwd_persistent_kernel): walks key
// tiles n_hi - 1 down to n_lo and accumulates O and the online softmax state.
// Through the two-stage ring, stage 0 holds tile n_hi - 1 (the prologue's commit
// group) on entry; with single buffers (tile variant V's kv_stages = 1) the prologue
// holds K(n_hi - 1) only. load_k / load_v (tile, stage) issue one tile's copies.
template <typename T, int D, bool Lazy, bool Skip, int V = 0, class LoadK, class LoadV>
__device__ __forceinline__ void fwd_key_loop(const AttnParams& p, const SeqRows& seq, int m0, int rows_q, int n_lo,
                                             int n_hi, std::uint32_t q_s, std::uint32_t k_s, std::uint32_t v_s,
                                             const ScoreMap& smap, LoadK&& load_k, LoadV&& load_v,
                                             float (&o)[fwd_tiles(D, V).m_tiles][D / 8][4],
                                             OnlineSoftmax<fwd_tiles(D, V).m_tiles>& softmax) {
  constexpr FwdTiles kT = fwd_tiles(D, V);
  constexpr bool kRing = kT.kv_stages == 2;
  // A skipping warp leaves a step early, before the single-buffer form's second barrier.
  static_assert(kRing || !Skip, "the warp skip needs the two-stage ring");
  constexpr int BN = kT.block_n, MT = kT.m_tiles;
  constexpr int NS = BN / 8, NO = D / 8;
  using QTile = typename FwdSmem<D, V>::QTile;
  using KVTile = typename FwdSmem<D, V>::KVTile;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t4 = lane & 3;
  const int wrow = warp * 16 * MT;
  const int wl = p.window_left, wr = p.window_right;

  // Keys any row of this warp can see (the first row's lower bound, the last row's
  // upper one: both bounds grow with the row), for the warp skip.
  int w_lo = 0, w_hi = 0;
  if constexpr (Skip) {
    w_lo = key_bounds(m0 + wrow, seq, wl, wr).lo;
    w_hi = key_bounds(m0 + wrow + 16 * MT - 1, seq, wl, wr).hi;
  }

  for (int n = n_hi - 1, it = 0; n >= n_lo; --n, ++it) {
    const int stage = kRing ? (it & 1) : 0;
    ptx::cp_async_wait_group<0>();
    // Ring: tile n has landed for every thread, and every warp is done with tile n+1,
    // whose stage the next prefetch overwrites. Single buffers: K(n) has landed and
    // every warp is done with V(n+1), which V(n) replaces.
    __syncthreads();
    if constexpr (kRing) {
      if (n > n_lo) {
        load_k(n - 1, stage ^ 1);
        load_v(n - 1, stage ^ 1);
      }
    } else {
      load_v(n, 0);
    }
    ptx::cp_async_commit_group();

    const int n0 = n * BN;
    bool masked = false;
    if constexpr (Skip) {
      // A warp none of whose rows sees a key of this tile leaves it out: its S would
      // be all -inf, its softmax state and O unchanged. Under a causal mask at short N
      // the diagonal tiles of a 128-row block are a large share of the work (N = 512:
      // 164K scores computed per head for 131K visible; with 16-row warps leaving
      // tiles out, 147K). The warp still takes the next step's barrier.
      masked = tile_needs_mask(m0, rows_q, n0, BN, seq, wl, wr);
      if (masked && (w_hi <= n0 || w_lo >= n0 + BN)) continue;
    }

    float s[MT][NS][4];
    zero(s);
    gemm_ss<T, QTile, Major::mk, KVTile, Major::mk, MT, NS, D / 16, fwd_stepped(D), fwd_stepped(D)>(
        s, q_s, wrow, 0, k_s + stage * KVTile::kBytes, 0, 0, lane);
    const bool fold = smap.folds();
    if (!fold) smap.apply(s);
    // (Without the skip the test stays here, after S = Q K^T: moved above it, the
    // d 64 and d 128 loops changed.)
    if constexpr (!Skip) masked = tile_needs_mask(m0, rows_q, n0, BN, seq, wl, wr);
    if (masked) {
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) {
          const KeyBounds r = key_bounds(m0 + wrow + mt * 16 + g + 8 * hh, seq, wl, wr);
#pragma unroll
          for (int nt = 0; nt < NS; ++nt)
#pragma unroll
            for (int e = 0; e < 2; ++e)
              if (!r.has(n0 + nt * 8 + 2 * t4 + e)) s[mt][nt][2 * hh + e] = -INFINITY;
        }
    }

    if constexpr (Lazy)
      softmax.update_lazy(s, o, fold ? smap.log2sc : 1.f);
    else
      softmax.update(s, o, fold ? smap.log2sc : 1.f);

    std::uint32_t pa[MT][NS / 2][4];
    acc_to_a<T>(pa, s);
    if constexpr (!kRing) {
      ptx::cp_async_wait_group<0>();
      // V(n) has landed for every thread; every warp is done with K(n).
      __syncthreads();
      if (n > n_lo) load_k(n - 1, 0);
      ptx::cp_async_commit_group();
    }
    gemm_rs<T, KVTile, Major::km, MT, NO, NS / 2, fwd_stepped(D)>(o, pa, v_s + stage * KVTile::kBytes, 0, 0, lane);
  }

}

// A query block's output: O normalized and written (staged at `stage_rows`, where
// this warp's 16 MT rows go: fwd_store_o.cuh), and the LSE of each row.
template <typename T, int D, int V = 0>
__device__ __forceinline__ void fwd_write_out(const AttnParams& p, const SeqRows& seq, int m0, int rows_q, int h,
                                              int b, const float (&o)[fwd_tiles(D, V).m_tiles][D / 8][4],
                                              const OnlineSoftmax<fwd_tiles(D, V).m_tiles>& softmax,
                                              unsigned char* stage_rows) {
  constexpr int MT = fwd_tiles(D, V).m_tiles, NO = D / 8;
  const int lane = threadIdx.x & 31, wrow = (threadIdx.x >> 5) * 16 * MT;
  const int g = lane >> 2, t4 = lane & 3;
  T* o_ptr = static_cast<T*>(p.o) + b * p.o_batch_stride + (seq.q0 + m0) * p.o_row_stride +
             std::int64_t(h) * p.o_head_stride;
  float inv[MT][2];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      const float sum = quad_sum(softmax.sum[mt][hh]);
      inv[mt][hh] = sum > 0.f ? 1.f / sum : 0.f;
      const int r = wrow + mt * 16 + g + 8 * hh;
      if (p.lse != nullptr && t4 == 0 && r < rows_q) {
        const float lse = sum > 0.f ? (softmax.max[mt][hh] + log2f(sum)) * 0.6931471805599453f : -INFINITY;
        p.lse[b * p.lse_batch_stride + std::int64_t(h) * p.lse_head_stride + seq.q0 + m0 + r] = lse;
      }
    }
  store_o_staged<T, typename FwdSmem<D, V>::QTile, MT, NO>(o, inv, stage_rows, wrow, lane, o_ptr, p.o_row_stride, rows_q,
                                                          p.head_dim_v);
}

// Skip: a warp leaves out the masked key tiles none of its rows can see (launched
// for masks with a window, where fwd_warp_skip allows it; launch.cuh).
// Lazy: rescale O only when a row's max has grown past the online softmax's
// slack (OnlineSoftmax::update_lazy; fwd_lazy_rescale says where). FullKV: full
// K/V tiles take the copy path without bounds or zero fill (fwd_full_tile_copies
// says where). V: the tile variant (tile_configs.hpp). The launch bounds' explicit
// one block per SM for variant 0 is what was measured: ptxas allocates registers
// differently without it.
template <typename T, int D, bool Lazy = false, bool FullKV = false, bool Skip = false, int V = 0>
__global__ void __launch_bounds__(fwd_tiles(D, V).warps * 32, fwd_min_blocks(fwd_tiles(D, V)))
    fwd_kernel(const __grid_constant__ AttnParams p) {
  constexpr FwdTiles kT = fwd_tiles(D, V);
  constexpr bool kRing = kT.kv_stages == 2;
  constexpr int BM = kT.block_m, BN = kT.block_n, MT = kT.m_tiles, THREADS = kT.warps * 32;
  constexpr int NO = D / 8;
  using Smem = FwdSmem<D, V>;
  using QTile = typename Smem::QTile;
  using KVTile = typename Smem::KVTile;
  static_assert(sizeof(Smem) == fwd_smem_bytes(kT), "shared-memory struct must match the tile table");

  extern __shared__ __align__(128) unsigned char smem_raw[];
  Smem& sm = *reinterpret_cast<Smem*>(smem_raw);

  // Under a right-bounded mask (causal) query blocks are issued last-first: a block's
  // work grows with its index, so the longest start first and the grid's tail holds
  // short blocks (+12-14% on the d 256 causal forward at 16K). Unmasked grids keep
  // their order. The flip is arithmetic on purpose: a select (mask ? reversed : x)
  // cost ptxas the index's range and grew the unmasked d 256 loop by 30 instructions;
  // this form compiles to the same loop as blockIdx.x (docs/tuning.md).
  const int flip = p.window_right >= 0 ? -1 : 0;
  const int m_block = (int(blockIdx.x) ^ flip) + (int(gridDim.x) & flip), h = blockIdx.y, b = blockIdx.z;
  // (The block's rows, pointers and key tiles are worked out here rather than through
  // fwd_persistent_kernel's FwdTile / FwdPointers: with those the plain loops grew by
  // 30-76 instructions, d 64 2163 -> 2221, d 256 1712 -> 1742, sm_90a.)
  const SeqRows seq = sequence_rows(p, b);
  const int m0 = m_block * BM;
  if (m0 >= seq.len_q) return;
  const int rows_q = min(BM, seq.len_q - m0);
  const int hk = h / p.gqa_ratio;
  const int tid = threadIdx.x, warp = tid >> 5;
  const int wrow = warp * 16 * MT;
  const int wl = p.window_left, wr = p.window_right;

  const T* q_ptr = static_cast<const T*>(p.q) + b * p.q_batch_stride + (seq.q0 + m0) * p.q_row_stride +
                   std::int64_t(h) * p.q_head_stride;
  const T* k_ptr = static_cast<const T*>(p.k) + b * p.k_batch_stride + seq.k0 * p.k_row_stride +
                   std::int64_t(hk) * p.k_head_stride;
  const T* v_ptr = static_cast<const T*>(p.v) + b * p.v_batch_stride + seq.k0 * p.v_row_stride +
                   std::int64_t(hk) * p.v_head_stride;

  // Key tiles any row of this block can see.
  const VisibleRange first = visible_keys(m0, seq.len_q, seq.len_k, wl, wr);
  const VisibleRange last = visible_keys(m0 + rows_q - 1, seq.len_q, seq.len_k, wl, wr);
  int n_lo = 0, n_hi = 0;
  if (first.lo < last.hi) {
    n_lo = int(first.lo / BN);
    n_hi = int((last.hi + BN - 1) / BN);
  }

  const std::uint32_t q_s = ptx::smem_u32(sm.q);
  const std::uint32_t k_s = ptx::smem_u32(sm.k[0]);
  const std::uint32_t v_s = ptx::smem_u32(sm.v[0]);
  auto load_k = [&](int n, int stage) {
    fwd_load_tile<D, FullKV, V>(k_s + stage * KVTile::kBytes, k_ptr, p.k_row_stride, n, seq.len_k, p.head_dim,
                                tid);
  };
  auto load_v = [&](int n, int stage) {
    fwd_load_tile<D, FullKV, V>(v_s + stage * KVTile::kBytes, v_ptr, p.v_row_stride, n, seq.len_k, p.head_dim_v,
                                tid);
  };

  copy_tile_async<QTile, THREADS>(q_s, q_ptr, p.q_row_stride, rows_q, p.head_dim, tid);
  if (n_hi > n_lo) {
    load_k(n_hi - 1, 0);
    if constexpr (kRing) load_v(n_hi - 1, 0);  // single buffers: V(n) is issued in its step
  }
  ptx::cp_async_commit_group();

  const ScoreMap smap = ScoreMap::from(p);
  float o[MT][NO][4];
  zero(o);
  OnlineSoftmax<MT> softmax;
  softmax.init();

  fwd_key_loop<T, D, Lazy, Skip, V>(p, seq, m0, rows_q, n_lo, n_hi, q_s, k_s, v_s, smap, load_k, load_v, o,
                                    softmax);

  ptx::cp_async_wait_group<0>();  // no copy may still target shared memory at exit
  // Without a key tile no step's barrier has ordered the other threads' Q copies
  // before the staged store below overwrites the Q tile.
  if (n_hi <= n_lo) __syncthreads();

  // Epilogue: O (staged through the warp's own Q rows) and LSE.
  fwd_write_out<T, D, V>(p, seq, m0, rows_q, h, b, o, softmax, sm.q + wrow * QTile::kRowBytes);
}

}  // namespace flashpp::cuda::sm80
