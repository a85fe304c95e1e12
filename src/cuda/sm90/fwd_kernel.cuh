#pragma once
// FA3-class forward for Hopper (sm90a). A persistent grid of blocks, each taking
// (query block, head, batch) tiles in a fixed order (tile_order.cuh) or, with the
// dynamic schedule, claiming them (tile_queue.cuh); per block three warpgroups:
//   producer  (warpgroup 0, 32 registers): one thread issues every TMA load, Q once
//             per tile and K/V through a `stages`-deep ring of full/empty mbarriers;
//   consumers (warpgroups 1..C, C = 2 or 3; 240 or 160 registers): 64 query rows each.
//             Per key tile a consumer issues S_next = Q K^T (wgmma SS) and O += P V
//             (wgmma RS, P from registers) back to back, then the softmax of S_next.
//             One named barrier per consumer passes the right to issue GEMMs around
//             the consumers in turn (pingpong), so one's softmax overlaps the others'
//             GEMMs. (The source waits for the PV product only after the
//             softmax. With the mask test and the softcap branch in the key loop,
//             ptxas moves that wait to the softmax's start; the Plain instance, whose
//             loop has neither (launched where plain_loop.hpp allows), gets it after
//             the row max and the first exponentials. See docs/hopper_forward.md.)
// Key tiles are walked from the last visible one down, so the tiles needing masks
// (the causal diagonal, the sequence end) come first and the rest run unmasked.
// Normalization is deferred to the epilogue, which writes O and the LSE. With
// the TMA-store epilogue (FwdKnobs::o_tma) each consumer stages its 64 rows of O
// in shared memory (fwd_epilogue.cuh) and one of its threads issues the TMA
// store. With a buffer of its own, nobody waits for the store: that thread
// checks it has read the buffer only before the next tile's staging. Staged
// over the V stages (OStaging::over_v), the consumers first meet at a barrier
// (no one may still be reading V), the issuing thread waits until its store has
// read the tile and signals an mbarrier, and the producer loads a tile's first V
// only once every consumer has signalled for the previous tile.
#include <cuda.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <type_traits>

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
#include "cuda/sm90/fwd_epilogue.cuh"
#include "cuda/sm90/fwd_softmax.cuh"
#include "cuda/sm90/fwd_tiles.hpp"
#include "cuda/sm90/tensor_maps.hpp"
#include "cuda/sm90/tile_order.cuh"
#include "cuda/sm90/tile_queue.cuh"

namespace flashpp::cuda::sm90 {

// Named barriers 1..C: "consumer c may issue its GEMMs". Each is met by two
// warpgroups: the consumer waiting for its turn and the one handing it over.
inline constexpr int kPingpongBarrier = 1;
inline constexpr std::uint32_t kTurnThreads = 2 * 128;
// Named barrier of all consumers before they stage O over the V stages (after 1..3).
inline constexpr int kEpilogueBarrier = 4;
// Named barriers 5..7: consumer c's own threads around staging its O slice.
inline constexpr int kStageBarrier = 5;

// Byte offsets of the block's shared memory, from a 1024-aligned base.
template <int D, int V>
struct FwdLayout {
  static constexpr FwdTiles kT = fwd_tiles(D, V);
  static constexpr std::uint32_t q_bytes = std::uint32_t(q_tile_bytes(kT));
  static constexpr std::uint32_t kv_bytes = std::uint32_t(kv_tile_bytes(kT));
  static constexpr bool kOwnO = o_staging(kT) == OStaging::own_buffer;
  static constexpr int kQBuffers = q_buffers(kT);
  static constexpr std::uint32_t k = kQBuffers * q_bytes;
  static constexpr std::uint32_t v = k + kT.stages * kv_bytes;
  static constexpr std::uint32_t ones = v + kT.stages * kv_bytes;  // row_sums_by_tensor's panel (or empty)
  static constexpr std::uint32_t bars = ones + std::uint32_t(ones_panel_bytes(kT));
  static constexpr std::uint32_t o = kOwnO ? std::uint32_t(o_buffer_offset(kT)) : v;  // staged O (TMA-store epilogue)
  static constexpr std::uint32_t o_empty = bars + 32;
  __device__ static constexpr std::uint32_t q_full(int b) { return bars + 8 * b; }
  __device__ static constexpr std::uint32_t q_empty(int b) { return bars + 16 + 8 * b; }
  __device__ static constexpr std::uint32_t k_full(int s) { return bars + 40 + 8 * s; }
  __device__ static constexpr std::uint32_t k_empty(int s) { return bars + 40 + 8 * (kT.stages + s); }
  __device__ static constexpr std::uint32_t v_full(int s) { return bars + 40 + 8 * (2 * kT.stages + s); }
  __device__ static constexpr std::uint32_t v_empty(int s) { return bars + 40 + 8 * (3 * kT.stages + s); }
  static constexpr std::uint32_t queue = bars + 40 + 32 * kT.stages;  // tile_queue.cuh
  static_assert(1024 + bars + barrier_bytes(kT) == fwd_smem_bytes(kT), "layout must match the tile table's budget");
};

// The key tiles [lo, hi) some row of a query block sees (common/mask.hpp).
using KeyTiles = KeyTileRange;
__device__ __forceinline__ KeyTiles key_tiles(const SeqRows& seq, int m0, int rows, int bn, int wl, int wr) {
  return key_tile_range(m0, rows, seq.len_q, seq.len_k, bn, wl, wr);
}

// One tile of the order: where its rows are and which key tiles they see
// (rows_q = 0: the query block lies past its sequence's end, nothing to do).
struct TileWork {
  TileCoord tc;
  SeqRows seq;
  int m0 = 0, rows_q = 0;
  KeyTiles kt;
};

__device__ __forceinline__ TileWork tile_work(const AttnParams& p, const TileOrder& order, int tile, int bm, int bn) {
  TileWork w;
  w.tc = order.at(tile);
  w.seq = sequence_rows(p, w.tc.b);
  w.m0 = w.tc.m_block * bm;
  if (w.m0 < w.seq.len_q) {
    w.rows_q = min(bm, w.seq.len_q - w.m0);
    w.kt = key_tiles(w.seq, w.m0, w.rows_q, bn, p.window_left, p.window_right);
  }
  return w;
}

// The consumers' tile of `round` (false: none left): the static order's, or the
// index the producer handed over (dynamic schedule). The order is rebuilt from
// the parameters on each call rather than kept live across the tile loop: the
// consumers of the wide tiles have no registers to spare for it.
__device__ __forceinline__ bool consumer_tile(const AttnParams& p, const FwdKnobs& knobs, const TileQueue& queue,
                                              int round, bool leader, int bm, int bn, TileWork& w) {
  const TileOrder order = TileOrder::make(p, bm, knobs.snake != 0, knobs.head_group);
  int tile;
  if (knobs.tile_counter != nullptr) {
    tile = queue.pop(std::uint32_t(round), leader);
    if (tile < 0) return false;
  } else {
    tile = order.tile_of(round, int(blockIdx.x), int(gridDim.x));
    if (tile >= order.count) return false;
  }
  w = tile_work(p, order, tile, bm, bn);
  return true;
}

// Whether consumer c's 64 rows go out through the TMA store: always for fixed-length
// batches (the box is clipped at seqlen_q), for varlen only when all 64 rows are in
// the sequence (past its end they belong to the next one).
__device__ __forceinline__ bool o_slice_by_tma(const TileWork& w, int c, bool varlen_q) {
  return !varlen_q || (c + 1) * kOStoreRows <= w.rows_q;
}

// Which Q buffer the i-th loaded tile of a block uses and the parity of its
// full/empty phase: buffers alternate when two are in use.
struct QSlot {
  std::uint32_t offset, parity;
  int index;
};
template <int Buffers>
__device__ __forceinline__ QSlot q_slot(std::uint32_t i, bool two, std::uint32_t q_bytes) {
  if (Buffers == 2 && two) return {(i & 1u) * q_bytes, (i >> 1) & 1u, int(i & 1u)};
  return {0u, i & 1u, 0};
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

// S = Q K^T of one consumer over the first W keys of a BN-key tile (W = BN, or
// BN / 2 for a half-width first tile: the accumulator of an n = BN / 2 wgmma
// holds the same elements as the first half of an n = BN one's registers, so
// the half product lands in a prefix of s).
template <typename T, int D, int BM, int BN, int W>
__device__ __forceinline__ void issue_s(float (&s)[BN / 2], const ptx::Sw128Desc& q_desc, const ptx::Sw128Desc& k_desc,
                                        std::uint32_t q_off, std::uint32_t k_off) {
  auto& sw = *reinterpret_cast<float(*)[W / 2]>(&s);
  ptx::wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
    const std::uint32_t off = (kk % 4) * 32u;  // k-step inside a 64-column panel
    ptx::Wgmma<T, W>::template ss<0, 0>(sw, q_desc.at(q_off + (kk / 4) * BM * 128 + off),
                                        k_desc.at(k_off + (kk / 4) * BN * 128 + off), kk > 0 ? 1 : 0);
  }
  ptx::wgmma_commit();
}

// Head dims whose consumers may take their first key tile at half width
// (FwdKnobs::half_first): a second S width costs code and registers, so only
// where short causal rows were short of the target.
constexpr bool half_first_head_dim(int d) { return d == 64 || d == 128; }

// V: the tile variant (fwd_tiles.hpp). Plain: the launcher saw (plain_loop.hpp)
// that every key tile after a query block's first one or two (plain_peeled_tiles)
// needs no mask and the score map folds, so the key loop's softmax is built without
// the mask test and the softcap branch: with no branch between the GEMM issue and
// the softmax, ptxas keeps the wait for P V after the row max instead of before it.
template <typename T, int D, int V, bool Plain = false>
__global__ void __launch_bounds__(fwd_threads(fwd_tiles(D, V)), 1)
    fwd_kernel(const __grid_constant__ AttnParams p, const __grid_constant__ FwdMaps maps,
               const __grid_constant__ FwdKnobs knobs) {
#if FLASHPP_SM90_ENABLED
  constexpr FwdTiles kT = fwd_tiles(D, V);
  constexpr int BM = kT.block_m, BN = kT.block_n, ST = kT.stages, PANELS = panels(D), NC = kT.consumers;
  constexpr std::uint32_t kConsumerWarps = 4 * NC;
  constexpr bool kHalfFirst = half_first_head_dim(D) && BN == 128;
  using L = FwdLayout<D, V>;

  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const std::uint32_t base = (ptx::smem_u32(smem_raw) + 1023u) & ~1023u;
  // Broadcast from lane 0: the compiler then knows the warpgroup index is
  // warp-uniform, so the branches on it stay uniform and the consumers' descriptor
  // arithmetic runs on uniform registers (per-thread, every wgmma paid ~8 integer
  // instructions and register-to-uniform moves to re-encode its descriptors).
  const int wg = __shfl_sync(0xffffffffu, int(threadIdx.x) / 128, 0);

  if (threadIdx.x == 0) {
    for (int b = 0; b < 2; ++b) {
      ptx::mbarrier_init(base + L::q_full(b), 1);
      ptx::mbarrier_init(base + L::q_empty(b), kConsumerWarps);
    }
    ptx::mbarrier_init(base + L::o_empty, NC);
    TileQueue{base + L::queue}.init(kConsumerWarps);
    for (int s = 0; s < ST; ++s) {
      ptx::mbarrier_init(base + L::k_full(s), 1);
      ptx::mbarrier_init(base + L::k_empty(s), kConsumerWarps);
      ptx::mbarrier_init(base + L::v_full(s), 1);
      ptx::mbarrier_init(base + L::v_empty(s), kConsumerWarps);
    }
    ptx::mbarrier_init_fence();
  }
  if constexpr (ones_panel_bytes(kT) > 0) {
    // The panel of ones P V reads for the row sums (every element 1, so the swizzle
    // does not matter), made visible to the wgmmas' async proxy before the barrier.
    const std::uint32_t one2 = Element<T>::pack(1.f, 1.f);
    uint4* const panel = reinterpret_cast<uint4*>(smem_raw + (base - ptx::smem_u32(smem_raw)) + L::ones);
    for (std::uint32_t i = threadIdx.x; i < ones_panel_bytes(kT) / 16; i += blockDim.x)
      panel[i] = make_uint4(one2, one2, one2, one2);
    ptx::fence_proxy_async_smem();
  }
  __syncthreads();

  const int wl = p.window_left, wr = p.window_right;
  const TileQueue queue{base + L::queue};

  if (wg == 0) {
    // ---------------- producer ----------------
    ptx::setmaxnreg_dec<kProducerRegisters>();
    if (threadIdx.x == 0) {
      ptx::tma_prefetch_map(&maps.q);
      ptx::tma_prefetch_map(&maps.k);
      ptx::tma_prefetch_map(&maps.v);
      const bool varlen_k = p.cu_seqlens_k != nullptr;
      // Over the V stages, a tile's first V load waits until the previous tile's
      // O has been read out by its TMA store.
      const bool wait_o = !L::kOwnO && knobs.o_tma != 0;
      // Dynamic schedule: the first tile is the block's index, each next one is
      // claimed while this one loads; consumers learn them through the queue (only
      // tiles with rows, then -1).
      const bool dynamic = knobs.tile_counter != nullptr;
      int claimed = int(blockIdx.x);
      std::uint32_t pushed = 0;
      RingPos<ST> ring;
      std::uint32_t q_iter = 0;
      for (int round = 0;; ++round) {
        const TileOrder order = TileOrder::make(p, BM, knobs.snake != 0, knobs.head_group);
        const int tile = dynamic ? claimed : order.tile_of(round, int(blockIdx.x), int(gridDim.x));
        if (tile >= order.count) {
          if (dynamic) queue.push(pushed, -1);
          break;
        }
        if (dynamic) claimed = atomicAdd(knobs.tile_counter, 1) + int(gridDim.x);
        const TileWork w = tile_work(p, order, tile, BM, BN);
        if (w.rows_q == 0) continue;
        if (dynamic) queue.push(pushed++, tile);
        if (!w.kt.any()) continue;
        const TileCoord tc = w.tc;
        const KeyTiles kt = w.kt;
        const int hk = tc.h / p.gqa_ratio;
        const int qb = p.cu_seqlens_q != nullptr ? 0 : tc.b, kb = varlen_k ? 0 : tc.b;
        const int qrow = int(w.seq.q0) + w.m0, krow0 = int(w.seq.k0);

        const QSlot qs = q_slot<L::kQBuffers>(q_iter, knobs.q_double != 0, L::q_bytes);
        ptx::mbarrier_wait(base + L::q_empty(qs.index), qs.parity ^ 1u);
        ptx::mbarrier_arrive_expect_tx(base + L::q_full(qs.index), L::q_bytes);
#pragma unroll
        for (int c = 0; c < PANELS; ++c)
          ptx::tma_load_4d(base + qs.offset + c * BM * 128, &maps.q, base + L::q_full(qs.index), c * 64, qrow, tc.h, qb);

        for (int n = kt.hi - 1; n >= kt.lo; --n) {
          const int s = ring.stage;
          ptx::mbarrier_wait(base + L::k_empty(s), ring.phase ^ 1u);
          ptx::mbarrier_arrive_expect_tx(base + L::k_full(s), L::kv_bytes);
#pragma unroll
          for (int c = 0; c < PANELS; ++c)
            ptx::tma_load_4d(base + L::k + s * L::kv_bytes + c * BN * 128, &maps.k, base + L::k_full(s), c * 64,
                             krow0 + n * BN, hk, kb);
          if (wait_o && q_iter > 0 && n == kt.hi - 1) ptx::mbarrier_wait(base + L::o_empty, (q_iter - 1) & 1u);
          ptx::mbarrier_wait(base + L::v_empty(s), ring.phase ^ 1u);
          ptx::mbarrier_arrive_expect_tx(base + L::v_full(s), L::kv_bytes);
#pragma unroll
          for (int c = 0; c < PANELS; ++c)
            ptx::tma_load_4d(base + L::v + s * L::kv_bytes + c * BN * 128, &maps.v, base + L::v_full(s), c * 64,
                             krow0 + n * BN, hk, kb);
          ring.advance();
        }
        ++q_iter;
      }
    }
  } else {
    // ---------------- consumers ----------------
    ptx::setmaxnreg_inc<consumer_registers(kT)>();
    const int c = wg - 1;
    const int lane = threadIdx.x & 31, warp = (threadIdx.x >> 5) & 3;
    const int g = lane >> 2, t4 = lane & 3;
    const bool leader = lane == 0;
    const bool issuer = leader && warp == 0;  // issues this consumer's O stores
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
    const ptx::Sw128Desc v_desc =
        ptx::Sw128Desc::make(base + L::v, Plain && row_sums_by_tensor(D) ? L::ones - L::v : BN * 128, 1024);
    // S = Q K^T over all BN keys of a stage, or only the lower half (half-width first tile).
    // The stage arrives in a per-thread register (the ring advances under branches the
    // compiler cannot prove warp-uniform), so every wgmma's descriptor was rebuilt per
    // thread and moved to uniform registers (~5 instructions per wgmma, 60 of the 480
    // in d 64's key loop). Broadcast from lane 0, the stage is provably uniform.
    // Only in the plain kernels, and for S = Q K^T not in d 128's 128 x 128 one: in
    // those ptxas then serialized the wgmmas (C7511).
    constexpr bool kUniformS = Plain && !(D == 128 && V == 0), kUniformO = Plain;
    auto uniform = [](auto on, int v) { return decltype(on)::value ? __shfl_sync(0xffffffffu, v, 0) : v; };
    auto gemm_s = [&](float (&s)[BN / 2], int stage, std::uint32_t q_off, bool half) {
      const std::uint32_t k_off = uniform(std::bool_constant<kUniformS>{}, stage) * L::kv_bytes;
      if constexpr (kHalfFirst) {
        if (half) return issue_s<T, D, BM, BN, BN / 2>(s, q_desc, k_desc, q_off, k_off);
      }
      issue_s<T, D, BM, BN, BN>(s, q_desc, k_desc, q_off, k_off);
    };
    // O's accumulator: D columns, plus 8 whose every column is the row sum of P where
    // the sums come from the tensor pipe (row_sums_by_tensor; plain kernels only, the
    // generic ones keep their registers for the mask and softcap code).
    constexpr bool kSumCols = Plain && row_sums_by_tensor(D);
    constexpr int DO = kSumCols ? D + 8 : D;
    auto gemm_o = [&](float (&o)[DO / 2], const std::uint32_t (&pa)[BN / 16][4], int stage) {
      const std::uint32_t stage_off = uniform(std::bool_constant<kUniformO>{}, stage) * L::kv_bytes;
      // With the sum columns, V's second 64-column atom (LBO from the tile's start) is
      // the ones panel, which lies past every stage: moving to a later stage moves the
      // start forward and that distance back by the same number of 16-byte units.
      const std::uint32_t lbo_back = kSumCols ? (stage_off >> 4) << 16 : 0u;
      ptx::wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < BN / 16; ++kk)
        ptx::Wgmma<T, DO>::template rs<1>(o, pa[kk], v_desc.at(stage_off + kk * 16 * 128) - lbo_back, 1);
      ptx::wgmma_commit();
    };
    auto release = [&](std::uint32_t bar) {
      if (leader) ptx::mbarrier_arrive(bar);
    };

    RingPos<ST> ring;
    std::uint32_t q_iter = 0;
    // Up to d 96 the next tile's work (its order position, sequence bounds and key
    // range: ~170 integer instructions with two divisions) is found while this
    // tile's last P V runs rather than after its epilogue. Both consumers reach a
    // tile's end together, so work between the epilogue and the next tile's first
    // GEMM idles the tensor pipe (ncu source counters, d 64 1K: ~5% of the stall
    // samples sat there). Only the two-consumer tiles up to d 96: elsewhere ptxas
    // ran short of registers with it (C7511 or spills: d 128, and 108 bytes in the
    // three-consumer d 64 kernel), and long rows, which those tiles serve, gain
    // little from a per-tile saving. And only in the plain kernels: with the row-sum
    // columns, the generic d 64 kernel's wgmmas were serialized (C7511).
    constexpr bool kEarlyNext = Plain && D <= 96 && NC == 2;
    TileWork w;
    [[maybe_unused]] TileWork w_next;
    [[maybe_unused]] bool more_next = false;
    // Early: every round finds the next tile (prefetch below, on every path), and the
    // next round takes it over.
    auto take_tile = [&](int round) {
      if constexpr (kEarlyNext) {
        if (round > 0) {
          w = w_next;
          return more_next;
        }
      }
      return consumer_tile(p, knobs, queue, round, leader, BM, BN, w);
    };
    for (int round = 0; take_tile(round); ++round) {
      auto prefetch = [&] { more_next = consumer_tile(p, knobs, queue, round + 1, leader, BM, BN, w_next); };
      if (w.rows_q == 0) {
        if constexpr (kEarlyNext) prefetch();
        continue;
      }
      const TileCoord tc = w.tc;
      const SeqRows& seq = w.seq;
      const int m0 = w.m0, rows_q = w.rows_q;
      const KeyTiles& kt = w.kt;

      float o[DO / 2];
#pragma unroll
      for (int i = 0; i < DO / 2; ++i) o[i] = 0.f;
      float row_max[2] = {-INFINITY, -INFINITY}, row_sum[2] = {0.f, 0.f};

      // Scores of key tile n (log2 domain after `mul`), masked, -> probabilities;
      // returns the factors by which O must be rescaled once the PV product in
      // Scores of key tile n (all BN keys, or the lower half of a half-width first
      // tile), masked, -> probabilities; corr gets the factors by which O must be
      // rescaled once the PV product in flight has landed.
      auto softmax = [&](float (&s)[BN / 2], int n, float (&corr)[2], bool half) {
        const int n0 = n * BN;
        const bool masked = tile_needs_mask(m0, rows_q, n0, BN, seq, wl, wr);
        const int r0 = m0 + row_base;
        if constexpr (kHalfFirst) {
          if (half) return tile_softmax<BN / 2>(s, row_max, row_sum, corr, smap, fold, mul, masked, n0, r0, seq, wl, wr, t4);
        }
        tile_softmax<BN>(s, row_max, row_sum, corr, smap, fold, mul, masked, n0, r0, seq, wl, wr, t4);
      };
      auto rescale = [&](const float (&corr)[2]) {
#pragma unroll
        for (int j = 0; j < DO / 8; ++j) {
          o[4 * j + 0] *= corr[0];
          o[4 * j + 1] *= corr[0];
          o[4 * j + 2] *= corr[1];
          o[4 * j + 3] *= corr[1];
        }
      };
      // The rescale, skipped by the whole warp (a uniform branch) when none of its
      // rows' bases moved: with the lazy softmax, nearly every key tile after a
      // row's first ones.
      auto rescale_if_moved = [&](const float (&corr)[2]) {
        if (__any_sync(0xffffffffu, corr[0] != 1.f || corr[1] != 1.f)) rescale(corr);
      };
      // P as the A operand of P V. (After a half-width first tile P V still runs over
      // all BN keys, the upper half's probabilities zero: skipping its k-steps in
      // the loop, or building that half of P apart, made ptxas serialize the
      // wgmmas, C7511.)
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
        const QSlot qs = q_slot<L::kQBuffers>(q_iter, knobs.q_double != 0, L::q_bytes);
        ptx::mbarrier_wait(base + L::q_full(qs.index), qs.parity);
        float s[BN / 2];
        std::uint32_t pa[BN / 16][4];
        float corr[2];

        int n = kt.hi - 1;
        // The first tile at half width when this consumer's last row sees no key
        // of its upper half: on the causal diagonal of square shapes, consumer 0's
        // rows 0-63 against keys 64-127 of a 128-key tile.
        bool half = false;
        if constexpr (kHalfFirst) {
          const int last = min(c * 64 + 63, rows_q - 1);
          half = knobs.half_first != 0 &&
                 visible_keys(m0 + last, seq.len_q, seq.len_k, wl, wr).hi <= std::int64_t(n) * BN + BN / 2;
        }
        // The first tile's S, softmax and P, at full or half width: one branch
        // around all of it (paths merging while a product is in flight, or with
        // half-built P, made ptxas serialize the wgmmas, C7515 / C7511).
        auto first_tile = [&](bool h) {
          ptx::mbarrier_wait(base + L::k_full(ring.stage), ring.phase);
          turn_sync();
          gemm_s(s, ring.stage, qs.offset, h);
          turn_pass();
          ptx::wgmma_wait<0>();
          ptx::fence_registers(s);
          release(base + L::k_empty(ring.stage));
          if (n == kt.lo) release(base + L::q_empty(qs.index));
          softmax(s, n, corr, h);
          to_a(s, pa);
        };
        if (kHalfFirst && half)
          first_tile(true);
        else
          first_tile(false);
        RingPos<ST> pv = ring;
        ring.advance();

        --n;
        if constexpr (Plain && plain_peeled_tiles(BM, BN) == 2) {
          // On tiles that are not square a causal diagonal can reach into the second
          // key tile too: that tile takes the masked softmax here, after waiting for
          // both products (no product in flight across its branches), so the loop
          // below stays branch-free (plain_loop.hpp allows this one tile). Square
          // tiles compile without it (plain_peeled_tiles).
          if (n >= kt.lo && tile_needs_mask(m0, rows_q, n * BN, BN, seq, wl, wr)) {
            ptx::mbarrier_wait(base + L::k_full(ring.stage), ring.phase);
            turn_sync();
            gemm_s(s, ring.stage, qs.offset, false);
            rescale(corr);
            ptx::mbarrier_wait(base + L::v_full(pv.stage), pv.phase);
            gemm_o(o, pa, pv.stage);
            turn_pass();
            ptx::wgmma_wait<0>();
            ptx::fence_registers(s);
            ptx::fence_registers(o);
            release(base + L::k_empty(ring.stage));
            if (n == kt.lo) release(base + L::q_empty(qs.index));
            release(base + L::v_empty(pv.stage));
            softmax(s, n, corr, false);
            to_a(s, pa);
            pv = ring;
            ring.advance();
            --n;
          }
        }
        for (; n >= kt.lo; --n) {
          ptx::mbarrier_wait(base + L::k_full(ring.stage), ring.phase);
          turn_sync();
          gemm_s(s, ring.stage, qs.offset, false);
          // By the previous softmax's factors, while S = Q K^T runs.
          if constexpr (Plain)
            rescale_if_moved(corr);
          else
            rescale(corr);
          ptx::mbarrier_wait(base + L::v_full(pv.stage), pv.phase);
          gemm_o(o, pa, pv.stage);
          turn_pass();
          ptx::wgmma_wait<1>();  // S landed; PV may still run
          ptx::fence_registers(s);
          release(base + L::k_empty(ring.stage));
          if (n == kt.lo) release(base + L::q_empty(qs.index));
          if constexpr (Plain)
            tile_softmax<BN, BN / 2, true, !kSumCols>(s, row_max, row_sum, corr, smap, true, mul, false, 0, 0, seq, wl, wr,
                                                      t4);
          else
            softmax(s, n, corr, false);
          ptx::wgmma_wait<0>();
          ptx::fence_registers(o);
          release(base + L::v_empty(pv.stage));
          to_a(s, pa);
          pv = ring;
          ring.advance();
        }

        if constexpr (Plain)
          rescale_if_moved(corr);
        else
          rescale(corr);
        ptx::mbarrier_wait(base + L::v_full(pv.stage), pv.phase);
        turn_sync();
        gemm_o(o, pa, pv.stage);
        turn_pass();
        if constexpr (kEarlyNext) prefetch();
        ptx::wgmma_wait<0>();
        ptx::fence_registers(o);
        release(base + L::v_empty(pv.stage));
      }

      if constexpr (kEarlyNext) {
        if (!kt.any()) prefetch();
      }
      // Epilogue: normalize, write this thread's O elements and LSE (every element of
      // the tile's valid rows, also when no key is visible: O = 0, LSE = -inf).
      float inv[2], sum[2];
#pragma unroll
      for (int hh = 0; hh < 2; ++hh) {
        // The sum columns hold the whole row's sum in every lane of the quad.
        sum[hh] = kSumCols ? o[4 * (D / 8) + 2 * hh] : quad_sum(row_sum[hh]);
        inv[hh] = sum[hh] > 0.f ? 1.f / sum[hh] : 0.f;
      }
      const float(&od)[D / 2] = *reinterpret_cast<const float(*)[D / 2]>(&o);  // O without the sum columns
      const std::int64_t o_batch = p.cu_seqlens_q != nullptr ? 0 : tc.b * p.o_batch_stride;
      T* o_block = static_cast<T*>(p.o) + o_batch + (seq.q0 + m0) * p.o_row_stride + std::int64_t(tc.h) * p.o_head_stride;
      if (knobs.o_tma != 0 && kt.any()) {
        const bool by_tma = o_slice_by_tma(w, c, p.cu_seqlens_q != nullptr);
        // The staged tile is free: with its own buffer, once this consumer's
        // previous store has read it (checked by the thread that issued it); over
        // V, once no consumer reads V any more.
        if constexpr (L::kOwnO) {
          if (issuer) ptx::tma_store_wait_read();
          ptx::named_barrier_sync(kStageBarrier + c, 128);
        } else {
          ptx::named_barrier_sync(kEpilogueBarrier, kConsumerWarps * 32);
        }
        if (by_tma)
          stage_o_rows<T, D, BM>(od, inv, base + L::o, c, warp, lane);
        else
          store_o_rows<T, D>(od, inv, o_block, p.o_row_stride, row_base, rows_q, p.head_dim_v, t4);
        ptx::fence_proxy_async_smem();  // the stores above are read next by the TMA unit
        ptx::named_barrier_sync(kStageBarrier + c, 128);
        if (issuer) {
          if (by_tma) {
            const int qb = p.cu_seqlens_q != nullptr ? 0 : tc.b, qrow = int(seq.q0) + m0 + c * kOStoreRows;
#pragma unroll
            for (int pn = 0; pn < PANELS; ++pn)
              if (pn * 64 < p.head_dim_v)
                ptx::tma_store_4d(&maps.o, base + L::o + pn * BM * 128 + c * kOStoreRows * 128, pn * 64, qrow, tc.h,
                                  qb);
            ptx::tma_store_commit();
          }
          if constexpr (!L::kOwnO) {
            ptx::tma_store_wait_read();
            ptx::mbarrier_arrive(base + L::o_empty);
          }
        }
      } else {
        store_o_rows<T, D>(od, inv, o_block, p.o_row_stride, row_base, rows_q, p.head_dim_v, t4);
      }
      if (kt.any()) ++q_iter;
#pragma unroll
      for (int hh = 0; hh < 2; ++hh) {
        const int r = row_base + 8 * hh;
        if (r < rows_q && p.lse != nullptr && t4 == 0) {
          const float lse = sum[hh] > 0.f ? (row_max[hh] + log2f(sum[hh])) * 0.6931471805599453f : -INFINITY;
          p.lse[tc.b * p.lse_batch_stride + std::int64_t(tc.h) * p.lse_head_stride + seq.q0 + m0 + r] = lse;
        }
      }
    }
    // The last consumer passed the turn to consumer 0 once more than consumer 0
    // took it; take it so the barrier ends the kernel balanced.
    if (c == 0) turn_sync();
    // Shared memory must outlive the reads of the last O store.
    if (issuer) ptx::tma_store_wait_read();
  }
#endif
}

}  // namespace flashpp::cuda::sm90
