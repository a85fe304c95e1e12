#pragma once
// CPU backend of attention_with_kvcache: the same semantics as the CUDA
// decode kernels (append with rotary, then split-KV attention whose partial
// results merge through common/lse_merge.hpp), threaded and deterministic.
#include <cstddef>

#include "common/kvcache_params.hpp"

namespace flashpp::cpu {

// Splits used when p.num_splits is 0 (auto): long caches are cut into pieces
// of a few thousand keys so the merge path runs and work spreads over threads.
int kvcache_num_splits(const KVCacheParams& p);

std::size_t kvcache_workspace_bytes(const KVCacheParams& p);

// p.num_splits must be resolved (>= 1).
void attention_with_kvcache(const KVCacheParams& p, void* workspace);

// Writes k_new/v_new (rotated) into their cache slots (first step of the call).
void kvcache_append(const KVCacheParams& p);

}  // namespace flashpp::cpu
