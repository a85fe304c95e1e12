#pragma once
// Shared-memory tiles of 16-bit elements with an XOR swizzle on 16-byte chunks.
//
// Why: ldmatrix reads one 16-byte chunk from each of 8 consecutive rows at the same
// column, and cp.async writes 8 consecutive chunks per phase. Unswizzled rows whose
// length is a multiple of 128 bytes put all 8 chunks of an ldmatrix in the same 4
// banks (8-way conflict). XOR-ing the chunk index with low row bits spreads those
// 8 chunks over all 32 banks:
//  - rows of 8k chunks (128k bytes): chunk ^= row % 8, within each group of 8 chunks;
//  - rows of 4 or 12 chunks (64 or 192 bytes): two rows share a 128-byte line, so
//    chunk ^= (row / 2) % 4, within each group of 4 chunks; row parity already
//    separates the two halves of the line.
// Both keep a chunk inside its row, so any row/column range of the tile stays valid.
#include <cstdint>

#if defined(__CUDACC__)
#define FLASHPP_TILE_FN __host__ __device__ __forceinline__
#else
#define FLASHPP_TILE_FN inline  // host-only builds (layout tests) read the same formula
#endif

namespace flashpp::cuda {

template <int ROWS, int COLS>
struct SmemTile {
  static constexpr int kRows = ROWS;
  static constexpr int kCols = COLS;              // 16-bit elements per row
  static constexpr int kChunks = COLS / 8;        // 16-byte chunks per row
  static constexpr int kRowBytes = COLS * 2;
  static constexpr int kBytes = ROWS * kRowBytes;
  static_assert(COLS % 32 == 0, "swizzle needs rows of a multiple of 64 bytes");
  static_assert(ROWS % 8 == 0, "tiles hold whole 8-row ldmatrix groups");

  // Byte offset of 16-byte chunk `chunk` (logical) of row `row`.
  FLASHPP_TILE_FN static std::uint32_t offset(int row, int chunk) {
    int phys;
    if constexpr (kChunks % 8 == 0)
      phys = chunk ^ (row & 7);
    else
      phys = chunk ^ ((row >> 1) & 3);
    return std::uint32_t(row * kRowBytes + phys * 16);
  }
};

}  // namespace flashpp::cuda
