#pragma once
// Deterministic dQ: one block per (query block, head, batch) walks the visible key
// tiles like the forward pass, recomputes P and dS in registers and accumulates
// dQ = dS K in registers, so dQ is written once, without atomics, in a fixed order.
// The ExactD instantiation is the exact-D pass of bwd_exact_d.cuh: the same walk over
// the key tiles of marked query blocks, forming D = sum P dP / sum P instead of dQ.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "common/params.hpp"
#include "cuda/common/element.cuh"
#include "cuda/common/scores.cuh"
#include "cuda/common/sequence.cuh"
#include "cuda/common/smem_tile.cuh"
#include "cuda/common/tile_copy.cuh"
#include "cuda/common/warp_gemm.cuh"
#include "cuda/ptx/cp_async.cuh"
#include "cuda/sm80/bwd_args.hpp"
#include "cuda/sm80/bwd_exact_d.cuh"
#include "cuda/sm80/tile_configs.hpp"

namespace flashpp::cuda::sm80 {

template <int D>
struct DqSmem {
  static constexpr DqTiles kT = dq_tiles(D);
  using QTile = SmemTile<kT.block_m, D>;   // Q, dO
  using KVTile = SmemTile<kT.block_n, D>;  // K, V
  alignas(128) unsigned char q[QTile::kBytes];
  alignas(128) unsigned char dout[QTile::kBytes];
  alignas(128) unsigned char k[2][KVTile::kBytes];
  alignas(128) unsigned char v[2][KVTile::kBytes];
};

// One query block (m_block, query head h, batch entry b).
template <typename T, int D, bool ExactD>
__device__ __forceinline__ void bwd_dq_block(const AttnParams& p, const BwdArgs& a, int m_block, int h, int b) {
  constexpr DqTiles kT = dq_tiles(D);
  constexpr int BM = kT.block_m, BN = kT.block_n, THREADS = kT.warps * 32;
  constexpr int NS = BN / 8, NO = D / 8;
  using Smem = DqSmem<D>;
  using QTile = typename Smem::QTile;
  using KVTile = typename Smem::KVTile;
  static_assert(sizeof(Smem) == dq_smem_bytes(kT), "shared-memory struct must match the tile table");

  extern __shared__ __align__(128) unsigned char smem_raw[];
  Smem& sm = *reinterpret_cast<Smem*>(smem_raw);

  const SeqRows seq = sequence_rows(p, b);
  const int m0 = m_block * BM;
  if (m0 >= seq.len_q) return;
  const int rows_q = min(BM, seq.len_q - m0);
  if constexpr (ExactD) {
    if (!any_group_marked(a.flag_q + std::int64_t(h) * a.hot_q_head_stride, seq.q_global0 + m0, rows_q)) return;
  }
  const int hk = h / p.gqa_ratio;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, t4 = lane & 3;
  const int wrow = warp * 16;
  const int wl = p.window_left, wr = p.window_right;

  const VisibleRange first = visible_keys(m0, seq.len_q, seq.len_k, wl, wr);
  const VisibleRange last = visible_keys(m0 + rows_q - 1, seq.len_q, seq.len_k, wl, wr);
  int n_lo = 0, n_hi = 0;
  if (first.lo < last.hi) {
    n_lo = int(first.lo / BN);
    n_hi = int((last.hi + BN - 1) / BN);
  }

  const T* k_ptr = static_cast<const T*>(p.k) + b * p.k_batch_stride + seq.k0 * p.k_row_stride +
                   std::int64_t(hk) * p.k_head_stride;
  const T* v_ptr = static_cast<const T*>(p.v) + b * p.v_batch_stride + seq.k0 * p.v_row_stride +
                   std::int64_t(hk) * p.v_head_stride;
  const std::uint32_t q_s = ptx::smem_u32(sm.q), do_s = ptx::smem_u32(sm.dout);
  const std::uint32_t k_s = ptx::smem_u32(sm.k[0]), v_s = ptx::smem_u32(sm.v[0]);
  auto load_kv = [&](int n, int stage) {
    const int n0 = n * BN;
    const int rows = min(BN, seq.len_k - n0);
    copy_tile_async<KVTile, THREADS>(k_s + stage * KVTile::kBytes, k_ptr + std::int64_t(n0) * p.k_row_stride,
                                     p.k_row_stride, rows, p.head_dim, tid);
    copy_tile_async<KVTile, THREADS>(v_s + stage * KVTile::kBytes, v_ptr + std::int64_t(n0) * p.v_row_stride,
                                     p.v_row_stride, rows, p.head_dim_v, tid);
  };

  copy_tile_async<QTile, THREADS>(q_s,
                                  static_cast<const T*>(p.q) + b * p.q_batch_stride + (seq.q0 + m0) * p.q_row_stride +
                                      std::int64_t(h) * p.q_head_stride,
                                  p.q_row_stride, rows_q, p.head_dim, tid);
  copy_tile_async<QTile, THREADS>(do_s,
                                  static_cast<const T*>(p.dout) + b * p.do_batch_stride +
                                      (seq.q0 + m0) * p.do_row_stride + std::int64_t(h) * p.do_head_stride,
                                  p.do_row_stride, rows_q, p.head_dim_v, tid);
  if (n_hi > n_lo) load_kv(n_hi - 1, 0);
  ptx::cp_async_commit_group();

  // Each lane's two rows: LSE (log2 domain) and D.
  float l2[2], dd[2];
#pragma unroll
  for (int hh = 0; hh < 2; ++hh) {
    const int r = wrow + g + 8 * hh;
    const bool valid = r < rows_q;
    const float lse =
        valid ? p.lse[b * p.lse_batch_stride + std::int64_t(h) * p.lse_head_stride + seq.q0 + m0 + r] : 0.f;
    l2[hh] = lse_to_log2(lse, valid);
    dd[hh] = valid ? a.dsum[std::int64_t(h) * a.dsum_head_stride + seq.q_global0 + m0 + r] : 0.f;
  }

  const ScoreMap smap = ScoreMap::from(p);
  float dq[1][NO][4];
  zero(dq);

  // ExactD: S^T = K Q^T and dP^T = V dO^T as the main kernel forms them (keys as the
  // mma's rows), so each P and dP is bitwise the one it used. A lane holds queries
  // wrow + 8 nt + 2 t4 + e, keys g + 8 hh of each 16-key slice.
  constexpr int MK = BN / 16;
  ShiftedSum dsum_x[ExactD ? 2 : 1][2];
  // l2c: the lane's query columns' LSE; thr: their concentrated_probability (from
  // the row's visible key count; 2, never reached, for rows past the block).
  float l2c[ExactD ? 2 : 1][2], thr[ExactD ? 2 : 1][2];
  if constexpr (ExactD) {
#pragma unroll
    for (int nt = 0; nt < 2; ++nt)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int r = wrow + nt * 8 + 2 * t4 + e;
        const bool valid = r < rows_q;
        const float lse =
            valid ? p.lse[b * p.lse_batch_stride + std::int64_t(h) * p.lse_head_stride + seq.q0 + m0 + r] : 0.f;
        l2c[nt][e] = lse_to_log2(lse, valid);
        const KeyBounds kb = key_bounds(m0 + r, seq, wl, wr);
        thr[nt][e] = valid ? concentrated_probability<T>(kb.hi - kb.lo) : 2.f;
      }
  }
  // Global key row of key 0 (the row dimension of a varlen k, b * seqlen_k otherwise).
  const std::int64_t k_row_base = p.cu_seqlens_k != nullptr ? seq.k0 : std::int64_t(b) * p.seqlen_k;
  auto exact_d_tile = [&](int n, int stage) {
    float st[MK][2][4], dpt[MK][2][4];
    zero(st);
    zero(dpt);
    gemm_ss<T, KVTile, Major::mk, QTile, Major::mk, MK, 2, D / 16>(st, k_s + stage * KVTile::kBytes, 0, 0, q_s, wrow,
                                                                   0, lane);
    gemm_ss<T, KVTile, Major::mk, QTile, Major::mk, MK, 2, D / 16>(dpt, v_s + stage * KVTile::kBytes, 0, 0, do_s,
                                                                   wrow, 0, lane);
    const bool fold = smap.folds();
    if (!fold) smap.apply(st);
    const int n0 = n * BN;
    if (tile_needs_mask(m0, rows_q, n0, BN, seq, wl, wr)) {
#pragma unroll
      for (int nt = 0; nt < 2; ++nt)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const KeyBounds r = key_bounds(m0 + wrow + nt * 8 + 2 * t4 + e, seq, wl, wr);
#pragma unroll
          for (int mt = 0; mt < MK; ++mt)
#pragma unroll
            for (int hh = 0; hh < 2; ++hh)
              if (!r.has(n0 + mt * 16 + g + 8 * hh)) st[mt][nt][2 * hh + e] = -INFINITY;
        }
    }
    const float mul = fold ? smap.log2sc : 1.f;
    // Keys at or above a row's threshold: the fix pass redoes their block's dK.
    bool top_key[MK][2];
#pragma unroll
    for (int mt = 0; mt < MK; ++mt) top_key[mt][0] = top_key[mt][1] = false;
    auto accumulate = [&](auto capped) {
#pragma unroll
      for (int nt = 0; nt < 2; ++nt)
#pragma unroll
        for (int e = 0; e < 2; ++e)
#pragma unroll
          for (int mt = 0; mt < MK; ++mt)
#pragma unroll
            for (int hh = 0; hh < 2; ++hh) {
              float unused = 0.f;
              const float pr = prob_and_grad<decltype(capped)::value>(st[mt][nt][2 * hh + e], mul, l2c[nt][e], 0.f,
                                                                      unused, smap);
              dsum_x[nt][e].add(pr, dpt[mt][nt][2 * hh + e]);
              top_key[mt][hh] = top_key[mt][hh] || stored_probability<T>(pr) >= thr[nt][e];
            }
    };
    if (smap.capped)
      accumulate(std::true_type{});
    else
      accumulate(std::false_type{});
    bool any_top = false;
#pragma unroll
    for (int mt = 0; mt < MK; ++mt) any_top = any_top || top_key[mt][0] || top_key[mt][1];
    if (__any_sync(0xffffffffu, any_top)) {
#pragma unroll
      for (int mt = 0; mt < MK; ++mt)
#pragma unroll
        for (int hh = 0; hh < 2; ++hh)
          if (top_key[mt][hh])
            a.hot_k[std::int64_t(hk) * a.hot_k_head_stride + (k_row_base + n0 + mt * 16 + g + 8 * hh) / kHotGroupRows] =
                1;
      if (lane == 0) *a.any_hot = 1;
    }
  };

  for (int n = n_hi - 1, it = 0; n >= n_lo; --n, ++it) {
    const int stage = it & 1;
    ptx::cp_async_wait_group<0>();
    __syncthreads();
    if (n > n_lo) load_kv(n - 1, stage ^ 1);
    ptx::cp_async_commit_group();

    if constexpr (ExactD) {
      exact_d_tile(n, stage);
    } else {
    float s[1][NS][4], dp[1][NS][4];
    zero(s);
    zero(dp);
    gemm_ss<T, QTile, Major::mk, KVTile, Major::mk, 1, NS, D / 16>(s, q_s, wrow, 0, k_s + stage * KVTile::kBytes, 0, 0,
                                                                   lane);
    gemm_ss<T, QTile, Major::mk, KVTile, Major::mk, 1, NS, D / 16>(dp, do_s, wrow, 0, v_s + stage * KVTile::kBytes, 0,
                                                                   0, lane);
    const bool fold = smap.folds();
    if (!fold) smap.apply(s);
    const int n0 = n * BN;
    if (tile_needs_mask(m0, rows_q, n0, BN, seq, wl, wr)) {
#pragma unroll
      for (int hh = 0; hh < 2; ++hh) {
        const KeyBounds r = key_bounds(m0 + wrow + g + 8 * hh, seq, wl, wr);
#pragma unroll
        for (int nt = 0; nt < NS; ++nt)
#pragma unroll
          for (int e = 0; e < 2; ++e)
            if (!r.has(n0 + nt * 8 + 2 * t4 + e)) s[0][nt][2 * hh + e] = -INFINITY;
      }
    }
    // s becomes dS (prob_and_grad writes it into the dP slot, which is then copied over).
    const float mul = fold ? smap.log2sc : 1.f;
    auto elementwise = [&](auto capped) {
#pragma unroll
      for (int nt = 0; nt < NS; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          prob_and_grad<decltype(capped)::value>(s[0][nt][e], mul, l2[e >> 1], dd[e >> 1], dp[0][nt][e], smap);
          s[0][nt][e] = dp[0][nt][e];
        }
    };
    if (smap.capped)
      elementwise(std::true_type{});
    else
      elementwise(std::false_type{});
    std::uint32_t dsa[1][NS / 2][4];
    acc_to_a<T>(dsa, s);
    gemm_rs<T, KVTile, Major::km, 1, NO, NS / 2>(dq, dsa, k_s + stage * KVTile::kBytes, 0, 0, lane);
    }
  }

  ptx::cp_async_wait_group<0>();  // no copy may still target shared memory at exit

  if constexpr (ExactD) {
    // The four lanes of a query column (same t4, g = 0..7) merge; lane g = 0 writes.
#pragma unroll
    for (int nt = 0; nt < 2; ++nt)
#pragma unroll
      for (int e = 0; e < 2; ++e)
#pragma unroll
        for (int mask = 4; mask < 32; mask <<= 1) dsum_x[nt][e].merge(dsum_x[nt][e].shuffled_xor(mask));
    // A row is concentrated when its top stored P reaches its threshold. A warp's 16
    // rows take the exact D together if one of them is (their groups are marked for
    // the fix pass, so every changed D gets its dQ correction); otherwise D and
    // ddelta stay as the D pass wrote them.
    bool concentrated = false;
#pragma unroll
    for (int nt = 0; nt < 2; ++nt)
#pragma unroll
      for (int e = 0; e < 2; ++e)
        concentrated = concentrated || stored_probability<T>(dsum_x[nt][e].top) >= thr[nt][e];
    if (!__any_sync(0xffffffffu, g == 0 && concentrated)) return;
    if (g == 0) {
#pragma unroll
      for (int nt = 0; nt < 2; ++nt)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int r = wrow + nt * 8 + 2 * t4 + e;
          if (r >= rows_q) continue;
          const std::int64_t row = seq.q_global0 + m0 + r;
          const std::int64_t at = std::int64_t(h) * a.dsum_head_stride + row;
          const float used = a.dsum[at];
          const float exact = dsum_x[nt][e].value(used);
          a.dsum[at] = exact;
          a.ddelta[at] = exact - used;
          a.hot_q[std::int64_t(h) * a.hot_q_head_stride + row / kHotGroupRows] = 1;
        }
    }
    return;
  }

  T* dq_ptr = static_cast<T*>(p.dq) + b * p.dq_batch_stride + (seq.q0 + m0) * p.dq_row_stride +
              std::int64_t(h) * p.dq_head_stride;
#pragma unroll
  for (int hh = 0; hh < 2; ++hh) {
    const int r = wrow + g + 8 * hh;
    if (r >= rows_q) continue;
#pragma unroll
    for (int nt = 0; nt < NO; ++nt) {
      const int col = nt * 8 + 2 * t4;
      if (col < p.head_dim)
        *reinterpret_cast<std::uint32_t*>(dq_ptr + std::int64_t(r) * p.dq_row_stride + col) =
            Element<T>::pack(dq[0][nt][2 * hh] * p.scale, dq[0][nt][2 * hh + 1] * p.scale);
    }
  }
}

// Deterministic dQ: one block per (query block, query head, batch entry). ExactD: the
// exact-D pass walks the same blocks from at most one wave (walk_blocks,
// bwd_exact_d.cuh).
template <typename T, int D, bool ExactD = false>
__global__ void __launch_bounds__(dq_tiles(D).warps * 32)
    bwd_dq_kernel(const __grid_constant__ AttnParams p, const __grid_constant__ BwdArgs a) {
  if constexpr (ExactD) {
    if (*a.any_flag == 0) return;  // set by the main kernel
    constexpr int BM = dq_tiles(D).block_m;
    walk_blocks((p.seqlen_q + BM - 1) / BM, p.heads_q, p.batch,
                [&](int x, int y, int z) { bwd_dq_block<T, D, true>(p, a, x, y, z); });
  } else {
    bwd_dq_block<T, D, false>(p, a, blockIdx.x, blockIdx.y, blockIdx.z);
  }
}

}  // namespace flashpp::cuda::sm80
