// Decode attention instances: bf16, head dim 64 (row tiles: 1 2).
#include "cuda/decode/decode_kernel.cuh"

namespace flashpp::cuda::decode {
template AttentionKernel attention_kernel<__nv_bfloat16, 64, 1>();
template AttentionKernel attention_kernel<__nv_bfloat16, 64, 2>();
}  // namespace flashpp::cuda::decode
