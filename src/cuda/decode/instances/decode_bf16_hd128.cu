// Decode attention instances: bf16, head dim 128 (row tiles: 1 2).
#include "cuda/decode/decode_kernel.cuh"

namespace flashpp::cuda::decode {
template AttentionKernel attention_kernel<__nv_bfloat16, 128, 1>();
template AttentionKernel attention_kernel<__nv_bfloat16, 128, 2>();
}  // namespace flashpp::cuda::decode
