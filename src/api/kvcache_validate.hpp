#pragma once
// Argument validation of attention_with_kvcache, shared by every backend. Each
// rule throws flashpp::Error naming the argument; on success the filled
// parameter block comes back with num_splits still unresolved (0 = auto).
//
// Shapes, dtypes, devices, strides and alignment are always checked. The
// contents of cache_seqlens, cache_batch_idx and block_table (capacity, page
// indices, rotary positions) are checked here when they live in host memory;
// device-resident tables are checked by the kernels when validate_on_device
// is set.
#include <cstdint>
#include <string>

#include "common/kvcache_params.hpp"
#include "flashpp/kvcache.hpp"

namespace flashpp::detail {

// Largest num_splits accepted (and chosen).
inline constexpr int kMaxKVSplits = 128;

// need_outputs = false skips out/lse (workspace sizing and select()).
KVCacheParams make_kvcache_params(const KVCacheArgs& args, const AttentionOptions& opts, bool need_outputs);

// The message for a recorded device-side failure (empty for KVCacheFault::none).
std::string kvcache_fault_message(const std::int32_t status[4]);

// The argument a fault code is about ("cache_seqlens", "block_table", ...).
const char* kvcache_fault_argument(std::int32_t code);

}  // namespace flashpp::detail
