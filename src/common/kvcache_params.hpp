#pragma once
// The parameter block of attention with a KV cache, filled once by
// src/api/kvcache_validate.cpp and read by the CPU backend and the CUDA decode
// kernels. Plain data only (passed to kernels as __grid_constant__).
//
// `attn` reuses the prefill block for what the two share: q/out/lse pointers
// and strides, sizes, scale, window, softcap and dtype. Its k/v fields describe
// the cache: k_batch_stride is the stride between cache rows (contiguous) or
// pages (paged), k_row_stride between slots; seqlen_k is the capacity of one
// sequence (seqlen_cache, or max_pages_per_seq * page_size).
#include <cmath>
#include <cstdint>

#include "common/params.hpp"

#ifndef FLASHPP_HD
#if defined(__CUDACC__)
#define FLASHPP_HD __host__ __device__ __forceinline__
#else
#define FLASHPP_HD inline
#endif
#endif

namespace flashpp {

struct KVCacheParams {
  AttnParams attn;

  // ---- cache geometry ----
  int batch_cache = 0;  // contiguous: rows of the cache; paged: 0
  int num_pages = 0;    // paged: pages in the pool
  int page_size = 0;    // paged: slots per page (any value >= 1)
  int page_shift = -1;  // log2(page_size) when it is a power of two, else -1
  int max_pages = 0;    // paged: block_table columns
  int capacity = 0;     // slots one sequence can hold
  const std::int32_t* block_table = nullptr;  // null: contiguous cache
  std::int64_t block_table_stride = 0;        // elements between sequences' rows
  const std::int32_t* cache_seqlens = nullptr;  // null: every sequence is full (capacity)
  const std::int32_t* cache_batch_idx = nullptr;  // null: sequence b uses cache row b

  // ---- appended tokens ----
  const void* k_new = nullptr;  // null: nothing to append (seqlen_new = 0)
  const void* v_new = nullptr;
  int seqlen_new = 0;
  std::int64_t kn_batch_stride = 0, kn_row_stride = 0, kn_head_stride = 0;
  std::int64_t vn_batch_stride = 0, vn_row_stride = 0, vn_head_stride = 0;

  // ---- rotary embedding (cos/sin rows of rotary_dim / 2 entries, q's dtype) ----
  const void* rotary_cos = nullptr;  // null: no rotary
  const void* rotary_sin = nullptr;
  std::int64_t rotary_cos_stride = 0, rotary_sin_stride = 0;  // elements between positions
  int rotary_dim = 0;
  int seqlen_ro = 0;
  bool rotary_interleaved = false;
  // q rows sit at their own positions (cache_seqlens[b] + i) when causal or
  // windowed, otherwise all at cache_seqlens[b] (as flash_attn does).
  bool rotary_q_per_row = false;

  // ---- execution ----
  int num_splits = 1;  // resolved, >= 1
  bool validate_on_device = false;
  std::int32_t* validation_status = nullptr;  // 4 words on the tensors' device
  // Caller-owned split-merge counters, zero before the call and left zero by it
  // (KVCacheArgs::split_counters); null: counters in the workspace, cleared per call.
  std::int32_t* split_counters = nullptr;

  FLASHPP_HD bool paged() const { return block_table != nullptr; }
};

// Tokens in sequence b's cache before the call.
FLASHPP_HD int cache_len(const KVCacheParams& p, int b) { return p.cache_seqlens ? p.cache_seqlens[b] : p.capacity; }

// Element offset (before the head offset) of slot j of sequence b, for a
// tensor with the cache's page/row strides. Reads block_table or
// cache_batch_idx, so it runs where those live.
FLASHPP_HD std::int64_t cache_slot_offset(const KVCacheParams& p, int b, int j, std::int64_t batch_stride,
                                          std::int64_t row_stride) {
  if (p.block_table != nullptr) {
    const int page = p.block_table[b * p.block_table_stride + j / p.page_size];
    return std::int64_t(page) * batch_stride + std::int64_t(j % p.page_size) * row_stride;
  }
  const int row = p.cache_batch_idx ? p.cache_batch_idx[b] : b;
  return std::int64_t(row) * batch_stride + std::int64_t(j) * row_stride;
}

// Keys [lo, hi) cut into num_splits pieces of whole `tile`-key tiles (tiles
// counted from key 0, so a piece never shares a tile with its neighbour).
// Piece s may be empty; together they cover [lo, hi) exactly once.
struct KeySpan {
  int lo, hi;
};
// The divisions are 32-bit (tile counts and the rounded-up sum fit in 32
// unsigned bits; a 64-bit division is a long software sequence on the GPU,
// paid at the start of every decode block); the products are 64-bit.
FLASHPP_HD KeySpan split_span(int lo, int hi, int tile, int num_splits, int s) {
  if (lo >= hi) return {0, 0};
  const unsigned t_lo = unsigned(lo) / unsigned(tile);
  const unsigned t_hi = unsigned(hi) / unsigned(tile) + (unsigned(hi) % unsigned(tile) != 0u);
  const unsigned per = (t_hi - t_lo + unsigned(num_splits) - 1u) / unsigned(num_splits);
  std::int64_t a = (std::int64_t(t_lo) + std::int64_t(s) * per) * tile, e = (std::int64_t(t_lo) + std::int64_t(s + 1) * per) * tile;
  a = a < lo ? lo : a;
  e = e > hi ? hi : e;
  return a < e ? KeySpan{int(a), int(e)} : KeySpan{0, 0};
}

// Split count for `blocks` thread blocks of up to `tiles` key tiles each on a
// device that keeps `slots` of them streaming at once. One split when the
// blocks already fill most of the slots; otherwise the smallest count whose
// last wave is nearly full (within 5% of the best), keeping at least four
// tiles per split so a block's pipeline ramp stays small next to its stream.
inline int choose_num_splits(std::int64_t blocks, int tiles, int slots, int max_splits) {
  if (blocks <= 0 || tiles <= 1 || slots <= 0 || blocks * 5 >= std::int64_t(slots) * 4) return 1;
  int cap = tiles / 4;
  cap = cap < max_splits ? cap : max_splits;
  if (cap <= 1) return 1;
  auto efficiency = [&](int s) {
    const double waves = double(blocks) * s / slots;
    return waves / std::ceil(waves);
  };
  double best = 0;
  for (int s = 1; s <= cap; ++s) best = efficiency(s) > best ? efficiency(s) : best;
  for (int s = 1; s <= cap; ++s)
    if (efficiency(s) >= 0.95 * best) return s;
  return 1;
}

}  // namespace flashpp
