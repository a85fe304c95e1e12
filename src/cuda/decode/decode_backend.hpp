#pragma once
// Host entry points of the CUDA decode kernels (attention with a KV cache),
// implemented in src/cuda/decode/*.cu. Nothing here synchronizes with the
// host or allocates: the launches can be captured in a CUDA graph.
#include <cstddef>
#include <cstdint>
#include <string>

#include "common/kvcache_params.hpp"

namespace flashpp::cuda::decode {

struct DecodeChoice {
  bool ok = false;
  std::string kernel;  // e.g. "cuda-decode bf16 hdim128 rows16"
  std::string reason;  // why not, when !ok
};

// device: CUDA ordinal of the tensors.
DecodeChoice select(const KVCacheParams& p, int device);

// Splits the launch will use (p.num_splits when > 0, else the heuristic).
int num_splits(const KVCacheParams& p, int device);

// p.num_splits must be resolved.
std::size_t workspace_bytes(const KVCacheParams& p, int device);

// Clears validation_status (when given), appends k_new/v_new, runs the split
// attention kernel and, with more than one split, the combine kernel.
void run(const KVCacheParams& p, void* workspace, std::size_t workspace_bytes, void* stream, int device);

// Copies 4 status words from the device (synchronizes `stream`).
void read_status(const std::int32_t* device_status, std::int32_t host[4], void* stream, int device);

}  // namespace flashpp::cuda::decode
