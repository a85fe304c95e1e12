#pragma once
// The first keys of a decode block's split, prefetched into L2 before the
// block waits for the kernel ahead of it on the stream (sm90, programmatic
// dependent launch). Launched early, the block would otherwise sit idle at the
// wait while the previous kernel's tail (its last blocks' merges) leaves HBM
// mostly unused; the prefetch moves the first tiles' HBM reads into that
// window, so the block's first tiles come from L2 once it may start.
//
// Nothing read here may be trusted: cache_seqlens, cache_batch_idx and
// block_table may still be written by the kernel before. They only choose
// addresses to prefetch (clamped into the cache, so every address is inside
// it), and are read through L2 (ld.global.cg) so no stale copy stays in this
// SM's L1 for the reads after the wait. A stale value costs a useless
// prefetch, never a wrong result: the attention reads everything again after
// the wait, and L2 holds whatever the previous kernel wrote.
#include <cstdint>

#include "common/kvcache_params.hpp"
#include "common/mask.hpp"
#include "cuda/decode/decode_args.hpp"
#include "cuda/ptx/prefetch.cuh"

namespace flashpp::cuda::decode {

// Block-uniform arguments; every thread calls it. BN: the kernel's key tile
// (the split spans are cut in whole tiles of it).
template <int BN, int kThreads>
__device__ __forceinline__ void prefetch_split_start(const DecodeArgs& args, int b, int hk, int split, int i_first,
                                                     int i_last) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const KVCacheParams& p = args.p;
  const AttnParams& a = p.attn;
  int len = p.cache_seqlens != nullptr ? __ldcg(p.cache_seqlens + b) : p.capacity;
  len = min(max(len, 0), p.capacity);
  const int seqlen_k = min(len + p.seqlen_new, p.capacity);
  const VisibleRange vf = visible_keys(i_first, a.seqlen_q, seqlen_k, a.window_left, a.window_right);
  const VisibleRange vl = visible_keys(i_last, a.seqlen_q, seqlen_k, a.window_left, a.window_right);
  if (vf.lo >= vl.hi) return;
  const KeySpan span = split_span(int(vf.lo), int(vl.hi), BN, p.num_splits, split);
  const int keys = min(span.hi - span.lo, args.prefetch_keys);
  if (keys <= 0) return;

  const bool paged = p.block_table != nullptr;
  std::int64_t cache_row = 0;
  if (!paged) {
    cache_row = p.cache_batch_idx != nullptr ? __ldcg(p.cache_batch_idx + b) : b;
    if (cache_row < 0 || cache_row >= p.batch_cache) return;
  }
  const std::int32_t* table = paged ? p.block_table + b * p.block_table_stride : nullptr;
  const char* k_head = static_cast<const char*>(a.k) + 2 * std::int64_t(hk) * a.k_head_stride;
  const char* v_head = static_cast<const char*>(a.v) + 2 * std::int64_t(hk) * a.v_head_stride;
  const std::uint32_t k_bytes = std::uint32_t(2 * a.head_dim) & ~15u, v_bytes = std::uint32_t(2 * a.head_dim_v) & ~15u;
  // One bulk prefetch per (key, K or V) row: the head's row is contiguous.
  for (int idx = threadIdx.x; idx < 2 * keys; idx += kThreads) {
    const int j = span.lo + (idx >> 1);
    const bool is_v = idx & 1;
    std::int64_t row, slot;
    if (paged) {
      const int pi = p.page_shift >= 0 ? j >> p.page_shift : j / p.page_size;
      if (pi >= p.max_pages) continue;
      row = __ldcg(table + pi);
      if (row < 0 || row >= p.num_pages) continue;
      slot = j - std::int64_t(pi) * p.page_size;
    } else {
      row = cache_row;
      slot = j;
    }
    const std::int64_t elems = is_v ? row * a.v_batch_stride + slot * a.v_row_stride
                                    : row * a.k_batch_stride + slot * a.k_row_stride;
    const std::uint32_t bytes = is_v ? v_bytes : k_bytes;
    if (bytes != 0) ptx::prefetch_l2_bulk((is_v ? v_head : k_head) + 2 * elems, bytes);
  }
#endif
}

}  // namespace flashpp::cuda::decode
