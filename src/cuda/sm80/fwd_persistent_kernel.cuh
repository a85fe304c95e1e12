#pragma once
// Persistent form of the FA2-class forward (fwd_persist says where): one block of
// threads per SM walks query blocks in rounds and issues each one's prologue under
// the previous one's epilogue. The key loop is fwd_kernel.cuh's (fwd_key_loop); the
// epilogue differs in two places: the next block's prologue is issued after the
// loop's last barrier, and O is staged through the second K/V stage instead of the
// Q tile the prologue refills.
#include "cuda/sm80/fwd_kernel.cuh"
#include "cuda/sm80/fwd_rounds.hpp"

namespace flashpp::cuda::sm80 {

// One query block: its rows, the key tiles they can see, where its head's rows start.
struct FwdTile {
  SeqRows seq;
  int m0 = 0, rows_q = 0, h = 0, b = 0, n_lo = 0, n_hi = 0;
  __device__ __forceinline__ bool empty() const { return m0 >= seq.len_q; }
};

template <int D>
__device__ __forceinline__ FwdTile fwd_tile(const AttnParams& p, int m_block, int h, int b) {
  constexpr int BM = fwd_tiles(D).block_m, BN = fwd_tiles(D).block_n;
  FwdTile t;
  t.seq = sequence_rows(p, b);
  t.m0 = m_block * BM;
  t.h = h;
  t.b = b;
  if (t.empty()) return t;
  t.rows_q = min(BM, t.seq.len_q - t.m0);
  // Key tiles any row of this block can see.
  const int wl = p.window_left, wr = p.window_right;
  const VisibleRange first = visible_keys(t.m0, t.seq.len_q, t.seq.len_k, wl, wr);
  const VisibleRange last = visible_keys(t.m0 + t.rows_q - 1, t.seq.len_q, t.seq.len_k, wl, wr);
  if (first.lo < last.hi) {
    t.n_lo = int(first.lo / BN);
    t.n_hi = int((last.hi + BN - 1) / BN);
  }
  return t;
}

// The global rows of a tile's Q, K and V (its head, its KV head).
template <typename T>
struct FwdPointers {
  const T* q;
  const T* k;
  const T* v;
  __device__ __forceinline__ FwdPointers(const AttnParams& p, const FwdTile& t) {
    const int hk = t.h / p.gqa_ratio;
    q = static_cast<const T*>(p.q) + t.b * p.q_batch_stride + (t.seq.q0 + t.m0) * p.q_row_stride +
        std::int64_t(t.h) * p.q_head_stride;
    k = static_cast<const T*>(p.k) + t.b * p.k_batch_stride + t.seq.k0 * p.k_row_stride +
        std::int64_t(hk) * p.k_head_stride;
    v = static_cast<const T*>(p.v) + t.b * p.v_batch_stride + t.seq.k0 * p.v_row_stride +
        std::int64_t(hk) * p.v_head_stride;
  }
};

template <typename T, int D, bool FullKV>
__device__ __forceinline__ void fwd_load_kv(const AttnParams& p, const FwdTile& t, const FwdPointers<T>& ptr,
                                            FwdSmem<D>& sm, int n, int stage, int tid) {
  fwd_load_tile<D, FullKV>(ptx::smem_u32(sm.k[stage]), ptr.k, p.k_row_stride, n, t.seq.len_k, p.head_dim, tid);
  fwd_load_tile<D, FullKV>(ptx::smem_u32(sm.v[stage]), ptr.v, p.v_row_stride, n, t.seq.len_k, p.head_dim_v, tid);
}

// A tile's first copies, one commit group: Q and its last visible K/V tile (stage 0).
template <typename T, int D, bool FullKV>
__device__ __forceinline__ void fwd_prologue(const AttnParams& p, const FwdTile& t, FwdSmem<D>& sm, int tid) {
  constexpr FwdTiles kT = fwd_tiles(D);
  const FwdPointers<T> ptr(p, t);
  copy_tile_async<typename FwdSmem<D>::QTile, kT.warps * 32>(ptx::smem_u32(sm.q), ptr.q, p.q_row_stride, t.rows_q,
                                                             p.head_dim, tid);
  if (t.n_hi > t.n_lo) fwd_load_kv<T, D, FullKV>(p, t, ptr, sm, t.n_hi - 1, 0, tid);
  ptx::cp_async_commit_group();
}

// One query block after its prologue: the key loop (fwd_kernel's), then the
// epilogue. After the loop's last product and a block barrier, `next` issues the
// next query block's prologue, and O is staged through the second K/V stage (which
// the next block's first prefetch overwrites only after its first barrier) instead
// of the Q tile the prologue is refilling. Lazy, FullKV, Skip as in fwd_kernel.
template <typename T, int D, bool Lazy, bool FullKV, bool Skip, class Next>
__device__ __forceinline__ void fwd_block(const AttnParams& p, FwdSmem<D>& sm, const FwdTile& tile, Next&& next) {
  constexpr FwdTiles kT = fwd_tiles(D);
  constexpr int MT = kT.m_tiles;
  constexpr int NO = D / 8;
  using QTile = typename FwdSmem<D>::QTile;
  using KVTile = typename FwdSmem<D>::KVTile;
  const SeqRows& seq = tile.seq;
  const int m0 = tile.m0, rows_q = tile.rows_q, n_lo = tile.n_lo, n_hi = tile.n_hi, h = tile.h, b = tile.b;
  const int tid = threadIdx.x, warp = tid >> 5;
  const FwdPointers<T> ptr(p, tile);

  const std::uint32_t q_s = ptx::smem_u32(sm.q);
  const std::uint32_t k_s = ptx::smem_u32(sm.k[0]);
  const std::uint32_t v_s = ptx::smem_u32(sm.v[0]);
  auto load_k = [&](int n, int stage) {
    fwd_load_tile<D, FullKV>(k_s + stage * KVTile::kBytes, ptr.k, p.k_row_stride, n, seq.len_k, p.head_dim, tid);
  };
  auto load_v = [&](int n, int stage) {
    fwd_load_tile<D, FullKV>(v_s + stage * KVTile::kBytes, ptr.v, p.v_row_stride, n, seq.len_k, p.head_dim_v, tid);
  };

  const ScoreMap smap = ScoreMap::from(p);
  float o[MT][NO][4];
  zero(o);
  OnlineSoftmax<MT> softmax;
  softmax.init();
  fwd_key_loop<T, D, Lazy, Skip>(p, seq, m0, rows_q, n_lo, n_hi, q_s, k_s, v_s, smap, load_k, load_v, o, softmax);

  ptx::cp_async_wait_group<0>();  // this block's copies have all landed
  // Every warp is done with Q and both K/V stages: the next block's prologue may
  // refill Q and stage 0 while this one's epilogue stages O in stage 1.
  __syncthreads();
  next();
  constexpr int kWarpBytes = 16 * MT * QTile::kRowBytes, kPerBuffer = KVTile::kBytes / kWarpBytes;
  static_assert(kT.warps <= 2 * kPerBuffer, "stage 1's K and V tiles hold every warp's O rows");
  unsigned char* stage_o = (warp < kPerBuffer ? sm.k[1] : sm.v[1]) + (warp % kPerBuffer) * kWarpBytes;

  fwd_write_out<T, D>(p, seq, m0, rows_q, h, b, o, softmax, stage_o);
}

// Persistent form (fwd_persist says where): one block of threads per SM walks the
// query blocks in rounds of gridDim.x, issuing each one's prologue (Q and its first
// K/V tile) under the previous one's epilogue, where one block per SM leaves
// nothing else to hide it. The rounds and their rotation: fwd_rounds.hpp (the grid
// order is query block fastest, then head, batch; last-first under right-bounded
// masks as in fwd_kernel).
template <typename T, int D, bool Lazy = false, bool FullKV = false, bool Skip = false>
__global__ void __launch_bounds__(fwd_tiles(D).warps * 32, 1)
    fwd_persistent_kernel(const __grid_constant__ AttnParams p) {
  extern __shared__ __align__(128) unsigned char smem_raw[];
  FwdSmem<D>& sm = *reinterpret_cast<FwdSmem<D>*>(smem_raw);
  constexpr int BM = fwd_tiles(D).block_m;
  const int tiles_m = (p.seqlen_q + BM - 1) / BM;
  const int total = tiles_m * p.heads_q * p.batch, grid = gridDim.x, c = blockIdx.x;
  const int flip = p.window_right >= 0 ? -1 : 0;
  auto index_at = [&](int r) { return round_index(r, c, grid); };
  auto tile_at = [&](int index) {
    const int mi = index % tiles_m, rest = index / tiles_m;
    return fwd_tile<D>(p, (mi ^ flip) + (tiles_m & flip), rest % p.heads_q, rest / p.heads_q);
  };

  int r = 0;
  FwdTile tile;
  for (;; ++r) {  // the first query block with rows (varlen batches have empty ones)
    if (index_at(r) >= total) return;
    tile = tile_at(index_at(r));
    if (!tile.empty()) break;
  }
  fwd_prologue<T, D, FullKV>(p, tile, sm, threadIdx.x);
  for (;;) {
    FwdTile after;
    bool more = false;
    fwd_block<T, D, Lazy, FullKV, Skip>(p, sm, tile, [&] {
      for (int q = r + 1; index_at(q) < total; ++q) {
        after = tile_at(index_at(q));
        if (after.empty()) continue;
        r = q;
        more = true;
        fwd_prologue<T, D, FullKV>(p, after, sm, threadIdx.x);
        return;
      }
    });
    if (!more) return;
    tile = after;
  }
}

}  // namespace flashpp::cuda::sm80
