#pragma once
// Backward-only kernel arguments that AttnParams does not carry: the workspace
// buffers. Plain data, passed by value as a __grid_constant__ argument.
#include <cstdint>

namespace flashpp::cuda::sm80 {

struct BwdArgs {
  // D = rowsum(dO * O), fp32, element (h, row) at h * dsum_head_stride + global row.
  float* dsum = nullptr;
  std::int64_t dsum_head_stride = 0;
  // fp32 dQ accumulator of rows x (heads_q * D) (D = the compiled head dim) in 8-row x
  // 16-column blocks (dq_accum_index); null in deterministic mode. dq_accum_row_stride
  // is the logical row width heads_q * D.
  float* dq_accum = nullptr;
  std::int64_t dq_accum_row_stride = 0;
};

// Index of logical element (row, col) of the dQ accumulator, width = heads_q * D (a
// multiple of 16): blocks of 8 rows x 16 columns, blocks row-major, 16 floats per row
// inside a block. Inside a block's row, column c sits at 4 ((c % 8) / 2) + 2 (c / 8 % 2)
// + c % 2: lane l of an m16n8 mma fragment holds (row g + 8i, columns 2 (l % 4) + {0, 1})
// of each n tile (g = l / 4), so its values for n tiles 2j and 2j + 1 are four
// consecutive floats, one red.v4, and a warp's reduction of a fragment half covers 128
// consecutive floats (512 bytes, four sectors per L2 request; a row-major accumulator
// gave one sector per request, and L2 tag lookups, not bytes, limited the backward).
// The accumulator holds whole bands: rows rounded up to a multiple of 8.
#if defined(__CUDACC__)
__host__ __device__
#endif
    inline std::int64_t
    dq_accum_index(std::int64_t row, std::int64_t col, std::int64_t width) {
  return (row & ~std::int64_t(7)) * width + (col & ~std::int64_t(15)) * 8 + (row & 7) * 16 + ((col & 7) >> 1) * 4 +
         ((col >> 3) & 1) * 2 + (col & 1);
}

}  // namespace flashpp::cuda::sm80
