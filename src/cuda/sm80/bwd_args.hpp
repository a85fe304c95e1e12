#pragma once
// Backward-only kernel arguments that AttnParams does not carry: the workspace
// buffers. Plain data, passed by value as a __grid_constant__ argument.
#include <cstdint>

namespace flashpp::cuda::sm80 {

struct BwdArgs {
  // D = rowsum(dO * O), fp32, element (h, row) at h * dsum_head_stride + global row.
  float* dsum = nullptr;
  std::int64_t dsum_head_stride = 0;
  // fp32 dQ accumulator, element (row, h, col) at row * dq_accum_row_stride + h * D + col
  // (D = the compiled head dim); null in deterministic mode.
  float* dq_accum = nullptr;
  std::int64_t dq_accum_row_stride = 0;
};

}  // namespace flashpp::cuda::sm80
