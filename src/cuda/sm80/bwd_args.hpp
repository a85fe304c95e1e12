#pragma once
// Backward-only kernel arguments that AttnParams does not carry: the workspace
// buffers. Plain data, passed by value as a __grid_constant__ argument.
#include <cstdint>

namespace flashpp::cuda::sm80 {

struct BwdArgs {
  // D = rowsum(dO * O), fp32, element (h, row) at h * dsum_head_stride + global row.
  float* dsum = nullptr;
  std::int64_t dsum_head_stride = 0;
  // fp32 dQ accumulator of rows x (heads_q * D) (D = the compiled head dim) in 8 x 8
  // blocks (dq_accum_index); null in deterministic mode. dq_accum_row_stride is the
  // logical row width heads_q * D.
  float* dq_accum = nullptr;
  std::int64_t dq_accum_row_stride = 0;
  // Concentrated rows (bwd_exact_d.cuh), one byte per group of kHotGroupRows global
  // rows, byte (h, row / kHotGroupRows) at h * *_head_stride + row / kHotGroupRows:
  // - flag_q (query groups, stride hot_q_head_stride): the main kernel flags the groups
  //   of a warp's query share where it stored a P of at least kLongRowConcentrated,
  //   and sets *any_flag;
  // - hot_q, hot_k (query groups, key groups of the kv head): the exact-D pass marks
  //   the rows that are concentrated by their own threshold and their top keys, and
  //   sets *any_hot.
  // The flag bytes (any_flag and any_hot in the first 16-byte word) are flag_words
  // 16-byte words at `flags`, cleared by the D pass. ddelta (indexed like dsum) gets
  // exact D minus the D the main kernel used.
  unsigned char* flag_q = nullptr;
  unsigned char* hot_q = nullptr;
  std::int64_t hot_q_head_stride = 0;
  unsigned char* hot_k = nullptr;
  std::int64_t hot_k_head_stride = 0;
  int* any_flag = nullptr;
  int* any_hot = nullptr;
  void* flags = nullptr;
  std::int64_t flag_words = 0;
  float* ddelta = nullptr;
};

inline constexpr int kHotGroupRows = 16;
// Rows with 2 .. kShortRowKeys visible keys take D as the sum over P (bwd_short_rows.cuh).
inline constexpr int kShortRowKeys = 64;

// Index of logical element (row, col) of the dQ accumulator, width = heads_q * D: 8 x 8
// blocks, row-major inside a block, blocks row-major. Lane l of an m16n8 mma fragment
// holds (row g + 8i, cols 2 (l % 4) + {0, 1}) with g = l / 4, so within an 8-row band one
// warp's reduction of a fragment half covers 64 consecutive floats (two 128-byte lines,
// four sectors per L2 request) instead of eight rows of 32 bytes (one sector per
// request: L2 tag lookups, not bytes, limited the backward at head dim 256).
// The accumulator holds whole bands: rows rounded up to a multiple of 8.
#if defined(__CUDACC__)
__host__ __device__
#endif
    inline std::int64_t
    dq_accum_index(std::int64_t row, std::int64_t col, std::int64_t width) {
  return (row & ~std::int64_t(7)) * width + (col & ~std::int64_t(7)) * 8 + (row & 7) * 8 + (col & 7);
}

// From element (row, col) to (row + 8 bands, col + 8 blocks): the same place in another
// block, so a thread's fragment elements 8 rows or 8 columns apart are one index plus
// constants (no per-reduction 64-bit index arithmetic).
#if defined(__CUDACC__)
__host__ __device__
#endif
    inline std::int64_t
    dq_accum_offset(int bands, int blocks, std::int64_t width) {
  return std::int64_t(bands) * 8 * width + std::int64_t(blocks) * 64;
}

}  // namespace flashpp::cuda::sm80
