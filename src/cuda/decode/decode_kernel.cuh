#pragma once
// Split-KV decode attention: one block per (sequence, kv head, split, row
// block). The block's rows are the query heads that share the kv head times
// the query positions (GQA packing), so each K/V tile crosses HBM once for all
// of them. K/V tiles stream through a STAGES-deep cp.async ring straight from
// the cache, contiguous or paged (each 16-byte chunk finds its page through
// the page ids of the split's span, staged in shared memory up front by one
// coalesced load, so no tile issue waits on block_table). Each warp owns
// keys_per_warp keys of every tile with its own online softmax; at the end the
// warps merge in shared memory and the block writes either the final rows or
// its split's partial (O, LSE); the last split block of the group to finish
// merges the partials (split_combine.cuh).
#include <cuda_runtime.h>

#include <climits>
#include <cmath>
#include <cstdint>

#include "common/kvcache_params.hpp"
#include "common/mask.hpp"
#include "common/rotary.hpp"
#include "cuda/common/element.cuh"
#include "cuda/common/online_softmax.cuh"
#include "cuda/common/scores.cuh"
#include "cuda/common/smem_tile.cuh"
#include "cuda/common/warp_gemm.cuh"
#include "cuda/decode/decode_args.hpp"
#include "cuda/decode/cluster_merge.cuh"
#include "cuda/decode/decode_config.hpp"
#include "cuda/decode/phase_trace.cuh"
#include "cuda/decode/span_prefetch.cuh"
#include "cuda/decode/split_combine.cuh"
#include "cuda/decode/validation.cuh"
#include "cuda/ptx/atomic.cuh"
#include "cuda/ptx/cluster.cuh"
#include "cuda/ptx/cp_async.cuh"
#include "cuda/ptx/grid_dependency.cuh"
#include "cuda/ptx/math.cuh"

namespace flashpp::cuda::decode {

template <int D, int MT, bool WIDE>
struct DecodeSmem {
  static constexpr DecodeTiles kT = decode_tiles(D, WIDE);
  static constexpr int kWarps = kT.warps;
  static constexpr int kRows = 16 * MT;
  using QTile = SmemTile<kRows, D>;
  using KVTile = SmemTile<kT.block_n(), D>;
  union Ring {
    struct {
      alignas(128) unsigned char k[kT.stages][KVTile::kBytes];
      alignas(128) unsigned char v[kT.stages][KVTile::kBytes];
    } tiles;
    struct {
      alignas(128) float merge[kWarps][kRows][D + 4];
      alignas(16) float part[kRows][D];  // cluster merge: this split's partial O
      float part_lse2[kRows];            // and its LSEs (log2 domain)
    } out;
  };
  Ring ring;
  alignas(128) unsigned char q[QTile::kBytes];
  float warp_lse2[kWarps][kRows];  // the warps' row LSEs (log2 domain), merged after the loop
  std::int32_t page_ids[kT.page_ids];
};

// Cache slot -> page arithmetic; power-of-two page sizes take shifts.
struct PageMap {
  int shift, size;
  __device__ __forceinline__ int page(int j) const { return shift >= 0 ? j >> shift : j / size; }
  __device__ __forceinline__ int slot(int j, int page) const { return j - page * size; }
};

template <typename T, int D, int MT, bool WIDE>
__global__ void __launch_bounds__(decode_tiles(D, WIDE).threads(), decode_tiles(D, WIDE).blocks_per_sm)
    decode_kernel(const __grid_constant__ DecodeArgs args) {
  using Smem = DecodeSmem<D, MT, WIDE>;
  using QTile = typename Smem::QTile;
  using KVTile = typename Smem::KVTile;
  constexpr DecodeTiles kT = decode_tiles(D, WIDE);
  constexpr int kWarps = kT.warps, kThreads = kT.threads();
  constexpr int BN = kT.block_n(), KPW = kT.keys_per_warp, S = kT.stages, ROWS = 16 * MT, IDS = kT.page_ids;
  constexpr int NS = KPW / 8, NO = D / 8, CH = D / 8;
  constexpr int kRowStep = kThreads / CH;   // tile rows one pass of the block covers
  constexpr int kSteps = BN / kRowStep;     // passes per tile = rows each thread copies
  static_assert(kThreads % CH == 0 && BN % kRowStep == 0, "copy passes must tile the K/V tile");
  static_assert(sizeof(Smem) == smem_bytes(kT, MT), "shared-memory struct must match the tile table");

  extern __shared__ __align__(128) unsigned char smem_raw[];
  Smem& sm = *reinterpret_cast<Smem*>(smem_raw);

  const KVCacheParams& p = args.p;
  const AttnParams& a = p.attn;
  const int b = blockIdx.x / a.heads_kv, hk = blockIdx.x % a.heads_kv;
  const int split = blockIdx.y;
  const int row0 = blockIdx.z * ROWS;
  const int rows = min(ROWS, args.rows_per_kv_head - row0);
  const int gq = a.gqa_ratio;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, t4 = lane & 3;
  const int wl = a.window_left, wr = a.window_right;

  const int i_first = row0 / gq, i_last = (row0 + rows - 1) / gq;

  // Launched as a programmatic dependent (sm90): everything after the wait may
  // read what the previous kernel on the stream wrote (the appended keys, q,
  // the tables); before it, only L2 prefetches of the split's first keys. The
  // next kernel may be scheduled once every block has let it (see
  // dependents_tiles_left); it waits for this grid's completion the same way.
  PhaseTrace trace;
  trace.stamp(kPhaseEntry);
  if (args.prefetch_keys > 0) prefetch_split_start<BN, kThreads>(args, b, hk, split, i_first, i_last);
  ptx::wait_prior_grids();
  if (args.dependents_tiles_left < 0) ptx::allow_dependent_launch();
  trace.stamp(kPhaseStart);

  // Q first: it does not depend on the cache length, whose load starts the
  // chain (length -> split span -> tile addresses) to the first tile.
  const std::uint32_t q_s = ptx::smem_u32(sm.q);
  {
    const T* qb = static_cast<const T*>(a.q) + b * a.q_batch_stride;
#pragma unroll
    for (int idx = tid; idx < ROWS * CH; idx += kThreads) {
      const int r = idx / CH, c = idx % CH;
      const bool ok = r < rows && c * 8 < a.head_dim;
      const int pr = row0 + r;
      const T* src = ok ? qb + std::int64_t(pr / gq) * a.q_row_stride + std::int64_t(hk * gq + pr % gq) * a.q_head_stride + c * 8
                        : qb;
      ptx::cp_async_16(q_s + QTile::offset(r, c), src, ok);
    }
    ptx::cp_async_commit_group();
  }
  trace.stamp(kPhaseQIssued);

  // A sequence whose tables fail the device checks attends over nothing.
  const bool valid = !p.validate_on_device || sequence_valid(p, b);
  const int len = valid ? cache_len(p, b) : 0;
  const int seqlen_k = valid ? len + p.seqlen_new : 0;
  trace.stamp_after(kPhaseLength, seqlen_k);

  // Keys the block's rows can see (visible ranges grow with the position),
  // and this split's share of them.
  const VisibleRange vis_first = visible_keys(i_first, a.seqlen_q, seqlen_k, wl, wr);
  const VisibleRange vis_last = visible_keys(i_last, a.seqlen_q, seqlen_k, wl, wr);
  KeySpan span{0, 0};
  if (vis_first.lo < vis_last.hi) span = split_span(int(vis_first.lo), int(vis_last.hi), BN, p.num_splits, split);
  const int tile0 = span.lo / BN * BN;
  const int n_tiles = span.lo < span.hi ? (span.hi - tile0 + BN - 1) / BN : 0;
  trace.stamp_after(kPhaseSpan, n_tiles);
  // The iteration that lets the next kernel launch (n_tiles: after the loop).
  const int dependents_at = args.dependents_tiles_left < 0 ? -1 : max(n_tiles - args.dependents_tiles_left, 0);

  // ---- producers: K/V tiles (Q is in flight already) ----
  const std::uint32_t k_s = ptx::smem_u32(sm.ring.tiles.k[0]);
  const std::uint32_t v_s = ptx::smem_u32(sm.ring.tiles.v[0]);

  const bool paged = p.block_table != nullptr;
  const PageMap pm{p.page_shift, p.page_size};
  const std::int32_t* table = paged ? p.block_table + b * p.block_table_stride : nullptr;
  const int chunk = tid % CH, row_in = tid / CH;
  // Contiguous caches: every slot of the sequence sits at base + j * row_stride.
  const std::int64_t cache_row = paged ? 0 : (p.cache_batch_idx ? p.cache_batch_idx[b] : b);
  const T* k_base = static_cast<const T*>(a.k) + cache_row * a.k_batch_stride + std::int64_t(hk) * a.k_head_stride + chunk * 8;
  const T* v_base = static_cast<const T*>(a.v) + cache_row * a.v_batch_stride + std::int64_t(hk) * a.v_head_stride + chunk * 8;
  const bool k_chunk_ok = chunk * 8 < a.head_dim, v_chunk_ok = chunk * 8 < a.head_dim_v;

  // Paged: page ids [id_base, id_base + IDS) of the span sit in sm.page_ids.
  // The first window covers the S - 1 tiles of the prologue (decode_row_ok);
  // a span longer than the window (small pages, long splits) reloads it in the
  // loop, block-wide, when a tile reaches past its end.
  int id_base = 0, id_end = 0;
  if (paged && span.lo < span.hi) {
    id_base = pm.page(span.lo);
    id_end = pm.page(span.hi - 1) + 1;
  }
  auto load_ids = [&](int first) {
    id_base = first;
    const int n = min(IDS, id_end - first);
    for (int i = tid; i < n; i += kThreads) sm.page_ids[i] = table[first + i];
  };
  // Tile issue. A warp spends most of its instructions here (one warp per
  // scheduler, so each instruction's latency is exposed): full tiles take
  // one address per tile plus a fixed row step when the tile's slots are
  // evenly spaced (a contiguous cache, or a page that holds the whole tile),
  // or a shift-and-mask page lookup per row for power-of-two pages smaller
  // than a tile. Edge tiles of the span and other page sizes take the
  // general path, which checks every row.
  const std::int64_t k_row_step = std::int64_t(kRowStep) * a.k_row_stride;
  const std::int64_t v_row_step = std::int64_t(kRowStep) * a.v_row_stride;
  const bool tile_in_page = !paged || p.page_size % BN == 0;
  const bool pow2_pages = paged && p.page_shift >= 0;
  auto issue_general = [&](int n0, std::uint32_t ks, std::uint32_t vs) {
#pragma unroll
    for (int k = 0; k < kSteps; ++k) {
      const int r = row_in + k * kRowStep, j = n0 + r;
      const bool in = j >= span.lo && j < span.hi;
      std::int64_t ko = 0, vo = 0;
      if (paged) {
        if (in) {
          const int pg = pm.page(j);
          const std::int64_t page = sm.page_ids[pg - id_base];
          const int slot = pm.slot(j, pg);
          ko = page * a.k_batch_stride + std::int64_t(slot) * a.k_row_stride;
          vo = page * a.v_batch_stride + std::int64_t(slot) * a.v_row_stride;
        }
      } else {
        ko = std::int64_t(j) * a.k_row_stride;
        vo = std::int64_t(j) * a.v_row_stride;
      }
      ptx::cp_async_16(ks + KVTile::offset(r, chunk), in && k_chunk_ok ? k_base + ko : k_base, in && k_chunk_ok);
      ptx::cp_async_16(vs + KVTile::offset(r, chunk), in && v_chunk_ok ? v_base + vo : v_base, in && v_chunk_ok);
    }
  };
  auto issue = [&](int t, int stage) {
    const int n0 = tile0 + t * BN;
    const std::uint32_t ks = k_s + stage * KVTile::kBytes, vs = v_s + stage * KVTile::kBytes;
    const bool full = n0 >= span.lo && n0 + BN <= span.hi;
    if (full && tile_in_page) {
      std::int64_t ko, vo;
      if (paged) {
        const int pg = pm.page(n0);
        const std::int64_t page = sm.page_ids[pg - id_base];
        const int slot = pm.slot(n0, pg) + row_in;
        ko = page * a.k_batch_stride + std::int64_t(slot) * a.k_row_stride;
        vo = page * a.v_batch_stride + std::int64_t(slot) * a.v_row_stride;
      } else {
        ko = std::int64_t(n0 + row_in) * a.k_row_stride;
        vo = std::int64_t(n0 + row_in) * a.v_row_stride;
      }
      const T* kp = k_base + ko;
      const T* vp = v_base + vo;
#pragma unroll
      for (int k = 0; k < kSteps; ++k) {
        const int r = row_in + k * kRowStep;
        ptx::cp_async_16(ks + KVTile::offset(r, chunk), k_chunk_ok ? kp : k_base, k_chunk_ok);
        ptx::cp_async_16(vs + KVTile::offset(r, chunk), v_chunk_ok ? vp : v_base, v_chunk_ok);
        kp += k_row_step;
        vp += v_row_step;
      }
    } else if (full && pow2_pages) {
      const int mask = p.page_size - 1;
#pragma unroll
      for (int k = 0; k < kSteps; ++k) {
        const int r = row_in + k * kRowStep, j = n0 + r;
        const std::int64_t page = sm.page_ids[(j >> p.page_shift) - id_base];
        const std::int64_t slot = j & mask;
        const T* kp = k_base + (page * a.k_batch_stride + slot * a.k_row_stride);
        const T* vp = v_base + (page * a.v_batch_stride + slot * a.v_row_stride);
        ptx::cp_async_16(ks + KVTile::offset(r, chunk), k_chunk_ok ? kp : k_base, k_chunk_ok);
        ptx::cp_async_16(vs + KVTile::offset(r, chunk), v_chunk_ok ? vp : v_base, v_chunk_ok);
      }
    } else {
      issue_general(n0, ks, vs);
    }
  };

  if (id_end > 0) {
    load_ids(id_base);
    __syncthreads();
  }
  // Not unrolled: one copy of the issue code here and one in the loop keep the
  // kernel's instructions fewer (cold code costs instruction fetches every launch).
#pragma unroll 1
  for (int st = 0; st < S - 1; ++st) {
    if (st < n_tiles) issue(st, st);
    ptx::cp_async_commit_group();
  }
  trace.stamp(kPhaseTilesIssued);

  // Q has landed (only the S - 1 tile groups may still be in flight).
  ptx::cp_async_wait_group<S - 1>();
  __syncthreads();
  trace.stamp(kPhasePrologue);
  if (p.rotary_cos != nullptr && valid) {
    const int half = p.rotary_dim / 2;
    const T* cs = static_cast<const T*>(p.rotary_cos);
    const T* sn = static_cast<const T*>(p.rotary_sin);
    for (int idx = tid; idx < rows * half; idx += kThreads) {
      const int r = idx / half, pr = idx % half;
      const int pos = rotary_q_position(len, (row0 + r) / gq, p.rotary_q_per_row);
      const RotaryPair e = rotary_pair(pr, p.rotary_dim, p.rotary_interleaved);
      T* xa = reinterpret_cast<T*>(sm.q + QTile::offset(r, e.a / 8) + (e.a % 8) * 2);
      T* xb = reinterpret_cast<T*>(sm.q + QTile::offset(r, e.b / 8) + (e.b % 8) * 2);
      float fa = Element<T>::to_float(*xa), fb = Element<T>::to_float(*xb);
      rotate_pair(fa, fb, Element<T>::to_float(cs[std::int64_t(pos) * p.rotary_cos_stride + pr]),
                  Element<T>::to_float(sn[std::int64_t(pos) * p.rotary_sin_stride + pr]));
      *xa = Element<T>::from_float(fa);
      *xb = Element<T>::from_float(fb);
    }
    __syncthreads();
  }

  // ---- per-row visibility inside the span ----
  // Padding rows (r >= rows) have zero Q, hence finite scores; they are never
  // written, so they skip masking.
  int rlo[MT][2], rhi[MT][2];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      const int r = mt * 16 + g + 8 * hh;
      if (r < rows) {
        const VisibleRange vr = visible_keys((row0 + r) / gq, a.seqlen_q, seqlen_k, wl, wr);
        rlo[mt][hh] = max(int(vr.lo), span.lo);
        rhi[mt][hh] = min(int(vr.hi), span.hi);
      } else {
        rlo[mt][hh] = INT_MIN;
        rhi[mt][hh] = INT_MAX;
      }
    }
  // Keys every real row sees: a warp's sub-tile inside them needs no mask.
  const int lo_all = max(span.lo, int(vis_last.lo));
  const int hi_all = min(span.hi, int(vis_first.hi));

  const ScoreMap smap = ScoreMap::from(a);
  float o[MT][NO][4];
  zero(o);
  OnlineSoftmax<MT> softmax;
  softmax.init();

  for (int it = 0; it < n_tiles; ++it) {
    ptx::cp_async_wait_group<S - 2>();
    // Tile `it` has landed for every thread, and every warp is done with the
    // stage the next prefetch overwrites (it held tile it - 1).
    __syncthreads();
    if (it == 0) trace.stamp(kPhaseFirstTile);
    if (it == dependents_at) ptx::allow_dependent_launch();
    const int next = it + S - 1;
    if (next < n_tiles) {
      // Every thread is past its issues of earlier tiles (the barrier above),
      // so the window may move.
      const int last_key = min(tile0 + (next + 1) * BN, span.hi) - 1;
      if (id_end > 0 && pm.page(last_key) >= id_base + IDS) {
        load_ids(pm.page(max(tile0 + next * BN, span.lo)));
        __syncthreads();
      }
      issue(next, next % S);
    }
    ptx::cp_async_commit_group();

    const int stage = it % S;
    const int kw0 = tile0 + it * BN + warp * KPW;
    float s[MT][NS][4];
    zero(s);
    gemm_ss<T, QTile, Major::mk, KVTile, Major::mk, MT, NS, D / 16>(s, q_s, 0, 0, k_s + stage * KVTile::kBytes,
                                                                   warp * KPW, 0, lane);
    smap.apply(s);
    if (kw0 < lo_all || kw0 + KPW > hi_all) {
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int nt = 0; nt < NS; ++nt)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int key = kw0 + nt * 8 + 2 * t4 + (e & 1), hh = e >> 1;
            if (key < rlo[mt][hh] || key >= rhi[mt][hh]) s[mt][nt][e] = -INFINITY;
          }
    }
    softmax.update_lazy(s, o);
    std::uint32_t pa[MT][NS / 2][4];
    acc_to_a<T>(pa, s);
    gemm_rs<T, KVTile, Major::km, MT, NO, NS / 2>(o, pa, v_s + stage * KVTile::kBytes, 0, warp * KPW, lane);
  }

  // ---- merge the warps ----
  // Each warp's rows keep (m_w, l_w, o_w) in the log2 domain (o_w and l_w are
  // sums of 2^(s - m_w)); the warps publish lse2_w = m_w + log2 l_w. With M the
  // max of lse2_w and L = sum_w 2^(lse2_w - M), the block's row is
  // sum_w o_w 2^(m_w - M) / L and its LSE (M + log2 L) ln 2: the sums of
  // common/lse_merge.hpp, written with the exp2/log2/rcp instructions (this
  // runs once per block, on the critical path of a batch-1 step). A row no
  // warp saw a key of has M = -inf: L = 0, O = 0, LSE = -inf.
  if (dependents_at >= n_tiles) ptx::allow_dependent_launch();
  ptx::cp_async_wait_group<0>();
  __syncthreads();  // the ring becomes the merge buffer
  trace.stamp(kPhaseLoopEnd);
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      const float l = quad_sum(softmax.sum[mt][hh]);
      if (t4 == 0) sm.warp_lse2[warp][mt * 16 + g + 8 * hh] = l > 0.f ? softmax.max[mt][hh] + __log2f(l) : -INFINITY;
    }
  __syncthreads();
  trace.stamp(kPhaseWarpLse);
  // M and L of row r from the warps' lse2 values.
  auto block_row = [&](int r, float& m_all, float& l_all) {
    m_all = -INFINITY;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) m_all = fmaxf(m_all, sm.warp_lse2[w][r]);
    l_all = 0.f;
    if (m_all != -INFINITY) {
#pragma unroll
      for (int w = 0; w < kWarps; ++w) l_all += ptx::ex2_approx(sm.warp_lse2[w][r] - m_all);
    }
  };
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      const int r = mt * 16 + g + 8 * hh;
      float m_all, l_all;
      block_row(r, m_all, l_all);
      const float f = l_all > 0.f ? ptx::ex2_approx(softmax.max[mt][hh] - m_all) * __frcp_rn(l_all) : 0.f;
      float* dst = sm.ring.out.merge[warp][r];
#pragma unroll
      for (int nt = 0; nt < NO; ++nt) {
        dst[nt * 8 + 2 * t4] = o[mt][nt][2 * hh] * f;
        dst[nt * 8 + 2 * t4 + 1] = o[mt][nt][2 * hh + 1] * f;
      }
    }
  __syncthreads();
  trace.stamp(kPhaseWarpMerge);

  // ---- write: final rows (one split), this split's partial to L2, or, in a
  // cluster launch, the partial to this block's shared memory ----
  const bool final_rows = p.num_splits == 1, in_cluster = args.cluster_splits > 0;
  const int dv = a.head_dim_v;
  for (int idx = tid; idx < rows * (D / 4); idx += kThreads) {
    const int r = idx / (D / 4), c = (idx % (D / 4)) * 4;
    if (c >= dv) continue;
    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      const float4 x = *reinterpret_cast<const float4*>(&sm.ring.out.merge[w][r][c]);
      acc.x += x.x;
      acc.y += x.y;
      acc.z += x.z;
      acc.w += x.w;
    }
    float lse2 = -INFINITY;
    if (c == 0) {
      float m_all, l_all;
      block_row(r, m_all, l_all);
      if (l_all > 0.f) lse2 = m_all + __log2f(l_all);
    }
    if (in_cluster) {
      *reinterpret_cast<float4*>(&sm.ring.out.part[r][c]) = acc;
      if (c == 0) sm.ring.out.part_lse2[r] = lse2;
      continue;
    }
    const float lse = lse2 * 0.69314718055994531f;  // -inf stays -inf
    const int pr = row0 + r, i = pr / gq, h = hk * gq + pr % gq;
    if (final_rows) {
      T* dst = static_cast<T*>(a.o) + b * a.o_batch_stride + std::int64_t(i) * a.o_row_stride +
               std::int64_t(h) * a.o_head_stride + c;
      uint2 packed;
      packed.x = Element<T>::pack(acc.x, acc.y);
      packed.y = Element<T>::pack(acc.z, acc.w);
      *reinterpret_cast<uint2*>(dst) = packed;
      if (c == 0 && a.lse != nullptr)
        a.lse[b * a.lse_batch_stride + std::int64_t(h) * a.lse_head_stride + i] = lse;
    } else {
      const std::int64_t prow = std::int64_t(split) * args.part_rows + (std::int64_t(b) * a.heads_q + h) * a.seqlen_q + i;
      *reinterpret_cast<float4*>(args.o_part + prow * dv + c) = acc;
      if (c == 0) args.lse_part[prow] = lse;
    }
  }
  trace.stamp(kPhaseWritten);
  if (in_cluster) {
    ptx::cluster_sync();  // every split's partial is in its block's shared memory
    trace.stamp(kPhaseArrived);
    merge_cluster_partials<T, D>(args, b, hk, row0, rows, ptx::smem_u32(&sm.ring.out.part[0][0]),
                                 ptx::smem_u32(&sm.ring.out.part_lse2[0]));
    trace.merged();
    trace.exit();
    return;
  }
  if (final_rows) {
    trace.exit();
    return;
  }

  // ---- split blocks: the last of the group to arrive merges ----
  // Thread 0 counts the block's arrival with one acquire-release atomic after
  // the barrier: release makes every thread's partial stores (ordered before
  // it by the barrier) visible device-wide first; acquire, in the last block,
  // orders every other split's partials before the merge's loads (the barrier
  // below hands that on to the other threads).
  __syncthreads();
  // The last block resets its counter: every split has counted by then, so the
  // counters are zero again for the next call (caller-owned counters rely on it).
  int* arrivals = &args.split_arrivals[blockIdx.x * gridDim.z + blockIdx.z];
  bool last = false;
  if (tid == 0) {
    last = ptx::atomic_add_acq_rel_gpu(arrivals, 1) == p.num_splits - 1;
    if (last) *arrivals = 0;
  }
  const bool merging = __syncthreads_or(last);
  trace.stamp(kPhaseArrived);
  if (!merging) {
    trace.exit();
    return;
  }
  merge_split_partials<T, D>(args, b, hk, row0, rows);
  trace.merged();
  trace.exit();
}

// Opts `kernel` in to the shared memory of its launches: `bytes`, or the cluster
// launch's floor where the device has that much (the same value from every
// caller, so concurrent first calls cannot undo each other).
template <class Kernel>
cudaError_t opt_in_smem(Kernel kernel, std::size_t bytes) {
  int device = 0, optin = 0;
  cudaError_t e = cudaGetDevice(&device);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device);
  if (e != cudaSuccess) return e;
  const std::size_t want = cluster_launch_smem(bytes) <= std::size_t(optin) ? cluster_launch_smem(bytes) : bytes;
  return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(want));
}

template <typename T, int D, int MT, bool WIDE>
cudaError_t prepare_decode_kernel(int* blocks_per_sm) {
  constexpr DecodeTiles kT = decode_tiles(D, WIDE);
  constexpr std::size_t bytes = smem_bytes(kT, MT);
  cudaError_t e = opt_in_smem(decode_kernel<T, D, MT, WIDE>, bytes);
  if (e != cudaSuccess) return e;
  return cudaOccupancyMaxActiveBlocksPerMultiprocessor(blocks_per_sm, decode_kernel<T, D, MT, WIDE>, kT.threads(),
                                                       bytes);
}

// Clusters of `cluster` blocks along grid.y (the splits of one group).
inline cudaLaunchAttribute cluster_attribute(int cluster) {
  cudaLaunchAttribute at = {};
  at.id = cudaLaunchAttributeClusterDimension;
  at.val.clusterDim.x = 1;
  at.val.clusterDim.y = unsigned(cluster);
  at.val.clusterDim.z = 1;
  return at;
}

template <typename T, int D, int MT, bool WIDE>
cudaError_t decode_cluster_fit(int cluster, int* max_clusters) {
  constexpr DecodeTiles kT = decode_tiles(D, WIDE);
  *max_clusters = 0;
  cudaError_t e = opt_in_smem(decode_kernel<T, D, MT, WIDE>, smem_bytes(kT, MT));
  if (e != cudaSuccess) return e;
  if (cluster > 8) {
    e = cudaFuncSetAttribute(decode_kernel<T, D, MT, WIDE>, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
    if (e != cudaSuccess) return e;
  }
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(1, unsigned(cluster), 1);
  cfg.blockDim = dim3(kT.threads());
  cfg.dynamicSmemBytes = cluster_launch_smem(smem_bytes(kT, MT));
  cudaLaunchAttribute attr[1] = {cluster_attribute(cluster)};
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  return cudaOccupancyMaxActiveClusters(max_clusters, decode_kernel<T, D, MT, WIDE>, &cfg);
}

// dependent: launch as a programmatic dependent of the previous kernel on the
// stream (sm90+; the kernel waits for it before reading anything). cluster > 1:
// clusters of that many blocks along grid.y (args.cluster_splits says so).
template <typename T, int D, int MT, bool WIDE>
cudaError_t launch_decode_kernel(const DecodeArgs& args, dim3 grid, cudaStream_t stream, bool dependent,
                                 int cluster) {
  constexpr DecodeTiles kT = decode_tiles(D, WIDE);
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = dim3(kT.threads());
  cfg.dynamicSmemBytes = cluster > 1 ? cluster_launch_smem(smem_bytes(kT, MT)) : smem_bytes(kT, MT);
  cfg.stream = stream;
  cudaLaunchAttribute attr[2];
  int n = 0;
  if (dependent) {
    attr[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[n].val.programmaticStreamSerializationAllowed = 1;
    ++n;
  }
  if (cluster > 1) attr[n++] = cluster_attribute(cluster);
  cfg.attrs = attr;
  cfg.numAttrs = unsigned(n);
  return cudaLaunchKernelEx(&cfg, decode_kernel<T, D, MT, WIDE>, args);
}

template <typename T, int D, int MT, bool WIDE>
AttentionKernel attention_kernel() {
  return {&prepare_decode_kernel<T, D, MT, WIDE>, &decode_cluster_fit<T, D, MT, WIDE>,
          &launch_decode_kernel<T, D, MT, WIDE>, smem_bytes(decode_tiles(D, WIDE), MT)};
}

}  // namespace flashpp::cuda::decode
