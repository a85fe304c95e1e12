#pragma once
// Device-side checks of the tables that only the device can read
// (validate_on_device). Every block that touches sequence b runs the same
// checks, so all of them agree on skipping it; the first failure of the launch
// is recorded in the 4 status words (code, sequence, index, value). Nothing
// here traps: a bad table makes a sequence's output 0, never a crash.
#include <cstdint>

#include "common/kvcache_params.hpp"
#include "flashpp/kvcache.hpp"

namespace flashpp::cuda::decode {

__device__ __forceinline__ void record_fault(const KVCacheParams& p, KVCacheFault code, int b, int index, int value) {
  std::int32_t* st = p.validation_status;
  if (st != nullptr && atomicCAS(st, 0, std::int32_t(code)) == 0) {
    st[1] = b;
    st[2] = index;
    st[3] = value;
  }
}

// Block-wide: true when sequence b's length, cache row, pages and rotary
// positions are all in range. All threads of the block must call it.
__device__ __forceinline__ bool sequence_valid(const KVCacheParams& p, int b) {
  const int len = cache_len(p, b);
  bool ok = true;
  if (threadIdx.x == 0) {
    if (len < 0 || std::int64_t(len) + p.seqlen_new > p.capacity) {
      record_fault(p, KVCacheFault::cache_seqlen_out_of_range, b, 0, len);
      ok = false;
    } else if (p.cache_batch_idx != nullptr &&
               (p.cache_batch_idx[b] < 0 || p.cache_batch_idx[b] >= p.batch_cache)) {
      record_fault(p, KVCacheFault::batch_idx_out_of_range, b, 0, p.cache_batch_idx[b]);
      ok = false;
    } else if (p.rotary_cos != nullptr) {
      const int q_last = p.rotary_q_per_row ? len + (p.attn.seqlen_q > 0 ? p.attn.seqlen_q - 1 : 0) : len;
      const int need = max(len + p.seqlen_new, q_last + 1);
      if (need > p.seqlen_ro) {
        record_fault(p, KVCacheFault::rotary_out_of_range, b, 0, need - 1);
        ok = false;
      }
    }
  }
  if (!__syncthreads_and(ok)) return false;
  if (p.block_table != nullptr) {
    const int pages = (len + p.seqlen_new + p.page_size - 1) / p.page_size;
    for (int j = threadIdx.x; j < pages; j += blockDim.x) {
      const int page = p.block_table[b * p.block_table_stride + j];
      if (page < 0 || page >= p.num_pages) {
        record_fault(p, KVCacheFault::page_out_of_range, b, j, page);
        ok = false;
        break;
      }
    }
  }
  return __syncthreads_and(ok);
}

}  // namespace flashpp::cuda::decode
