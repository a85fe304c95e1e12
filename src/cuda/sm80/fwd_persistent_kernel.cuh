#pragma once
// Persistent form of the FA2-class forward (fwd_persist says where): one block of
// threads per SM walks query blocks in rounds and issues each one's prologue under
// the previous one's epilogue. The key loop and epilogue are fwd_kernel.cuh's, as
// one function over a query block (fwd_block) with two hooks: the next block's
// prologue after the loop's last barrier, and O staged through the second K/V stage
// instead of the Q tile the prologue refills. (fwd_kernel keeps its own copy of the
// loop: expressed through fwd_block its loops grew by 2-3% of their instructions,
// nvcc 13.0 sm_90a: d 256 1711 -> 1752.)
#include "cuda/sm80/fwd_kernel.cuh"

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
  constexpr FwdTiles kT = fwd_tiles(D);
  using KVTile = typename FwdSmem<D>::KVTile;
  const int n0 = n * kT.block_n;
  const int rows = min(kT.block_n, t.seq.len_k - n0);
  copy_tile_async<KVTile, kT.warps * 32, FullKV>(ptx::smem_u32(sm.k[stage]), ptr.k + std::int64_t(n0) * p.k_row_stride,
                                                 p.k_row_stride, rows, p.head_dim, tid);
  copy_tile_async<KVTile, kT.warps * 32, FullKV>(ptx::smem_u32(sm.v[stage]), ptr.v + std::int64_t(n0) * p.v_row_stride,
                                                 p.v_row_stride, rows, p.head_dim_v, tid);
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
  constexpr int BN = kT.block_n, MT = kT.m_tiles;
  constexpr int NS = BN / 8, NO = D / 8;
  using QTile = typename FwdSmem<D>::QTile;
  using KVTile = typename FwdSmem<D>::KVTile;
  const SeqRows& seq = tile.seq;
  const int m0 = tile.m0, rows_q = tile.rows_q, n_lo = tile.n_lo, n_hi = tile.n_hi, h = tile.h, b = tile.b;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, t4 = lane & 3;
  const int wrow = warp * 16 * MT;
  const int wl = p.window_left, wr = p.window_right;
  const FwdPointers<T> ptr(p, tile);

  const std::uint32_t q_s = ptx::smem_u32(sm.q);
  const std::uint32_t k_s = ptx::smem_u32(sm.k[0]);
  const std::uint32_t v_s = ptx::smem_u32(sm.v[0]);
  auto load_k = [&](int n, int stage) {
    const int n0 = n * BN;
    copy_tile_async<KVTile, kT.warps * 32, FullKV>(k_s + stage * KVTile::kBytes,
                                                   ptr.k + std::int64_t(n0) * p.k_row_stride, p.k_row_stride,
                                                   min(BN, seq.len_k - n0), p.head_dim, tid);
  };
  auto load_v = [&](int n, int stage) {
    const int n0 = n * BN;
    copy_tile_async<KVTile, kT.warps * 32, FullKV>(v_s + stage * KVTile::kBytes,
                                                   ptr.v + std::int64_t(n0) * p.v_row_stride, p.v_row_stride,
                                                   min(BN, seq.len_k - n0), p.head_dim_v, tid);
  };

  const ScoreMap smap = ScoreMap::from(p);
  float o[MT][NO][4];
  zero(o);
  OnlineSoftmax<MT> softmax;
  softmax.init();

  // Keys any row of this warp can see (the first row's lower bound, the last row's
  // upper one: both bounds grow with the row), for the warp skip.
  int w_lo = 0, w_hi = 0;
  if constexpr (Skip) {
    w_lo = key_bounds(m0 + wrow, seq, wl, wr).lo;
    w_hi = key_bounds(m0 + wrow + 16 * MT - 1, seq, wl, wr).hi;
  }

  for (int n = n_hi - 1, it = 0; n >= n_lo; --n, ++it) {
    const int stage = it & 1;
    ptx::cp_async_wait_group<0>();
    // Tile n has landed for every thread, and every warp is done with tile n+1,
    // whose stage the next prefetch overwrites.
    __syncthreads();
    if (n > n_lo) {
      load_k(n - 1, stage ^ 1);
      load_v(n - 1, stage ^ 1);
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
    gemm_rs<T, KVTile, Major::km, MT, NO, NS / 2, fwd_stepped(D)>(o, pa, v_s + stage * KVTile::kBytes, 0, 0, lane);
  }

  ptx::cp_async_wait_group<0>();  // this block's copies have all landed
  // Every warp is done with Q and both K/V stages: the next block's prologue may
  // refill Q and stage 0 while this one's epilogue stages O in stage 1.
  __syncthreads();
  next();
  constexpr int kWarpBytes = 16 * MT * QTile::kRowBytes, kPerBuffer = KVTile::kBytes / kWarpBytes;
  static_assert(kT.warps <= 2 * kPerBuffer, "stage 1's K and V tiles hold every warp's O rows");
  unsigned char* stage_o = (warp < kPerBuffer ? sm.k[1] : sm.v[1]) + (warp % kPerBuffer) * kWarpBytes;

  // Epilogue: normalize, write O (every element of the block's rows, staged through
  // shared memory: fwd_store_o.cuh) and LSE.
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
  store_o_staged<T, QTile, MT, NO>(o, inv, stage_o, wrow, lane, o_ptr, p.o_row_stride, rows_q, p.head_dim_v);
}

// Persistent form (fwd_persist says where): one block of threads per SM walks the
// query blocks in rounds of gridDim.x, issuing each one's prologue (Q and its first
// K/V tile) under the previous one's epilogue, where one block per SM leaves
// nothing else to hide it. Round r gives block c the query block
// r gridDim.x + (c + r) % gridDim.x of the grid order (query block fastest, then
// head, batch; last-first under right-bounded masks as in fwd_kernel): a round is the same
// set as the non-persistent grid's wave, and the rotation hands each block of
// threads every position of a head's query blocks in turn, so under a causal mask no
// block of threads always gets the longest.
template <typename T, int D, bool Lazy = false, bool FullKV = false, bool Skip = false>
__global__ void __launch_bounds__(fwd_tiles(D).warps * 32, 1)
    fwd_persistent_kernel(const __grid_constant__ AttnParams p) {
  extern __shared__ __align__(128) unsigned char smem_raw[];
  FwdSmem<D>& sm = *reinterpret_cast<FwdSmem<D>*>(smem_raw);
  constexpr int BM = fwd_tiles(D).block_m;
  const int tiles_m = (p.seqlen_q + BM - 1) / BM;
  const int total = tiles_m * p.heads_q * p.batch, grid = gridDim.x, c = blockIdx.x;
  const int flip = p.window_right >= 0 ? -1 : 0;
  auto index_at = [&](int r) { return r * grid + (c + r) % grid; };
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
