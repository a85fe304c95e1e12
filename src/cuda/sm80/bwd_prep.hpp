#pragma once
// Host launchers of the backward's memory-bound passes (see bwd_prep.cuh).
#include <cuda_runtime.h>

#include <cstdint>

#include "common/params.hpp"
#include "cuda/sm80/bwd_args.hpp"

namespace flashpp::cuda::sm80 {

// Also clears the concentrated-row flags and marks (a.flags: any_flag, any_hot, flag_q, hot_q, hot_k).
void launch_dot_do_o(const AttnParams& p, const BwdArgs& a, std::int64_t total_rows, cudaStream_t stream);
// Rewrites D of the rows that see few keys (see bwd_short_rows.cuh); after launch_dot_do_o.
void launch_short_row_dsum(const AttnParams& p, float* dsum, std::int64_t total_rows, cudaStream_t stream);
void launch_dq_convert(const AttnParams& p, const float* acc, std::int64_t total_rows, int acc_head_dim,
                       cudaStream_t stream);

}  // namespace flashpp::cuda::sm80
