#pragma once
// FA2-class backward kernel: one block per (key block, kv head, batch). K and V stay
// in shared memory and dK/dV in registers while the block walks over every query
// block of every query head of its GQA group, so dK/dV need no atomics and GQA is a
// plain loop. Per step (Q, dO, LSE, D double-buffered through cp.async):
//   A: S^T = K Q^T, dP^T = V dO^T -> P^T = exp2(S^T - LSE), dS^T = P^T (dP^T - D)
//      (warps tile keys x queries; P^T and dS^T go to shared memory as T, since
//      phases B and C tile them differently)
//   B: dV += P^T dO, dK += dS^T Q   (warps tile keys x dims)
//   C: dQ_partial = dS K -> fp32 atomics into the workspace (warps tile queries x dims),
//      skipped in deterministic mode, where bwd_dq_kernel computes dQ instead.
// Phase A also flags query groups that may hold concentrated softmax rows
// (bwd_exact_d.cuh); the Fix instantiation is that file's last pass, over the key
// blocks the exact-D pass marked.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "common/params.hpp"
#include "cuda/common/element.cuh"
#include "cuda/common/scores.cuh"
#include "cuda/common/query_blocks.cuh"
#include "cuda/common/sequence.cuh"
#include "cuda/common/smem_tile.cuh"
#include "cuda/common/tile_copy.cuh"
#include "cuda/common/warp_gemm.cuh"
#include "cuda/ptx/cp_async.cuh"
#include "cuda/ptx/red.cuh"
#include "cuda/sm80/bwd_args.hpp"
#include "cuda/sm80/bwd_exact_d.cuh"
#include "cuda/sm80/tile_configs.hpp"

namespace flashpp::cuda::sm80 {

template <int D, int V = 0>
struct BwdSmem {
  static constexpr BwdTiles kT = bwd_tiles(D, V);
  using KTile = SmemTile<kT.block_n, D>;            // K, V: [key][dim]
  using QTile = SmemTile<kT.block_m, D>;            // Q, dO: [query][dim]
  using PTile = SmemTile<kT.block_n, kT.block_m>;   // P^T, dS^T: [key][query]
  alignas(128) unsigned char k[KTile::kBytes];
  alignas(128) unsigned char v[KTile::kBytes];
  alignas(128) unsigned char q[2][QTile::kBytes];
  alignas(128) unsigned char dout[2][QTile::kBytes];
  alignas(128) unsigned char pt[PTile::kBytes];
  alignas(128) unsigned char dst[PTile::kBytes];
  alignas(16) float lse[2][kT.block_m];
  alignas(16) float dsum[2][kT.block_m];
};

// One key block (n_block, kv head hk, batch entry b). V: the tile variant
// (tile_configs.hpp). Fix: the fix pass of bwd_exact_d.cuh (dK of a marked key block
// redone with the exact D, overwritten; -P * ddelta K into the dQ accumulator on
// steps with marked rows; dV left as written).
template <typename T, int D, int V, bool Fix>
__device__ __forceinline__ void bwd_block(const AttnParams& p, const BwdArgs& a, int n_block, int hk, int b) {
  constexpr BwdTiles kT = bwd_tiles(D, V);
  constexpr int BM = kT.block_m, BN = kT.block_n, W = kT.warps, THREADS = W * 32;
  // Per-warp shares (rows x columns) of the three phases, in 16x8 mma blocks.
  constexpr int KA = kT.sdp_keys(), QA = kT.sdp_queries();
  constexpr int KB = kT.dkv_keys(), DB = kT.dkv_dims();
  constexpr int QC = kT.dq_queries(), DC = kT.dq_dims();
  constexpr int MA = KA / 16, NA = QA / 8, MB = KB / 16, NB = DB / 8, MC = QC / 16, NC = DC / 8;
  using Smem = BwdSmem<D, V>;
  constexpr BwdStepped kStep = bwd_stepped(D);
  using KTile = typename Smem::KTile;
  using QTile = typename Smem::QTile;
  using PTile = typename Smem::PTile;
  static_assert(sizeof(Smem) == bwd_smem_bytes(kT), "shared-memory struct must match the tile table");

  extern __shared__ __align__(128) unsigned char smem_raw[];
  Smem& sm = *reinterpret_cast<Smem*>(smem_raw);

  const SeqRows seq = sequence_rows(p, b);
  const int n0 = n_block * BN;
  if (n0 >= seq.len_k) return;
  const int rows_k = min(BN, seq.len_k - n0);
  // Global key row of n0 (the row dimension of a varlen k, b * seqlen_k + n0 otherwise).
  const std::int64_t k_row0 = (p.cu_seqlens_k != nullptr ? seq.k0 : std::int64_t(b) * p.seqlen_k) + n0;
  if constexpr (Fix) {
    if (!any_group_marked(a.hot_k + std::int64_t(hk) * a.hot_k_head_stride, k_row0, rows_k)) return;
  }
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, t4 = lane & 3;
  const int wl = p.window_left, wr = p.window_right;

  // Query blocks with a row that sees a key of [n0, n0 + rows_k): hi(i) > n0 and lo(i) <= last key.
  const QueryBlocks qb_range = query_blocks_seeing(seq, n0, rows_k, BM, wl, wr);
  const int m_lo = qb_range.first, n_m = qb_range.count;
  const int steps = n_m * p.gqa_ratio;
  // Fix: whether the step of head h at query row m0 has marked rows (its ddelta may be nonzero).
  auto step_marked = [&](int h, int m0) {
    return any_group_marked(a.hot_q + std::int64_t(h) * a.hot_q_head_stride, seq.q_global0 + m0,
                            min(BM, seq.len_q - m0));
  };

  const std::uint32_t k_s = ptx::smem_u32(sm.k), v_s = ptx::smem_u32(sm.v);
  const std::uint32_t q_s = ptx::smem_u32(sm.q[0]), do_s = ptx::smem_u32(sm.dout[0]);
  const std::uint32_t pt_s = ptx::smem_u32(sm.pt), dst_s = ptx::smem_u32(sm.dst);

  copy_tile_async<KTile, THREADS>(k_s,
                                  static_cast<const T*>(p.k) + b * p.k_batch_stride + (seq.k0 + n0) * p.k_row_stride +
                                      std::int64_t(hk) * p.k_head_stride,
                                  p.k_row_stride, rows_k, p.head_dim, tid);
  copy_tile_async<KTile, THREADS>(v_s,
                                  static_cast<const T*>(p.v) + b * p.v_batch_stride + (seq.k0 + n0) * p.v_row_stride +
                                      std::int64_t(hk) * p.v_head_stride,
                                  p.v_row_stride, rows_k, p.head_dim_v, tid);

  // Steps walk the query blocks m_lo .. m_lo + n_m - 1 of each query head of the
  // group in turn (StepWalk). Pointers advanced across steps instead of the strided
  // products below measured no fewer instructions: they took eight more registers
  // and spilled.
  auto load_step = [&](int h, int m0, int stage) {
    const int rows = min(BM, seq.len_q - m0);
    copy_tile_async<QTile, THREADS, true>(q_s + stage * QTile::kBytes,
                                          static_cast<const T*>(p.q) + b * p.q_batch_stride +
                                              (seq.q0 + m0) * p.q_row_stride + std::int64_t(h) * p.q_head_stride,
                                          p.q_row_stride, rows, p.head_dim, tid);
    copy_tile_async<QTile, THREADS, true>(do_s + stage * QTile::kBytes,
                                          static_cast<const T*>(p.dout) + b * p.do_batch_stride +
                                              (seq.q0 + m0) * p.do_row_stride + std::int64_t(h) * p.do_head_stride,
                                          p.do_row_stride, rows, p.head_dim_v, tid);
    copy_floats_async<BM>(ptx::smem_u32(sm.lse[stage]),
                          p.lse + b * p.lse_batch_stride + std::int64_t(h) * p.lse_head_stride + seq.q0 + m0, rows,
                          tid);
    copy_floats_async<BM>(ptx::smem_u32(sm.dsum[stage]),
                          a.dsum + std::int64_t(h) * a.dsum_head_stride + seq.q_global0 + m0, rows, tid - BM);
  };
  if (steps > 0) load_step(hk * p.gqa_ratio, m_lo * BM, 0);
  ptx::cp_async_commit_group();

  const ScoreMap smap = ScoreMap::from(p);
  float dv_acc[MB][NB][4], dk_acc[MB][NB][4];
  zero(dv_acc);
  zero(dk_acc);

  const int ka = warp % kT.sdp_warps_n, qa = warp / kT.sdp_warps_n;
  const int kb = warp % kT.dkv_warps_n, db = warp / kT.dkv_warps_n;
  const int qc = warp % kT.dq_warps_m, dc = warp / kT.dq_warps_m;

  // Full steps take the reduction's short address path when their first global
  // row is a multiple of 8 (every step then, as m0 is).
  const bool dq_rows_aligned = (seq.q_global0 & 7) == 0;

  StepWalk walk{hk * p.gqa_ratio, m_lo, m_lo, m_lo + n_m};  // step i's query head and query block
  for (int i = 0; i < steps; ++i) {
    const int stage = i & 1;
    const int h = walk.h, m0 = walk.m_blk * BM;
    const int rows = min(BM, seq.len_q - m0);
    const StepWalk next = walk.next();
    ptx::cp_async_wait_group<0>();
    // Step i has landed; every warp is done with step i-1 (its stage and P^T/dS^T).
    __syncthreads();
    // The next step's copies go into the stage step i-1 used: here, or after phase A
    // (bwd_late_prefetch).
    constexpr bool kLate = bwd_late_prefetch(D);
    if (!kLate && i + 1 < steps) load_step(next.h, next.m_blk * BM, stage ^ 1);
    if constexpr (!kLate) ptx::cp_async_commit_group();

    const std::uint32_t qst = q_s + stage * QTile::kBytes, dost = do_s + stage * QTile::kBytes;

    // ---- A: S^T and dP^T for keys ka*KA.., queries qa*QA.. ----
    {
      float st[MA][NA][4], dpt[MA][NA][4];
      zero(st);
      zero(dpt);
      gemm_ss<T, KTile, Major::mk, QTile, Major::mk, MA, NA, D / 16, kStep.a, kStep.a>(st, k_s, ka * KA, 0, qst,
                                                                                        qa * QA, 0, lane);
      gemm_ss<T, KTile, Major::mk, QTile, Major::mk, MA, NA, D / 16, kStep.a, kStep.a>(dpt, v_s, ka * KA, 0, dost,
                                                                                        qa * QA, 0, lane);
      const bool fold = smap.folds();
      if (!fold) smap.apply(st);
      if (tile_needs_mask(m0, rows, n0, BN, seq, wl, wr)) {
#pragma unroll
        for (int nt = 0; nt < NA; ++nt)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const KeyBounds r = key_bounds(m0 + qa * QA + nt * 8 + 2 * t4 + e, seq, wl, wr);
#pragma unroll
            for (int mt = 0; mt < MA; ++mt)
#pragma unroll
              for (int hh = 0; hh < 2; ++hh)
                if (!r.has(n0 + ka * KA + mt * 16 + g + 8 * hh)) st[mt][nt][2 * hh + e] = -INFINITY;
          }
      }
      const float mul = fold ? smap.log2sc : 1.f;
      // Fix: the dQ correction -P * ddelta (times the softcap's derivative), kept in
      // the P^T tile, which this pass does not need for dV.
      float dsd[Fix ? MA : 1][Fix ? NA : 1][4];
      auto elementwise = [&](auto capped) {
#pragma unroll
        for (int nt = 0; nt < NA; ++nt)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int ql = qa * QA + nt * 8 + 2 * t4 + e;
            const float l2 = lse_to_log2(sm.lse[stage][ql], ql < rows);
            const float dd = sm.dsum[stage][ql];
            [[maybe_unused]] float delta = 0.f;
            if constexpr (Fix)
              if (ql < rows) delta = a.ddelta[std::int64_t(h) * a.dsum_head_stride + seq.q_global0 + m0 + ql];
#pragma unroll
            for (int mt = 0; mt < MA; ++mt)
#pragma unroll
              for (int hh = 0; hh < 2; ++hh) {
                if constexpr (Fix) {
                  float zero_dp = 0.f;
                  prob_and_grad<decltype(capped)::value>(st[mt][nt][2 * hh + e], mul, l2, delta, zero_dp, smap);
                  dsd[mt][nt][2 * hh + e] = zero_dp;
                }
                st[mt][nt][2 * hh + e] = prob_and_grad<decltype(capped)::value>(st[mt][nt][2 * hh + e], mul, l2, dd,
                                                                                 dpt[mt][nt][2 * hh + e], smap);
              }
          }
      };
      if (smap.capped)
        elementwise(std::true_type{});
      else
        elementwise(std::false_type{});
      // P^T (Fix: the correction) and dS^T to shared memory as T; the P pairs stay
      // for the concentration check.
      [[maybe_unused]] std::uint32_t pp[MA][NA][2];
#pragma unroll
      for (int mt = 0; mt < MA; ++mt)
#pragma unroll
        for (int nt = 0; nt < NA; ++nt)
#pragma unroll
          for (int hh = 0; hh < 2; ++hh) {
            const int r = ka * KA + mt * 16 + g + 8 * hh;
            const int c = qa * QA + nt * 8 + 2 * t4;
            const std::uint32_t off = PTile::offset(r, c >> 3) + (c & 7) * 2;
            if constexpr (Fix)
              *reinterpret_cast<std::uint32_t*>(sm.pt + off) =
                  Element<T>::pack(dsd[mt][nt][2 * hh], dsd[mt][nt][2 * hh + 1]);
            else
              *reinterpret_cast<std::uint32_t*>(sm.pt + off) = pp[mt][nt][hh] =
                  Element<T>::pack(st[mt][nt][2 * hh], st[mt][nt][2 * hh + 1]);
            *reinterpret_cast<std::uint32_t*>(sm.dst + off) =
                Element<T>::pack(dpt[mt][nt][2 * hh], dpt[mt][nt][2 * hh + 1]);
          }
      if constexpr (!Fix) {
        // Concentrated rows (bwd_exact_d.cuh): one packed max per pair of stored
        // probabilities and one vote per warp and step. A warp that holds a P of at
        // least the lowest threshold of its rows flags the row groups of its query
        // share, nothing per row: the exact-D pass applies each row's own threshold.
        // (Per-row marking here held its state in registers across the loop and cost
        // 2.5-3% of the d 128 backward where it never fired.)
        std::uint32_t top = 0;
#pragma unroll
        for (int mt = 0; mt < MA; ++mt)
#pragma unroll
          for (int nt = 0; nt < NA; ++nt)
#pragma unroll
            for (int hh = 0; hh < 2; ++hh) top = max_pair<T>(top, pp[mt][nt][hh]);
        float top_lo, top_hi;
        unpack2<T>(top, top_lo, top_hi);
        if (__any_sync(0xffffffffu, fmaxf(top_lo, top_hi) >= kLongRowConcentrated)) {
          const int share_rows = min(QA, rows - qa * QA);
          bool flag = share_rows > 0;
          if (flag && tile_needs_mask(m0, rows, n0, BN, seq, wl, wr)) {
            // Visible ranges are monotone in the row, so no row of the share sees
            // more keys than [first row's lo, last row's hi). When that is at most
            // kShortRowKeys, every row's threshold is one_hot_probability or none, and
            // a first row with a single key (a causal sequence's first row: P = 1,
            // never concentrated) is left out. Without this every head's first query
            // block ran the exact-D pass (1-2% of a causal backward at 512-1K). Kept
            // inside the vote, mask test included: computed for every step, it cost
            // registers across the loop.
            const KeyBounds first = key_bounds(m0 + qa * QA, seq, wl, wr);
            const KeyBounds last = key_bounds(m0 + qa * QA + share_rows - 1, seq, wl, wr);
            if (last.hi - first.lo <= kShortRowKeys) {
              // The first row is column e = 0 of n tile 0 on t4 = 0: the low halves.
              const std::uint32_t first_keep = first.hi - first.lo == 1 && t4 == 0 ? 0xffff0000u : 0xffffffffu;
              std::uint32_t short_top = 0;
#pragma unroll
              for (int mt = 0; mt < MA; ++mt)
#pragma unroll
                for (int nt = 0; nt < NA; ++nt)
#pragma unroll
                  for (int hh = 0; hh < 2; ++hh) {
                    // Read back from the P^T tile (this thread's own stores): keeping
                    // pp live past the vote cost registers across the loop.
                    const int r = ka * KA + mt * 16 + g + 8 * hh, c = qa * QA + nt * 8 + 2 * t4;
                    const std::uint32_t pr =
                        *reinterpret_cast<const std::uint32_t*>(sm.pt + PTile::offset(r, c >> 3) + (c & 7) * 2);
                    short_top = max_pair<T>(short_top, nt == 0 ? pr & first_keep : pr);
                  }
              unpack2<T>(short_top, top_lo, top_hi);
              flag = __any_sync(0xffffffffu, fmaxf(top_lo, top_hi) >= one_hot_probability<T>());
            }
          }
          if (flag) flag_query_groups(a, h, seq.q_global0 + m0 + qa * QA, share_rows, lane);
        }
      }
    }
    __syncthreads();
    if constexpr (kLate) {
      if (i + 1 < steps) load_step(next.h, next.m_blk * BM, stage ^ 1);
      ptx::cp_async_commit_group();
    }

    // ---- B: dV += P^T dO, dK += dS^T Q for keys kb*KB.., dims db*DB.. ----
    // Stepped ldmatrix addresses where the tile table chooses them (bwd_stepped); the
    // [k][m] operands of phases B and C start at warp offsets (db DB, qc QC, dc DC),
    // which must keep the steps inside a swizzle group.
    constexpr bool kStepB = kStep.bc && QTile::steps_stay_in_group(DB / 8, NB / 2);
    if constexpr (!Fix)
      gemm_ss<T, PTile, Major::mk, QTile, Major::km, MB, NB, BM / 16, kStep.b_mk, kStepB>(dv_acc, pt_s, kb * KB, 0, dost,
                                                                                   db * DB, 0, lane);
    gemm_ss<T, PTile, Major::mk, QTile, Major::km, MB, NB, BM / 16, kStep.b_mk, kStepB>(dk_acc, dst_s, kb * KB, 0, qst,
                                                                                 db * DB, 0, lane);

    // ---- C: dQ += dS K for queries qc*QC.., dims dc*DC.. (Fix: the correction, where marked) ----
    if (!p.deterministic && (!Fix || step_marked(h, m0))) {
      // In kParts column parts (bwd_dq_parts): a part's reductions are in flight while
      // the next part's product runs, instead of one burst after the whole product.
      constexpr int kParts = bwd_dq_parts(D), NCP = NC / kParts;
      constexpr bool kStepA = kStep.bc && PTile::steps_stay_in_group(QC / 8, MC);
      constexpr bool kStepK = kStep.bc && KTile::steps_stay_in_group(DC / 8, NCP / 2);
#pragma unroll
      for (int part = 0; part < kParts; ++part) {
        float dq[MC][NCP][4];
        zero(dq);
        gemm_ss<T, PTile, Major::km, KTile, Major::km, MC, NCP, BN / 16, kStepA, kStepK>(
            dq, Fix ? pt_s : dst_s, qc * QC, 0, k_s, dc * DC + part * NCP * 8, 0, lane);
        // Unconditional reductions: a bounds check around each one compiles to a
        // branch with its own reconvergence point (32 per step at head dim 256). Full
        // steps need no check; on a partial one, rows past its end and columns past
        // the head dim add zeros (to its first row; the workspace is D columns wide).
        // The accumulator is in 8 x 8 blocks (bwd_args.hpp): a warp's reduction of one
        // fragment half is 256 contiguous bytes.
        auto reduce = [&](auto checked) {
#pragma unroll
          for (int mt = 0; mt < MC; ++mt)
#pragma unroll
            for (int hh = 0; hh < 2; ++hh) {
              const int r = qc * QC + mt * 16 + g + 8 * hh;
              const bool row_ok = !decltype(checked)::value || r < rows;
              const std::int64_t grow = seq.q_global0 + m0 + (row_ok ? r : 0);
              // Columns advance by 8 per n tile: one block further (dq_accum_offset).
              float* acc0 = a.dq_accum + dq_accum_index(grow, std::int64_t(h) * D + dc * DC + part * NCP * 8 + 2 * t4,
                                                        a.dq_accum_row_stride);
#pragma unroll
              for (int nt = 0; nt < NCP; ++nt) {
                const int col = dc * DC + (part * NCP + nt) * 8 + 2 * t4;
                const bool ok = row_ok && (!decltype(checked)::value || col < p.head_dim);
                ptx::red_add_v2_f32(acc0 + dq_accum_offset(0, nt, a.dq_accum_row_stride), ok ? dq[mt][nt][2 * hh] : 0.f, ok ? dq[mt][nt][2 * hh + 1] : 0.f);
              }
            }
        };
        if (rows == BM && p.head_dim == D && dq_rows_aligned) {
          // A full step whose rows start on an 8-row band: with row = row0 + r,
          // row0 % 8 == 0 and r = qc QC + 16 mt + 8 hh + g, dq_accum_index splits into
          // (row0 + qc QC) W + h D 8 + (dc DC + g) 8 + 2 t4 for the step and thread and
          // whole bands and blocks for the fragment half (dq_accum_offset): no
          // per-reduction index arithmetic.
          float* acc = a.dq_accum + (seq.q_global0 + m0 + qc * QC) * a.dq_accum_row_stride +
                       (std::int64_t(h) * D * 8 + (dc * DC + g) * 8 + 2 * t4);
#pragma unroll
          for (int mt = 0; mt < MC; ++mt)
#pragma unroll
            for (int hh = 0; hh < 2; ++hh)
#pragma unroll
              for (int nt = 0; nt < NCP; ++nt)
                ptx::red_add_v2_f32(acc + dq_accum_offset(2 * mt + hh, part * NCP + nt, a.dq_accum_row_stride),
                                    dq[mt][nt][2 * hh], dq[mt][nt][2 * hh + 1]);
        } else if (rows == BM && p.head_dim == D) {
          reduce(std::false_type{});
        } else {
          reduce(std::true_type{});
        }
      }
    }
    walk = next;
  }

  ptx::cp_async_wait_group<0>();  // no copy may still target shared memory at exit

  // ---- epilogue: every row and column of this block's dK/dV slice is written ----
  T* dk_ptr = static_cast<T*>(p.dk) + b * p.dk_batch_stride + (seq.k0 + n0) * p.dk_row_stride +
              std::int64_t(hk) * p.dk_head_stride;
  T* dv_ptr = static_cast<T*>(p.dv) + b * p.dv_batch_stride + (seq.k0 + n0) * p.dv_row_stride +
              std::int64_t(hk) * p.dv_head_stride;
#pragma unroll
  for (int mt = 0; mt < MB; ++mt)
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      const int r = kb * KB + mt * 16 + g + 8 * hh;
      if (r >= rows_k) continue;
#pragma unroll
      for (int nt = 0; nt < NB; ++nt) {
        const int col = db * DB + nt * 8 + 2 * t4;
        if (col < p.head_dim)
          *reinterpret_cast<std::uint32_t*>(dk_ptr + std::int64_t(r) * p.dk_row_stride + col) =
              Element<T>::pack(dk_acc[mt][nt][2 * hh] * p.scale, dk_acc[mt][nt][2 * hh + 1] * p.scale);
        if (!Fix && col < p.head_dim_v)
          *reinterpret_cast<std::uint32_t*>(dv_ptr + std::int64_t(r) * p.dv_row_stride + col) =
              Element<T>::pack(dv_acc[mt][nt][2 * hh], dv_acc[mt][nt][2 * hh + 1]);
      }
    }
}

// The main kernel: one block per (key block, kv head, batch entry). Fix: the fix pass
// walks the same blocks from at most one wave (walk_blocks, bwd_exact_d.cuh).
template <typename T, int D, int V = 0, bool Fix = false>
__global__ void __launch_bounds__(bwd_tiles(D, V).warps * 32)
    bwd_kernel(const __grid_constant__ AttnParams p, const __grid_constant__ BwdArgs a) {
  if constexpr (Fix) {
    if (*a.any_hot == 0) return;  // set by the exact-D pass
    constexpr int BN = bwd_tiles(D, V).block_n;
    walk_blocks((p.seqlen_k + BN - 1) / BN, p.heads_kv, p.batch,
                [&](int x, int y, int z) { bwd_block<T, D, V, true>(p, a, x, y, z); });
  } else {
    bwd_block<T, D, V, false>(p, a, blockIdx.x, blockIdx.y, blockIdx.z);
  }
}

}  // namespace flashpp::cuda::sm80
