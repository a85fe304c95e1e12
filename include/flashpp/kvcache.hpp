#pragma once
// Inference attention against a KV cache: decoding (seqlen_q = 1), speculative
// decoding and chunked prefill (a few query tokens), with the cache either
// contiguous or paged.
//
//   q            (batch, seqlen_q, heads_q, head_dim)
//   k_cache      contiguous: (batch_cache, seqlen_cache, heads_kv, head_dim)
//                paged:      (num_pages, page_size, heads_kv, head_dim)
//   v_cache      the same with head_dim_v
//   block_table  int32 (batch, max_pages_per_seq): page j of sequence b is
//                block_table[b][j]; given = paged cache
//   cache_seqlens int32 (batch,): tokens already in sequence b's cache
//   cache_batch_idx int32 (batch,): which cache row sequence b uses
//                (contiguous cache only; default b)
//   k_new, v_new (batch, seqlen_new, heads_kv, head_dim[_v]): appended in place
//                at positions [cache_seqlens[b], cache_seqlens[b] + seqlen_new)
//                before attention
//   rotary_cos/sin (seqlen_ro, rotary_dim / 2): rotary embedding applied to
//                k_new at its cache positions and to q (at cache_seqlens[b] + i
//                when causal or windowed, at cache_seqlens[b] otherwise),
//                interleaved (GPT-J pairs 2i, 2i+1) or not (GPT-NeoX pairs
//                i, i + rotary_dim / 2); dims past rotary_dim are unchanged
//   out          (batch, seqlen_q, heads_q, head_dim_v); lse optional fp32
//                (batch, heads_q, seqlen_q)
//
// Sequence b attends over seqlen_k = cache_seqlens[b] + seqlen_new keys;
// causal masks, sliding windows and softcap follow AttentionOptions with the
// bottom-right alignment of forward(). Rows that see no key get O = 0 and
// LSE = -inf. Cache slots outside the appended range are never written.
//
// On CUDA the call never synchronizes with the host and never allocates, so it
// can be captured in a CUDA graph: scratch comes from the caller's workspace
// (kvcache_workspace_bytes). The contents of cache_seqlens, cache_batch_idx
// and block_table are then only known on the device; host-side checks cover
// them where they live in host memory (CPU tensors), and validate_on_device
// turns on the device-side checks described below.
#include <cstddef>
#include <cstdint>
#include <string>

#include "flashpp/attention.hpp"
#include "flashpp/error.hpp"
#include "flashpp/options.hpp"
#include "flashpp/tensor.hpp"

namespace flashpp {

struct KVCacheArgs {
  TensorView q, k_cache, v_cache;
  TensorView k_new, v_new;  // optional, both or neither
  TensorView cache_seqlens;    // optional int32 (batch,); required with k_new. Default: full capacity
  TensorView cache_batch_idx;  // optional int32 (batch,), contiguous cache only
  TensorView block_table;      // optional int32 (batch, max_pages_per_seq): paged cache
  TensorView rotary_cos, rotary_sin;  // optional, both or neither; need k_new
  TensorView out, lse;                // lse optional
  bool rotary_interleaved = false;
  // Number of key splits (flash-decoding); 0 chooses from the SM count and
  // the work per sequence. Partial results are merged exactly.
  int num_splits = 0;
  // Device-side checks of cache_seqlens / cache_batch_idx / block_table and
  // rotary positions. A sequence that fails them is skipped (its output rows
  // are 0, LSE -inf, nothing is appended) and the first failure is recorded
  // in validation_status, int32 (4,) on the tensors' device, which the call
  // clears first. Read it with check_kvcache_status() once the stream is done.
  bool validate_on_device = false;
  TensorView validation_status;
  // Optional int32 (n,) with n >= batch * heads_q * seqlen_q, on q's device:
  // the arrival counters of the split merge, owned by the caller. Zero-fill it
  // once before its first use; every call leaves it zero-filled again, so a
  // call given it skips clearing its counters (one memset node less per decode
  // step in a CUDA graph). Without it the counters live in the workspace and
  // are cleared by each call. One call at a time per buffer (calls on one
  // stream are fine; concurrent streams need a buffer each). Ignored on the CPU.
  TensorView split_counters;
};

// Scratch bytes attention_with_kvcache needs (split-KV partial results).
std::size_t kvcache_workspace_bytes(const KVCacheArgs& args, const AttentionOptions& opts = {});

void attention_with_kvcache(const KVCacheArgs& args, const AttentionOptions& opts = {},
                            Workspace workspace = {});

// The number of key splits a call with these arguments will use.
int kvcache_num_splits(const KVCacheArgs& args, const AttentionOptions& opts = {});

// Which backend/kernel would run these arguments, or why none can.
Selection select_kvcache(const KVCacheArgs& args, const AttentionOptions& opts = {});

// Failure codes written to validation_status[0]; [1] is the sequence,
// [2] the index inside the offending tensor, [3] the offending value.
enum class KVCacheFault : std::int32_t {
  none = 0,
  cache_seqlen_out_of_range = 1,  // cache_seqlens[b] < 0 or + seqlen_new > capacity
  batch_idx_out_of_range = 2,     // cache_batch_idx[b] outside [0, batch_cache)
  page_out_of_range = 3,          // block_table[b][j] outside [0, num_pages)
  rotary_out_of_range = 4,        // a rotary position >= seqlen_ro
};

// Reads a validation_status tensor (synchronizing on `stream` for CUDA
// tensors) and throws flashpp::Error naming the argument of the recorded
// failure; returns normally when none was recorded.
void check_kvcache_status(const TensorView& validation_status, void* stream = nullptr);

// The message check_kvcache_status would throw for these four status words
// (empty when code is none).
std::string describe_kvcache_status(const std::int32_t status[4]);

}  // namespace flashpp
