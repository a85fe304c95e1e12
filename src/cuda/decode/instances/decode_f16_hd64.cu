// Decode attention instances: f16, head dim 64 (row tiles: 1 2).
#include "cuda/decode/decode_kernel.cuh"

namespace flashpp::cuda::decode {
template AttentionKernel attention_kernel<__half, 64, 1>();
template AttentionKernel attention_kernel<__half, 64, 2>();
}  // namespace flashpp::cuda::decode
