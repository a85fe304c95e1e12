#include "cuda/sm80/bwd_prep.hpp"

#include "cuda/check.hpp"
#include "cuda/sm80/bwd_prep.cuh"

namespace flashpp::cuda::sm80 {
namespace {

constexpr int kThreads = 256;

unsigned blocks_for(std::int64_t work) { return unsigned((work + kThreads - 1) / kThreads); }

}  // namespace

void launch_dot_do_o(const AttnParams& p, float* dsum, std::int64_t total_rows, cudaStream_t stream) {
  const std::int64_t pairs = total_rows * p.heads_q;
  if (pairs == 0) return;
  constexpr std::int64_t kPairsPerBlock = kDotWarps * kDotPairsPerWarp;
  const unsigned grid = unsigned((pairs + kPairsPerBlock - 1) / kPairsPerBlock);
  if (p.dtype == ElemType::f16)
    dot_do_o_kernel<__half><<<grid, kDotWarps * 32, 0, stream>>>(p, dsum, total_rows);
  else
    dot_do_o_kernel<__nv_bfloat16><<<grid, kDotWarps * 32, 0, stream>>>(p, dsum, total_rows);
  check_launch("backward D = rowsum(dO * O)");
}

void launch_dq_convert(const AttnParams& p, const float* acc, std::int64_t total_rows, int acc_head_dim,
                       cudaStream_t stream) {
  const std::int64_t work = total_rows * p.heads_q * (p.head_dim / 8);
  if (work == 0) return;
  if (p.dtype == ElemType::f16)
    dq_convert_kernel<__half><<<blocks_for(work), kThreads, 0, stream>>>(p, acc, total_rows, acc_head_dim);
  else
    dq_convert_kernel<__nv_bfloat16><<<blocks_for(work), kThreads, 0, stream>>>(p, acc, total_rows, acc_head_dim);
  check_launch("backward dQ conversion");
}

}  // namespace flashpp::cuda::sm80
