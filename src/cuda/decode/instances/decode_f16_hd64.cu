// Decode attention instances: f16, head dim 64 (row tiles: 1 2; wide: 1).
#include "cuda/decode/decode_kernel.cuh"

namespace flashpp::cuda::decode {
template AttentionKernel attention_kernel<__half, 64, 1, false>();
template AttentionKernel attention_kernel<__half, 64, 2, false>();
template AttentionKernel attention_kernel<__half, 64, 1, true>();
}  // namespace flashpp::cuda::decode
