#pragma once
// Hopper (sm90a) backward main kernel, head dims 64 and 128: dK, dV and the dQ accumulator
// with TMA loads and wgmma. One block per (key block of 128 keys, kv head, batch
// entry), as the FA2-class backward (sm80/bwd_kernel.cuh), whose preprocessing
// (D, the short rows' D), dQ conversion and exact-D passes run around it unchanged.
// Three warpgroups:
//   producer  (warpgroup 0, warp 0): K and V by TMA once; per 64-query step Q and dO
//             by TMA into a three-stage ring, and the step's LSE (log2 domain) and D
//             by its 32 lanes into shared memory;
//   consumers (warpgroups 1, 2): keys 64c .. 64c + 63 each. Per step:
//             S^T = K_c Q^T and dP^T = V_c dO^T (wgmma SS, operands as loaded),
//             P^T = exp2(S^T scale log2(e) - LSE) and dS^T = P^T (dP^T - D) in
//             registers, dV_c += P^T dO and dK_c += dS^T Q (wgmma RS: P^T and dS^T
//             as A from registers, dO and Q as B read along their rows), dS^T to
//             the step's shared 128-key panel; once both consumers' rows are in,
//             dQ[:, c D/2 ..] += dS K[:, c D/2 ..] (wgmma SS, both operands read
//             along their rows, all 128 keys), reduced into the blocked fp32
//             accumulator.
// At d 64 a step's dQ products are issued at the next step, behind its S^T and dP^T,
// and reduced at that step's end, so they run under the elementwise work; the
// consumers meet once per step, at the dS^T panel's mbarrier, a step after writing
// it. At d 128 (registers) a step issues and reduces its own dQ.
// Concentrated rows are flagged as the FA2-class main kernel flags them
// (sm80/bwd_exact_d.cuh), for the exact-D and fix passes.
//
// Scope: head dims 64 and 128 (head_dim == head_dim_v), no softcap, a positive
// scale, fixed-length batches, not the deterministic mode (the registry's
// select_hopper_backward says which calls it takes).
#include <cuda.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "common/params.hpp"
#include "cuda/common/element.cuh"
#include "cuda/common/scores.cuh"
#include "cuda/common/query_blocks.cuh"
#include "cuda/common/sequence.cuh"
#include "cuda/ptx/math.cuh"
#include "cuda/ptx/mbarrier.cuh"
#include "cuda/ptx/red.cuh"
#include "cuda/ptx/stmatrix.cuh"
#include "cuda/ptx/tma.cuh"
#include "cuda/ptx/warpgroup.cuh"
#include "cuda/ptx/wgmma.cuh"
#include "cuda/sm80/bwd_args.hpp"
#include "cuda/sm80/bwd_exact_d.cuh"
#include "cuda/sm90/bwd_tiles.hpp"
#include "cuda/sm90/tensor_maps.hpp"

namespace flashpp::cuda::sm90 {

// Byte offsets of the block's shared memory from its 1024-aligned base: a tile of
// head dim D is D / 64 panels of 64 columns, each of 128-byte rows (TMA's 128-byte
// swizzle), panel p of a tile of r rows at p * r * 128.
template <int D>
struct BwdLayout {
  static constexpr std::uint32_t kv_bytes = kBwdBlockN * 2 * D;  // K or V: 128 rows
  static constexpr std::uint32_t q_bytes = kBwdBlockM * 2 * D;   // Q or dO of one stage: 64 rows
  static constexpr std::uint32_t ds_bytes = 64 * 128;          // one dS^T tile: 64 keys x 64 queries
  static constexpr std::uint32_t k = 0;
  static constexpr std::uint32_t v = k + kv_bytes;
  static constexpr std::uint32_t q = v + kv_bytes;                   // stage s at q + s * q_bytes
  static constexpr std::uint32_t dout = q + kBwdStages * q_bytes;    // stage s at dout + s * q_bytes
  // kBwdPanels dS^T panels of the block's 128 keys, step i in panel i % kBwdPanels
  // (consumer c writes rows 64c .. 64c + 63). A step's dQ products run until the
  // next step's end, so a panel is rewritten three steps later (see the loop).
  static constexpr std::uint32_t ds = dout + kBwdStages * q_bytes;   // panel t, consumer c: ds + (2t + c) ds_bytes
  static constexpr std::uint32_t lse = ds + 2 * kBwdPanels * ds_bytes;  // stage s: 64 floats
  static constexpr std::uint32_t dsum = lse + kBwdStages * kBwdBlockM * 4;
  static constexpr std::uint32_t bars = dsum + kBwdStages * kBwdBlockM * 4;
  static constexpr std::uint32_t kv_full = bars;
  __device__ static constexpr std::uint32_t q_full(int s) { return bars + 8 + 8 * s; }
  __device__ static constexpr std::uint32_t q_empty(int s) { return bars + 8 + 8 * (kBwdStages + s); }
  // Panel t holds both consumers' dS^T rows (256 arrivals, one per consumer thread).
  __device__ static constexpr std::uint32_t panel_full(int t) { return bars + 8 + 16 * kBwdStages + 8 * t; }
  static constexpr std::uint32_t end = bars + 8 + 16 * kBwdStages + 8 * kBwdPanels;
  static_assert(ds % 1024 == 0 && q % 1024 == 0 && dout % 1024 == 0, "wgmma tiles start on the swizzle atom");
  static_assert(1024 + end <= bwd90_smem_bytes(D), "the launch's shared memory must hold the layout");
};

// Arrivals that complete a step's load: the TMA's expect_tx arrive and one per
// lane of the producer warp after its LSE and D stores.
inline constexpr std::uint32_t kBwdQFullArrivals = 1 + 32;

template <typename T, int D>
__global__ void __launch_bounds__(kBwdThreads, 1)
    bwd_kernel(const __grid_constant__ AttnParams p, const __grid_constant__ BwdMaps maps,
               const __grid_constant__ sm80::BwdArgs a) {
#if FLASHPP_SM90_ENABLED
  static_assert(D == 64 || D == 128, "the Hopper backward is built for head dims 64 and 128");
  constexpr int BM = kBwdBlockM, BN = kBwdBlockN, ST = kBwdStages;
  constexpr int kPanels = D / 64;  // 64-column panels of a tile
  using L = BwdLayout<D>;
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const std::uint32_t base = (ptx::smem_u32(smem_raw) + 1023u) & ~1023u;
  unsigned char* smem = smem_raw + (base - ptx::smem_u32(smem_raw));
  const int wg = __shfl_sync(0xffffffffu, int(threadIdx.x) / 128, 0);

  const int n_block = int(blockIdx.x), hk = int(blockIdx.y), b = int(blockIdx.z);
  const SeqRows seq = sequence_rows(p, b);
  const int n0 = n_block * BN;
  if (n0 >= seq.len_k) return;  // the whole block
  const int rows_k = min(BN, seq.len_k - n0);
  const int wl = p.window_left, wr = p.window_right;

  // Query blocks whose rows see a key of [n0, n0 + rows_k).
  const QueryBlocks qb_range = query_blocks_seeing(seq, n0, rows_k, BM, wl, wr);
  const int m_lo = qb_range.first, n_m = qb_range.count;
  const int steps = n_m * p.gqa_ratio;

  if (threadIdx.x == 0) {
    ptx::mbarrier_init(base + L::kv_full, 1);
    for (int s = 0; s < ST; ++s) {
      ptx::mbarrier_init(base + L::q_full(s), kBwdQFullArrivals);
      ptx::mbarrier_init(base + L::q_empty(s), 8);  // one arrive per consumer warp
    }
    for (int t = 0; t < kBwdPanels; ++t) ptx::mbarrier_init(base + L::panel_full(t), 256);
    ptx::mbarrier_init_fence();
  }
  __syncthreads();

  if (wg == 0) {
    // ---------------- producer ----------------
    ptx::setmaxnreg_dec<kProducerRegisters>();
    if (threadIdx.x < 32 && steps > 0) {
      const int lane = int(threadIdx.x);
      const int kb = b, qb = b;  // fixed-length batches (varlen takes the FA2-class kernel)
      const int krow = int(seq.k0) + n0;
      if (lane == 0) {
        ptx::tma_prefetch_map(&maps.q);
        ptx::tma_prefetch_map(&maps.dout);
        ptx::mbarrier_arrive_expect_tx(base + L::kv_full, 2 * L::kv_bytes);
#pragma unroll
        for (int pn = 0; pn < kPanels; ++pn) {
          ptx::tma_load_4d(base + L::k + pn * BN * 128, &maps.k, base + L::kv_full, 64 * pn, krow, hk, kb);
          ptx::tma_load_4d(base + L::v + pn * BN * 128, &maps.v, base + L::kv_full, 64 * pn, krow, hk, kb);
        }
      }
      StepWalk walk{hk * p.gqa_ratio, m_lo, m_lo, m_lo + n_m};
      for (int i = 0; i < steps; ++i) {
        const int s = i % ST;
        const std::uint32_t parity = std::uint32_t(i / ST) & 1u;
        const int h = walk.h, m0 = walk.m_blk * BM;
        const int rows = min(BM, seq.len_q - m0);
        ptx::mbarrier_wait(base + L::q_empty(s), parity ^ 1u);
        if (lane == 0) {
          ptx::mbarrier_arrive_expect_tx(base + L::q_full(s), 2 * L::q_bytes);
#pragma unroll
          for (int pn = 0; pn < kPanels; ++pn) {
            const std::uint32_t off = s * L::q_bytes + pn * BM * 128;
            ptx::tma_load_4d(base + L::q + off, &maps.q, base + L::q_full(s), 64 * pn, int(seq.q0) + m0, h, qb);
            ptx::tma_load_4d(base + L::dout + off, &maps.dout, base + L::q_full(s), 64 * pn, int(seq.q0) + m0, h,
                             qb);
          }
        }
        // LSE (log2 domain; +inf past the sequence, so those probabilities are 0)
        // and D of the step's rows.
        const float* lse = p.lse + b * p.lse_batch_stride + std::int64_t(h) * p.lse_head_stride + seq.q0 + m0;
        const float* dsum = a.dsum + std::int64_t(h) * a.dsum_head_stride + seq.q_global0 + m0;
        float* lse_s = reinterpret_cast<float*>(smem + L::lse) + s * BM;
        float* dsum_s = reinterpret_cast<float*>(smem + L::dsum) + s * BM;
#pragma unroll
        for (int r = lane; r < BM; r += 32) {
          const bool ok = r < rows;
          lse_s[r] = lse_to_log2(ok ? lse[r] : 0.f, ok);
          dsum_s[r] = ok ? dsum[r] : 0.f;
        }
        ptx::mbarrier_arrive(base + L::q_full(s));  // release: the stores above
        walk.advance();
      }
    }
  } else {
    // ---------------- consumers ----------------
    ptx::setmaxnreg_inc<kBwdConsumerRegisters>();
    const int c = wg - 1;
    const int lane = int(threadIdx.x) & 31, warp = (int(threadIdx.x) >> 5) & 3;
    const int g = lane >> 2, t4 = lane & 3;
    const bool leader = lane == 0;
    const float mul = p.scale_log2;  // the score map folds (no softcap, positive scale)

    // Descriptors. Read along d (K-major): K_c and V_c as A, Q and dO as B of S^T and
    // dP^T, k-steps of 16 columns = 32 bytes within a 64-column panel (kmajor_step).
    // Read along their rows (MN-major): Q and dO as B of dK and dV (the panel stride as
    // the leading byte offset), K's column half as B of dQ, dS^T as A of dQ, k-steps of
    // 16 rows = 2048 bytes.
    const std::uint32_t kc = c * 64 * 128;
    const ptx::Sw128Desc k_km = ptx::Sw128Desc::make(base + L::k + kc, 16, 1024);
    const ptx::Sw128Desc v_km = ptx::Sw128Desc::make(base + L::v + kc, 16, 1024);
    const ptx::Sw128Desc q_km = ptx::Sw128Desc::make(base + L::q, 16, 1024);
    const ptx::Sw128Desc do_km = ptx::Sw128Desc::make(base + L::dout, 16, 1024);
    const ptx::Sw128Desc q_mn = ptx::Sw128Desc::make(base + L::q, BM * 128, 1024);
    const ptx::Sw128Desc do_mn = ptx::Sw128Desc::make(base + L::dout, BM * 128, 1024);
    // dQ is split by columns: consumer c takes dQ[:, c D / 2 ..] (D / 2 columns) over
    // all 128 keys, so each dQ element is reduced once per step and block. Its B, K's
    // columns from c D / 2 on, starts 64c bytes into K's swizzled rows at d 64 and at
    // K's panel c at d 128.
    constexpr int kDqCols = D / 2;
    const int dq_col0 = c * kDqCols;
    const std::uint32_t kq_off = D == 64 ? 64 * c : c * BN * 128;
    const ptx::Sw128Desc kq_mn = ptx::Sw128Desc::make(base + L::k + kq_off, BN * 128, 1024);
    const std::uint32_t ds_rows = base + L::ds + c * L::ds_bytes;  // this consumer's rows of panel 0
    const ptx::Sw128Desc ds_mn = ptx::Sw128Desc::make(base + L::ds, 64 * 128, 1024);

    // Written first by the first step's products (scale-d 0), zero without steps.
    float dv[D / 2], dk[D / 2];
    ptx::fresh_registers(dv);
    ptx::fresh_registers(dk);

    if (steps > 0) ptx::mbarrier_wait(base + L::kv_full, 0);
    // This thread's keys in the block: rows g and g + 8 of its warp's 16.
    const int key0 = n0 + c * 64 + warp * 16 + g;
    // The steps whose query rows see all of this consumer's keys (no element mask).
    const UnmaskedQueryRows unmasked = unmasked_query_rows(n0 + c * 64, 64, seq, wl, wr);
    // Byte offset of k-step kk (16 columns) of a K-major tile of `rows` rows.
    auto kmajor_step = [](int kk, int rows) { return std::uint32_t((kk / 4) * rows * 128 + (kk % 4) * 32); };
    // At d 64 a step's dQ is issued at the next step and reduced at its end (below); at
    // d 128 that would keep 224 accumulator registers live at once (dV, dK, S^T, dP^T and
    // dQ), so each step issues and reduces its own dQ.
    constexpr bool kDqLate = D == 64;
    // The previous step's dQ (consumer c's columns), its products issued by issue_dq
    // and its reductions by reduce_dq one step later (kDqLate).
    struct PrevStep {
      int panel;
      std::uint32_t panel_parity;
      int stage, h, m0, rows;
    } prev{0, 0, 0, 0, 0, 0};
    float dq[kDqCols / 2];
    auto issue_dq = [&](int panel) {
      const std::uint32_t off = panel * 2 * L::ds_bytes;
      ptx::fresh_registers(dq);
      ptx::wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < BN / 16; ++kk)
        ptx::Wgmma<T, kDqCols>::template ss<1, 1>(dq, ds_mn.at(off + kk * 2048), kq_mn.at(kk * 2048),
                                                  kk > 0 ? 1 : 0);
      ptx::wgmma_commit();
    };
    // dQ rows warp * 16 + g (+ 8), columns c D / 2 + 8j + 2t4 (+1), into the blocked
    // accumulator (sm80/bwd_args.hpp), rows past the step's end left out. The eight
    // (d 64) or sixteen reductions are one index apart by whole bands and blocks.
    auto reduce_dq = [&](int h, int m0, int rows) {
      const int r0 = warp * 16 + g;
      float* acc = a.dq_accum + sm80::dq_accum_index(seq.q_global0 + m0 + r0,
                                                     std::int64_t(h) * D + dq_col0 + 2 * t4, a.dq_accum_row_stride);
#pragma unroll
      for (int hh = 0; hh < 2; ++hh) {
        if (r0 + 8 * hh < rows) {
#pragma unroll
          for (int j = 0; j < kDqCols / 8; ++j)
            ptx::red_add_v2_f32(acc + sm80::dq_accum_offset(hh, j, a.dq_accum_row_stride), dq[4 * j + 2 * hh],
                                dq[4 * j + 2 * hh + 1]);
        }
      }
    };
    StepWalk walk{hk * p.gqa_ratio, m_lo, m_lo, m_lo + n_m};
    // One step; the first is peeled (no dQ of a previous step), so that every wgmma
    // wait of the loop retires the same groups on every path and ptxas can keep the
    // products asynchronous. Groups in flight at a later step's top: the previous
    // dV, dK.
    auto step = [&](int i, auto first) {
      constexpr bool kFirst = decltype(first)::value;
      const int s = i % ST;
      const std::uint32_t parity = std::uint32_t(i / ST) & 1u;
      const int h = walk.h, m0 = walk.m_blk * BM;
      const int rows = min(BM, seq.len_q - m0);
      const std::uint32_t qs = s * L::q_bytes;
      ptx::mbarrier_wait(base + L::q_full(s), parity);

      // S^T and dP^T (keys x queries).
      float st[32], dpt[32];
      ptx::fresh_registers(st);
      ptx::fresh_registers(dpt);
      ptx::wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk)
        ptx::Wgmma<T, 64>::template ss<0, 0>(st, k_km.at(kmajor_step(kk, BN)), q_km.at(qs + kmajor_step(kk, BM)),
                                             kk > 0 ? 1 : 0);
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk)
        ptx::Wgmma<T, 64>::template ss<0, 0>(dpt, v_km.at(kmajor_step(kk, BN)), do_km.at(qs + kmajor_step(kk, BM)),
                                             kk > 0 ? 1 : 0);
      ptx::wgmma_commit();
      if constexpr (!kFirst && kDqLate) {
        // The previous step's dQ, queued behind this step's S^T and dP^T: it runs
        // under this step's elementwise work and is reduced at the step's end.
        ptx::mbarrier_wait(base + L::panel_full(prev.panel), prev.panel_parity);
        issue_dq(prev.panel);
        ptx::wgmma_wait<1>();  // S^T, dP^T (and the previous dV, dK) done; dQ in flight
        ptx::fence_registers(st);
        ptx::fence_registers(dpt);
        ptx::fence_registers(dv);
        ptx::fence_registers(dk);
        // The previous step's Q, dO, LSE and D are read (every lane's reads, then the
        // leader's arrive).
        __syncwarp();
        if (leader) ptx::mbarrier_arrive(base + L::q_empty(prev.stage));
      } else {
        ptx::wgmma_wait<0>();
        ptx::fence_registers(st);
        ptx::fence_registers(dpt);
      }

      // P^T and dS^T. Element 4j + 2hh + e: key key0 + 8hh, query column 8j + 2t4 + e.
      const float* lse_s = reinterpret_cast<const float*>(smem + L::lse) + s * BM;
      const float* dsum_s = reinterpret_cast<const float*>(smem + L::dsum) + s * BM;
      // Two copies, so that the unmasked steps (most of them) run the elementwise work
      // without a branch per element around the mask.
      auto p_and_ds = [&](auto masked_tag) {
        constexpr bool kMasked = decltype(masked_tag)::value;
        // Relative to the step's corner (query m0, key n0): one mask per step, two
        // compares per element (this thread holds 16 query columns).
        TileElementMask tm{0, 0, 0};
        if constexpr (kMasked) tm = tile_element_mask(m0, n0, seq, wl, wr);
#pragma unroll
        for (int j = 0; j < 8; ++j)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int col = 8 * j + 2 * t4 + e;
            const float l2 = lse_s[col], dd = dsum_s[col];
#pragma unroll
            for (int hh = 0; hh < 2; ++hh) {
              const int idx = 4 * j + 2 * hh + e;
              const bool visible = !kMasked || tm.has(key0 - n0 + 8 * hh, col);
              const float pr = visible ? ptx::ex2_approx(fmaf(st[idx], mul, -l2)) : 0.f;
              st[idx] = pr;
              dpt[idx] = pr * (dpt[idx] - dd);
            }
          }
      };
      // This consumer's 64 keys only: on a causal diagonal one of the two often needs
      // no mask.
      if (!unmasked.covers(m0, rows))
        p_and_ds(std::true_type{});
      else
        p_and_ds(std::false_type{});
      // As A operands (keys x queries, 16 queries per k-step).
      std::uint32_t pa[4][4], dsa[4][4];
#pragma unroll
      for (int kk = 0; kk < 4; ++kk)
#pragma unroll
        for (int r = 0; r < 4; ++r) {
          pa[kk][r] = Element<T>::pack(st[8 * kk + 2 * r], st[8 * kk + 2 * r + 1]);
          dsa[kk][r] = Element<T>::pack(dpt[8 * kk + 2 * r], dpt[8 * kk + 2 * r + 1]);
        }

      // dS^T to this consumer's rows of the step's panel (row = key, 128-byte rows,
      // 16-byte chunks XOR-swizzled by the row's index in its 8-row atom), read by
      // dQ[:, c D/2 ..] += dS K[:, c D/2 ..] over the panel's 128 keys (issued at the
      // next step at d 64, at this step's end at d 128). The panel was last read by
      // step i - kBwdPanels's dQ products, which both consumers waited for (by step
      // i - 2's end) before their arrivals on step i - 1's panel, which this thread
      // waited for.
      const int panel = i % kBwdPanels;
      const std::uint32_t ds_off = panel * 2 * L::ds_bytes;
      // By stmatrix, 16 keys x 16 queries per x4 store: dsa[kk] holds exactly the four
      // 8 x 8 matrices of query chunks 2kk, 2kk + 1 (rows g and g + 8 of each); lanes
      // 8i .. 8i + 7 address the rows of matrix i (as the forward's O staging).
      {
        const int mi = lane >> 3, k = lane & 7;
        const std::uint32_t row_addr = ds_rows + ds_off + (warp * 16 + (mi & 1) * 8 + k) * 128;
#pragma unroll
        for (int kk = 0; kk < 4; ++kk)
          ptx::stmatrix_x4(row_addr + (((2 * kk + (mi >> 1)) ^ k) << 4), dsa[kk][0], dsa[kk][1], dsa[kk][2],
                           dsa[kk][3]);
      }

      // dV += P^T dO, dK += dS^T Q.
      ptx::wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < 4; ++kk)
        ptx::Wgmma<T, D>::template rs<1>(dv, pa[kk], do_mn.at(qs + kk * 2048), kFirst && kk == 0 ? 0 : 1);
#pragma unroll
      for (int kk = 0; kk < 4; ++kk)
        ptx::Wgmma<T, D>::template rs<1>(dk, dsa[kk], q_mn.at(qs + kk * 2048), kFirst && kk == 0 ? 0 : 1);
      ptx::wgmma_commit();

      // Concentrated rows (sm80/bwd_exact_d.cuh): one packed max and one vote; a
      // warp that holds a stored P of at least the lowest threshold flags the
      // step's row groups (all of them: its columns span the step's 64 rows).
      {
        std::uint32_t top = 0;
#pragma unroll
        for (int kk = 0; kk < 4; ++kk)
#pragma unroll
          for (int r = 0; r < 4; ++r) top = sm80::max_pair<T>(top, pa[kk][r]);
        float top_lo, top_hi;
        unpack2<T>(top, top_lo, top_hi);
        if (__any_sync(0xffffffffu, fmaxf(top_lo, top_hi) >= sm80::kLongRowConcentrated))
          sm80::flag_query_groups(a, h, seq.q_global0 + m0, rows, lane);
      }

      // The panel's rows, stored above (before the products that take dsa as A, so
      // the stores never wait on them), are published to the other consumer.
      ptx::fence_proxy_async_smem();  // generic-proxy stores, read next by wgmma
      ptx::mbarrier_arrive(base + L::panel_full(panel));

      if constexpr (kDqLate) {
        if constexpr (!kFirst) {
          ptx::wgmma_wait<1>();  // the previous step's dQ done; this step's dV, dK in flight
          ptx::fence_registers(dq);
          reduce_dq(prev.h, prev.m0, prev.rows);
        }
        prev = {panel, std::uint32_t(i / kBwdPanels) & 1u, s, h, m0, rows};
      } else {
        // This step's dQ once both consumers' rows are in, then everything retired:
        // the stage is free and nothing is in flight at the next step's top.
        ptx::mbarrier_wait(base + L::panel_full(panel), std::uint32_t(i / kBwdPanels) & 1u);
        issue_dq(panel);
        ptx::wgmma_wait<0>();
        ptx::fence_registers(dv);
        ptx::fence_registers(dk);
        ptx::fence_registers(dq);
        __syncwarp();
        if (leader) ptx::mbarrier_arrive(base + L::q_empty(s));
        reduce_dq(h, m0, rows);
      }
      walk.advance();
    };
    if (steps > 0) {
      step(0, std::true_type{});
      for (int i = 1; i < steps; ++i) step(i, std::false_type{});
      if constexpr (kDqLate) {
        ptx::mbarrier_wait(base + L::panel_full(prev.panel), prev.panel_parity);
        issue_dq(prev.panel);
        ptx::wgmma_wait<0>();
        ptx::fence_registers(dv);
        ptx::fence_registers(dk);
        ptx::fence_registers(dq);
        reduce_dq(prev.h, prev.m0, prev.rows);
      }
    } else {
#pragma unroll
      for (int i = 0; i < D / 2; ++i) dv[i] = dk[i] = 0.f;
    }

    // dK (times the softmax scale) and dV of this consumer's keys.
    T* dk_ptr = static_cast<T*>(p.dk) + b * p.dk_batch_stride + (seq.k0 + n0) * p.dk_row_stride +
                std::int64_t(hk) * p.dk_head_stride;
    T* dv_ptr = static_cast<T*>(p.dv) + b * p.dv_batch_stride + (seq.k0 + n0) * p.dv_row_stride +
                std::int64_t(hk) * p.dv_head_stride;
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      const int r = c * 64 + warp * 16 + g + 8 * hh;
      if (r >= rows_k) continue;
#pragma unroll
      for (int j = 0; j < D / 8; ++j) {
        const int col = 8 * j + 2 * t4;
        if (col < p.head_dim)
          *reinterpret_cast<std::uint32_t*>(dk_ptr + std::int64_t(r) * p.dk_row_stride + col) =
              Element<T>::pack(dk[4 * j + 2 * hh] * p.scale, dk[4 * j + 2 * hh + 1] * p.scale);
        if (col < p.head_dim_v)
          *reinterpret_cast<std::uint32_t*>(dv_ptr + std::int64_t(r) * p.dv_row_stride + col) =
              Element<T>::pack(dv[4 * j + 2 * hh], dv[4 * j + 2 * hh + 1]);
      }
    }
  }
#endif
}

}  // namespace flashpp::cuda::sm90
