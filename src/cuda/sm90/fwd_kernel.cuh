#pragma once
// FA3-class forward for Hopper (sm90a). A persistent grid of blocks, each taking
// (query block, head, batch) tiles in a fixed order; per block three warpgroups:
//   producer  (warpgroup 0, 24 registers): one thread issues every TMA load, Q once
//             per tile and K/V through a `stages`-deep ring of full/empty mbarriers;
//   consumers (warpgroups 1, 2, 240 registers): 64 query rows each. Per key tile a
//             consumer issues S_next = Q K^T (wgmma SS) and O += P V (wgmma RS, P from
//             registers) back to back, then runs the softmax of S_next while the PV
//             product is still in flight. Two named barriers alternate the consumers'
//             GEMM issue (pingpong), so one's softmax overlaps the other's GEMMs.
// Key tiles are walked from the last visible one down, so the tiles needing masks
// (the causal diagonal, the sequence end) come first and the rest run unmasked.
// Normalization is deferred to the epilogue, which writes O and the LSE.
#include <cuda.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "common/params.hpp"
#include "cuda/common/element.cuh"
#include "cuda/common/online_softmax.cuh"
#include "cuda/common/scores.cuh"
#include "cuda/common/sequence.cuh"
#include "cuda/ptx/math.cuh"
#include "cuda/ptx/mbarrier.cuh"
#include "cuda/ptx/tma.cuh"
#include "cuda/ptx/warpgroup.cuh"
#include "cuda/ptx/wgmma.cuh"
#include "cuda/sm90/fwd_tiles.hpp"
#include "cuda/sm90/tensor_maps.hpp"
#include "cuda/sm90/tile_order.cuh"

namespace flashpp::cuda::sm90 {

// Named barriers 1 and 2: "consumer 0 / 1 may issue its GEMMs".
inline constexpr int kPingpongBarrier = 1;
inline constexpr std::uint32_t kConsumerWarps = 4 * kConsumers;

// Byte offsets of the block's shared memory, from a 1024-aligned base.
template <int D, int V>
struct FwdLayout {
  static constexpr FwdTiles kT = fwd_tiles(D, V);
  static constexpr std::uint32_t q_bytes = std::uint32_t(q_tile_bytes(kT));
  static constexpr std::uint32_t kv_bytes = std::uint32_t(kv_tile_bytes(kT));
  static constexpr std::uint32_t k = q_bytes;
  static constexpr std::uint32_t v = k + kT.stages * kv_bytes;
  static constexpr std::uint32_t bars = v + kT.stages * kv_bytes;
  static constexpr std::uint32_t q_full = bars, q_empty = bars + 8;
  __device__ static constexpr std::uint32_t k_full(int s) { return bars + 16 + 8 * s; }
  __device__ static constexpr std::uint32_t k_empty(int s) { return bars + 16 + 8 * (kT.stages + s); }
  __device__ static constexpr std::uint32_t v_full(int s) { return bars + 16 + 8 * (2 * kT.stages + s); }
  __device__ static constexpr std::uint32_t v_empty(int s) { return bars + 16 + 8 * (3 * kT.stages + s); }
};

// The key tiles [lo, hi) some row of a query block sees.
struct KeyTiles {
  int lo = 0, hi = 0;
  __device__ bool any() const { return hi > lo; }
};

__device__ __forceinline__ KeyTiles key_tiles(const SeqRows& seq, int m0, int rows, int bn, int wl, int wr) {
  KeyTiles t;
  const VisibleRange first = visible_keys(m0, seq.len_q, seq.len_k, wl, wr);
  const VisibleRange last = visible_keys(m0 + rows - 1, seq.len_q, seq.len_k, wl, wr);
  if (first.lo < last.hi) {
    t.lo = int(first.lo / bn);
    t.hi = int((last.hi + bn - 1) / bn);
  }
  return t;
}

// Ring position of the K/V pipeline, advanced identically by producer and consumers.
template <int Stages>
struct RingPos {
  int stage = 0;
  std::uint32_t phase = 0;
  __device__ __forceinline__ void advance() {
    if (++stage == Stages) {
      stage = 0;
      phase ^= 1u;
    }
  }
};

// V: the tile variant (fwd_tiles.hpp).
template <typename T, int D, int V>
__global__ void __launch_bounds__(kThreads, 1)
    fwd_kernel(const __grid_constant__ AttnParams p, const __grid_constant__ FwdMaps maps) {
#if FLASHPP_SM90_ENABLED
  constexpr FwdTiles kT = fwd_tiles(D, V);
  constexpr int BM = kT.block_m, BN = kT.block_n, ST = kT.stages, PANELS = panels(D);
  using L = FwdLayout<D, V>;

  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const std::uint32_t base = (ptx::smem_u32(smem_raw) + 1023u) & ~1023u;
  const int wg = threadIdx.x / 128;

  if (threadIdx.x == 0) {
    ptx::mbarrier_init(base + L::q_full, 1);
    ptx::mbarrier_init(base + L::q_empty, kConsumerWarps);
    for (int s = 0; s < ST; ++s) {
      ptx::mbarrier_init(base + L::k_full(s), 1);
      ptx::mbarrier_init(base + L::k_empty(s), kConsumerWarps);
      ptx::mbarrier_init(base + L::v_full(s), 1);
      ptx::mbarrier_init(base + L::v_empty(s), kConsumerWarps);
    }
    ptx::mbarrier_init_fence();
  }
  __syncthreads();

  const TileOrder order = TileOrder::make(p, BM);
  const int wl = p.window_left, wr = p.window_right;

  if (wg == 0) {
    // ---------------- producer ----------------
    ptx::setmaxnreg_dec<24>();
    if (threadIdx.x == 0) {
      ptx::tma_prefetch_map(&maps.q);
      ptx::tma_prefetch_map(&maps.k);
      ptx::tma_prefetch_map(&maps.v);
      const bool varlen_q = p.cu_seqlens_q != nullptr, varlen_k = p.cu_seqlens_k != nullptr;
      RingPos<ST> ring;
      std::uint32_t q_iter = 0;
      for (int tile = blockIdx.x; tile < order.count; tile += gridDim.x) {
        const TileCoord tc = order.at(tile);
        const SeqRows seq = sequence_rows(p, tc.b);
        const int m0 = tc.m_block * BM;
        if (m0 >= seq.len_q) continue;
        const KeyTiles kt = key_tiles(seq, m0, min(BM, seq.len_q - m0), BN, wl, wr);
        if (!kt.any()) continue;
        const int hk = tc.h / p.gqa_ratio;
        const int qb = varlen_q ? 0 : tc.b, kb = varlen_k ? 0 : tc.b;
        const int qrow = int(seq.q0) + m0, krow0 = int(seq.k0);

        ptx::mbarrier_wait(base + L::q_empty, (q_iter & 1u) ^ 1u);
        ++q_iter;
        ptx::mbarrier_arrive_expect_tx(base + L::q_full, L::q_bytes);
#pragma unroll
        for (int c = 0; c < PANELS; ++c)
          ptx::tma_load_4d(base + c * BM * 128, &maps.q, base + L::q_full, c * 64, qrow, tc.h, qb);

        for (int n = kt.hi - 1; n >= kt.lo; --n) {
          const int s = ring.stage;
          ptx::mbarrier_wait(base + L::k_empty(s), ring.phase ^ 1u);
          ptx::mbarrier_arrive_expect_tx(base + L::k_full(s), L::kv_bytes);
#pragma unroll
          for (int c = 0; c < PANELS; ++c)
            ptx::tma_load_4d(base + L::k + s * L::kv_bytes + c * BN * 128, &maps.k, base + L::k_full(s), c * 64,
                             krow0 + n * BN, hk, kb);
          ptx::mbarrier_wait(base + L::v_empty(s), ring.phase ^ 1u);
          ptx::mbarrier_arrive_expect_tx(base + L::v_full(s), L::kv_bytes);
#pragma unroll
          for (int c = 0; c < PANELS; ++c)
            ptx::tma_load_4d(base + L::v + s * L::kv_bytes + c * BN * 128, &maps.v, base + L::v_full(s), c * 64,
                             krow0 + n * BN, hk, kb);
          ring.advance();
        }
      }
    }
  } else {
    // ---------------- consumers ----------------
    ptx::setmaxnreg_inc<240>();
    const int c = wg - 1;
    const int lane = threadIdx.x & 31, warp = (threadIdx.x >> 5) & 3;
    const int g = lane >> 2, t4 = lane & 3;
    const bool leader = lane == 0;
    const int row_base = c * 64 + warp * 16 + g;  // + 8 * hh: this thread's two rows in the block
    const ScoreMap smap = ScoreMap::from(p);
    const bool fold = smap.folds();
    const float mul = fold ? smap.log2sc : 1.f;

    auto turn_sync = [&] { ptx::named_barrier_sync(kPingpongBarrier + c, 128 * kConsumers); };
    auto turn_pass = [&] { ptx::named_barrier_arrive(kPingpongBarrier + (c ^ 1), 128 * kConsumers); };
    if (c == 1) ptx::named_barrier_arrive(kPingpongBarrier, 128 * kConsumers);  // consumer 0 goes first

    auto gemm_s = [&](float (&s)[BN / 2], int stage) {
      ptx::wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
        const std::uint32_t off = (kk % 4) * 32u;  // k-step inside a 64-column panel
        const std::uint64_t da = ptx::sw128_desc(base + (kk / 4) * BM * 128 + c * 64 * 128 + off, 16, 1024);
        const std::uint64_t db = ptx::sw128_desc(base + L::k + stage * L::kv_bytes + (kk / 4) * BN * 128 + off, 16, 1024);
        ptx::Wgmma<T, BN>::template ss<0, 0>(s, da, db, kk > 0 ? 1 : 0);
      }
      ptx::wgmma_commit();
    };
    auto gemm_o = [&](float (&o)[D / 2], const std::uint32_t (&pa)[BN / 16][4], int stage) {
      ptx::wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < BN / 16; ++kk) {
        const std::uint64_t db = ptx::sw128_desc(base + L::v + stage * L::kv_bytes + kk * 16 * 128, BN * 128, 1024);
        ptx::Wgmma<T, D>::template rs<1>(o, pa[kk], db, 1);
      }
      ptx::wgmma_commit();
    };
    auto release = [&](std::uint32_t bar) {
      if (leader) ptx::mbarrier_arrive(bar);
    };

    RingPos<ST> ring;
    std::uint32_t q_iter = 0;
    for (int tile = blockIdx.x; tile < order.count; tile += gridDim.x) {
      const TileCoord tc = order.at(tile);
      const SeqRows seq = sequence_rows(p, tc.b);
      const int m0 = tc.m_block * BM;
      if (m0 >= seq.len_q) continue;
      const int rows_q = min(BM, seq.len_q - m0);
      const KeyTiles kt = key_tiles(seq, m0, rows_q, BN, wl, wr);

      float o[D / 2];
#pragma unroll
      for (int i = 0; i < D / 2; ++i) o[i] = 0.f;
      float row_max[2] = {-INFINITY, -INFINITY}, row_sum[2] = {0.f, 0.f};

      // Scores of key tile n (log2 domain after `mul`), masked, -> probabilities;
      // returns the factors by which O must be rescaled once the PV product in
      // flight has landed.
      auto softmax = [&](float (&s)[BN / 2], int n, float (&corr)[2]) {
        if (!fold) {
          auto& s3 = *reinterpret_cast<float(*)[1][BN / 8][4]>(&s);
          smap.apply(s3);
        }
        const int n0 = n * BN;
        if (tile_needs_mask(m0, rows_q, n0, BN, seq, wl, wr)) {
#pragma unroll
          for (int hh = 0; hh < 2; ++hh) {
            const KeyBounds r = key_bounds(m0 + row_base + 8 * hh, seq, wl, wr);
#pragma unroll
            for (int j = 0; j < BN / 8; ++j)
#pragma unroll
              for (int e = 0; e < 2; ++e)
                if (!r.has(n0 + j * 8 + 2 * t4 + e)) s[4 * j + 2 * hh + e] = -INFINITY;
          }
        }
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) {
          float mx = -INFINITY;
#pragma unroll
          for (int j = 0; j < BN / 8; ++j) mx = fmaxf(mx, fmaxf(s[4 * j + 2 * hh], s[4 * j + 2 * hh + 1]));
          mx = fmaxf(quad_max(mx) * mul, row_max[hh]);
          // A row that has seen only masked keys keeps max -inf; subtracting 0 keeps
          // its exponents at -inf (probability 0) instead of NaN.
          const float base_hh = mx == -INFINITY ? 0.f : mx;
          corr[hh] = ptx::ex2_approx(row_max[hh] - base_hh);
          row_max[hh] = mx;
          float part = row_sum[hh] * corr[hh];
#pragma unroll
          for (int j = 0; j < BN / 8; ++j)
#pragma unroll
            for (int e = 0; e < 2; ++e) {
              const float pr = ptx::ex2_approx(fmaf(s[4 * j + 2 * hh + e], mul, -base_hh));
              s[4 * j + 2 * hh + e] = pr;
              part += pr;
            }
          row_sum[hh] = part;
        }
      };
      auto rescale = [&](const float (&corr)[2]) {
#pragma unroll
        for (int j = 0; j < D / 8; ++j) {
          o[4 * j + 0] *= corr[0];
          o[4 * j + 1] *= corr[0];
          o[4 * j + 2] *= corr[1];
          o[4 * j + 3] *= corr[1];
        }
      };
      auto to_a = [&](const float (&s)[BN / 2], std::uint32_t (&pa)[BN / 16][4]) {
#pragma unroll
        for (int kk = 0; kk < BN / 16; ++kk) {
          pa[kk][0] = Element<T>::pack(s[8 * kk + 0], s[8 * kk + 1]);
          pa[kk][1] = Element<T>::pack(s[8 * kk + 2], s[8 * kk + 3]);
          pa[kk][2] = Element<T>::pack(s[8 * kk + 4], s[8 * kk + 5]);
          pa[kk][3] = Element<T>::pack(s[8 * kk + 6], s[8 * kk + 7]);
        }
      };

      if (kt.any()) {
        ptx::mbarrier_wait(base + L::q_full, q_iter & 1u);
        ++q_iter;
        float s[BN / 2];
        std::uint32_t pa[BN / 16][4];
        float corr[2];

        int n = kt.hi - 1;
        ptx::mbarrier_wait(base + L::k_full(ring.stage), ring.phase);
        turn_sync();
        gemm_s(s, ring.stage);
        turn_pass();
        ptx::wgmma_wait<0>();
        ptx::fence_registers(s);
        release(base + L::k_empty(ring.stage));
        if (n == kt.lo) release(base + L::q_empty);
        softmax(s, n, corr);
        to_a(s, pa);
        RingPos<ST> pv = ring;
        ring.advance();

        for (--n; n >= kt.lo; --n) {
          ptx::mbarrier_wait(base + L::k_full(ring.stage), ring.phase);
          turn_sync();
          gemm_s(s, ring.stage);
          ptx::mbarrier_wait(base + L::v_full(pv.stage), pv.phase);
          gemm_o(o, pa, pv.stage);
          turn_pass();
          ptx::wgmma_wait<1>();  // S landed; PV may still run
          ptx::fence_registers(s);
          release(base + L::k_empty(ring.stage));
          if (n == kt.lo) release(base + L::q_empty);
          softmax(s, n, corr);
          ptx::wgmma_wait<0>();
          ptx::fence_registers(o);
          release(base + L::v_empty(pv.stage));
          rescale(corr);
          to_a(s, pa);
          pv = ring;
          ring.advance();
        }

        ptx::mbarrier_wait(base + L::v_full(pv.stage), pv.phase);
        turn_sync();
        gemm_o(o, pa, pv.stage);
        turn_pass();
        ptx::wgmma_wait<0>();
        ptx::fence_registers(o);
        release(base + L::v_empty(pv.stage));
      }

      // Epilogue: normalize, write this thread's O elements and LSE (every element of
      // the tile's valid rows, also when no key is visible: O = 0, LSE = -inf).
      const std::int64_t o_batch = p.cu_seqlens_q != nullptr ? 0 : tc.b * p.o_batch_stride;
      T* o_ptr = static_cast<T*>(p.o) + o_batch + (seq.q0 + m0) * p.o_row_stride + std::int64_t(tc.h) * p.o_head_stride;
#pragma unroll
      for (int hh = 0; hh < 2; ++hh) {
        const float sum = quad_sum(row_sum[hh]);
        const float inv = sum > 0.f ? 1.f / sum : 0.f;
        const int r = row_base + 8 * hh;
        if (r < rows_q) {
          T* orow = o_ptr + std::int64_t(r) * p.o_row_stride;
#pragma unroll
          for (int j = 0; j < D / 8; ++j) {
            const int col = j * 8 + 2 * t4;
            if (col < p.head_dim_v)
              *reinterpret_cast<std::uint32_t*>(orow + col) =
                  Element<T>::pack(o[4 * j + 2 * hh] * inv, o[4 * j + 2 * hh + 1] * inv);
          }
          if (p.lse != nullptr && t4 == 0) {
            const float lse = sum > 0.f ? (row_max[hh] + log2f(sum)) * 0.6931471805599453f : -INFINITY;
            p.lse[tc.b * p.lse_batch_stride + std::int64_t(tc.h) * p.lse_head_stride + seq.q0 + m0 + r] = lse;
          }
        }
      }
    }
    // Consumer 1 passed the turn once more than consumer 0 took it; take it so the
    // barrier ends the kernel balanced.
    if (c == 0) turn_sync();
  }
#endif
}

}  // namespace flashpp::cuda::sm90
