// Decode attention instances: f16, head dim 256 (row tiles: 1).
#include "cuda/decode/decode_kernel.cuh"

namespace flashpp::cuda::decode {
template AttentionKernel attention_kernel<__half, 256, 1, false>();
}  // namespace flashpp::cuda::decode
