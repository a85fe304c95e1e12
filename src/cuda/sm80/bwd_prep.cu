#include "cuda/sm80/bwd_prep.hpp"

#include <cstdlib>
#include <cstring>
#include <type_traits>

#include "cuda/check.hpp"
#include "cuda/sm80/bwd_prep.cuh"
#include "cuda/sm80/bwd_short_rows.cuh"

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

// Without a mask, a fixed-length batch whose rows all see more than kShortRowKeys keys
// has no short row: the pass is skipped. Otherwise one warp per (row, head) pair
// checks its row; most return at once.
void launch_short_row_dsum(const AttnParams& p, float* dsum, std::int64_t total_rows, cudaStream_t stream) {
  if (p.partial_keys) return;  // O covers keys this call does not see: D must come from O
  if (p.cu_seqlens_q == nullptr && !has_window(p.window_left, p.window_right) && p.seqlen_k > kShortRowKeys) return;
  const std::int64_t pairs = total_rows * p.heads_q;
  if (pairs == 0) return;
  const unsigned grid = unsigned((pairs + kShortRowWarps - 1) / kShortRowWarps);
  // Read per call, so one process can compare both (bwd_short_rows.cuh).
  const char* mma = std::getenv("FLASHPP_BWD_SHORT_ROW_MMA");
  const bool large_scores_mma = mma != nullptr && std::strcmp(mma, "1") == 0;
  auto launch = [&](auto tag, auto mma_flag) {
    using T = decltype(tag);
    short_row_dsum_kernel<T, decltype(mma_flag)::value><<<grid, kShortRowThreads, 0, stream>>>(p, dsum, total_rows);
  };
  if (p.dtype == ElemType::f16) {
    if (large_scores_mma)
      launch(__half{}, std::true_type{});
    else
      launch(__half{}, std::false_type{});
  } else {
    if (large_scores_mma)
      launch(__nv_bfloat16{}, std::true_type{});
    else
      launch(__nv_bfloat16{}, std::false_type{});
  }
  check_launch("backward D of rows with few keys");
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
