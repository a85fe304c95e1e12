#pragma once
// FA3-class forward for Hopper (sm90a). A persistent grid of blocks, each taking
// (query block, head, batch) tiles in a fixed order; per block three warpgroups:
//   producer  (warpgroup 0, 24 registers): one thread issues every TMA load, Q once
//             per tile and K/V through a `stages`-deep ring of full/empty mbarriers;
//   consumers (warpgroups 1..C, C = 2 or 3; 240 or 160 registers): 64 query rows each.
//             Per key tile a consumer issues S_next = Q K^T (wgmma SS) and O += P V
//             (wgmma RS, P from registers) back to back, then the softmax of S_next.
//             One named barrier per consumer passes the right to issue GEMMs around
//             the consumers in turn (pingpong), so one's softmax overlaps the others'
//             GEMMs. (The source waits for the PV product only after the
//             softmax, but ptxas moves that wait to the softmax's start: packing P
//             early, interleaved with the exponentials, is how it fits the tile in 240
//             registers; forcing the order makes it serialize every wgmma, C7512.
//             See docs/hopper_forward.md.)
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

// Named barriers 1..C: "consumer c may issue its GEMMs". Each is met by two
// warpgroups: the consumer waiting for its turn and the one handing it over.
inline constexpr int kPingpongBarrier = 1;
inline constexpr std::uint32_t kTurnThreads = 2 * 128;

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

// op-reduction of v[0..N) as a balanced tree (v is overwritten).
template <int N, typename Op>
__device__ __forceinline__ float tree_reduce(float (&v)[N], Op op) {
#pragma unroll
  for (int w = 1; w < N; w *= 2)
#pragma unroll
    for (int j = 0; j + w < N; j += 2 * w) v[j] = op(v[j], v[j + w]);
  return v[0];
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
__global__ void __launch_bounds__(fwd_threads(fwd_tiles(D, V)), 1)
    fwd_kernel(const __grid_constant__ AttnParams p, const __grid_constant__ FwdMaps maps) {
#if FLASHPP_SM90_ENABLED
  constexpr FwdTiles kT = fwd_tiles(D, V);
  constexpr int BM = kT.block_m, BN = kT.block_n, ST = kT.stages, PANELS = panels(D), NC = kT.consumers;
  constexpr std::uint32_t kConsumerWarps = 4 * NC;
  using L = FwdLayout<D, V>;

  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const std::uint32_t base = (ptx::smem_u32(smem_raw) + 1023u) & ~1023u;
  // Broadcast from lane 0: the compiler then knows the warpgroup index is
  // warp-uniform, so the branches on it stay uniform and the consumers' descriptor
  // arithmetic runs on uniform registers (per-thread, every wgmma paid ~8 integer
  // instructions and register-to-uniform moves to re-encode its descriptors).
  const int wg = __shfl_sync(0xffffffffu, int(threadIdx.x) / 128, 0);

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
    ptx::setmaxnreg_dec<kProducerRegisters>();
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
    ptx::setmaxnreg_inc<consumer_registers(kT)>();
    const int c = wg - 1;
    const int lane = threadIdx.x & 31, warp = (threadIdx.x >> 5) & 3;
    const int g = lane >> 2, t4 = lane & 3;
    const bool leader = lane == 0;
    const int row_base = c * 64 + warp * 16 + g;  // + 8 * hh: this thread's two rows in the block
    const ScoreMap smap = ScoreMap::from(p);
    const bool fold = smap.folds();
    const float mul = fold ? smap.log2sc : 1.f;

    const int next = c + 1 == NC ? 0 : c + 1;
    auto turn_sync = [&] { ptx::named_barrier_sync(kPingpongBarrier + c, kTurnThreads); };
    auto turn_pass = [&] { ptx::named_barrier_arrive(kPingpongBarrier + next, kTurnThreads); };
    if (c == NC - 1) ptx::named_barrier_arrive(kPingpongBarrier, kTurnThreads);  // consumer 0 goes first

    // Descriptors of this consumer's Q rows and of stage 0's K and V tiles; the
    // k-steps and stages are offsets from them.
    const ptx::Sw128Desc q_desc = ptx::Sw128Desc::make(base + c * 64 * 128, 16, 1024);
    const ptx::Sw128Desc k_desc = ptx::Sw128Desc::make(base + L::k, 16, 1024);
    const ptx::Sw128Desc v_desc = ptx::Sw128Desc::make(base + L::v, BN * 128, 1024);
    auto gemm_s = [&](float (&s)[BN / 2], int stage) {
      const std::uint32_t stage_off = stage * L::kv_bytes;
      ptx::wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
        const std::uint32_t off = (kk % 4) * 32u;  // k-step inside a 64-column panel
        ptx::Wgmma<T, BN>::template ss<0, 0>(s, q_desc.at((kk / 4) * BM * 128 + off),
                                             k_desc.at(stage_off + (kk / 4) * BN * 128 + off), kk > 0 ? 1 : 0);
      }
      ptx::wgmma_commit();
    };
    auto gemm_o = [&](float (&o)[D / 2], const std::uint32_t (&pa)[BN / 16][4], int stage) {
      const std::uint32_t stage_off = stage * L::kv_bytes;
      ptx::wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < BN / 16; ++kk) ptx::Wgmma<T, D>::template rs<1>(o, pa[kk], v_desc.at(stage_off + kk * 16 * 128), 1);
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
          // Row max and row sum as trees (depth log2(BN / 4) instead of a chain of
          // BN / 4 dependent instructions): this runs between a GEMM's end and the
          // next issue of this consumer, where latency, not throughput, counts.
          float part_max[BN / 8];
#pragma unroll
          for (int j = 0; j < BN / 8; ++j) part_max[j] = fmaxf(s[4 * j + 2 * hh], s[4 * j + 2 * hh + 1]);
          float mx = tree_reduce<BN / 8>(part_max, [](float a, float b) { return fmaxf(a, b); });
          mx = fmaxf(quad_max(mx) * mul, row_max[hh]);
          // A row that has seen only masked keys keeps max -inf; subtracting 0 keeps
          // its exponents at -inf (probability 0) instead of NaN.
          const float base_hh = mx == -INFINITY ? 0.f : mx;
          corr[hh] = ptx::ex2_approx(row_max[hh] - base_hh);
          row_max[hh] = mx;
          float part_sum[BN / 8];
#pragma unroll
          for (int j = 0; j < BN / 8; ++j) {
            const float p0 = ptx::ex2_approx(fmaf(s[4 * j + 2 * hh], mul, -base_hh));
            const float p1 = ptx::ex2_approx(fmaf(s[4 * j + 2 * hh + 1], mul, -base_hh));
            s[4 * j + 2 * hh] = p0;
            s[4 * j + 2 * hh + 1] = p1;
            part_sum[j] = p0 + p1;
          }
          row_sum[hh] = fmaf(row_sum[hh], corr[hh], tree_reduce<BN / 8>(part_sum, [](float a, float b) { return a + b; }));
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
          rescale(corr);  // by the previous softmax's factors, while S = Q K^T runs
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
          to_a(s, pa);
          pv = ring;
          ring.advance();
        }

        rescale(corr);
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
    // The last consumer passed the turn to consumer 0 once more than consumer 0
    // took it; take it so the barrier ends the kernel balanced.
    if (c == 0) turn_sync();
  }
#endif
}

}  // namespace flashpp::cuda::sm90
