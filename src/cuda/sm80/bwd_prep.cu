#include "cuda/sm80/bwd_prep.hpp"

#include "cuda/check.hpp"
#include "cuda/launch_common.cuh"
#include "cuda/sm80/bwd_prep.cuh"
#include "cuda/sm80/bwd_short_rows.cuh"
#include "cuda/sm80/short_row_lead.hpp"

namespace flashpp::cuda::sm80 {
namespace {

constexpr int kThreads = 256;

unsigned blocks_for(std::int64_t work) { return unsigned((work + kThreads - 1) / kThreads); }

}  // namespace

void launch_dot_do_o(const AttnParams& p, const BwdArgs& a, std::int64_t total_rows, cudaStream_t stream) {
  const std::int64_t pairs = total_rows * p.heads_q;
  if (pairs == 0) return;
  constexpr std::int64_t kPairsPerBlock = kDotWarps * kDotPairsPerWarp;
  const unsigned grid = unsigned((pairs + kPairsPerBlock - 1) / kPairsPerBlock);
  if (p.dtype == ElemType::f16)
    dot_do_o_kernel<__half><<<grid, kDotWarps * 32, 0, stream>>>(p, a, total_rows);
  else
    dot_do_o_kernel<__nv_bfloat16><<<grid, kDotWarps * 32, 0, stream>>>(p, a, total_rows);
  check_launch("backward D = rowsum(dO * O)");
}

// Without a mask, a fixed-length batch whose rows all see more than kShortRowKeys keys
// has no short row: the pass is skipped. Otherwise one warp per (row, head) pair
// checks its row; most return at once.
void launch_short_row_dsum(const AttnParams& p, float* dsum, std::int64_t total_rows, cudaStream_t stream) {
  if (p.partial_keys) return;  // O covers keys this call does not see: D must come from O
  // FLASHPP_BWD_SHORT_ROWS=0 skips the pass (read per call: measures what it still
  // adds over the exact-D pass of bwd_exact_d.cuh).
  if (forced_variant("FLASHPP_BWD_SHORT_ROWS", 2) == 0) return;
  if (p.cu_seqlens_q == nullptr && !has_window(p.window_left, p.window_right) && p.seqlen_k > kShortRowKeys) return;
  const int lead = short_row_lead(p);
  const std::int64_t pairs = lead > 0 ? std::int64_t(p.batch) * lead * p.heads_q : total_rows * p.heads_q;
  if (pairs == 0) return;
  const unsigned grid = unsigned((pairs + kShortRowWarps - 1) / kShortRowWarps);
  auto launch = [&](auto element) {
    using T = decltype(element);
    short_row_dsum_kernel<T><<<grid, kShortRowThreads, 0, stream>>>(p, dsum, total_rows, lead);
  };
  if (p.dtype == ElemType::f16)
    launch(__half{});
  else
    launch(__nv_bfloat16{});
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
