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

  // Chunks per swizzle group: the XOR permutes chunks only within aligned groups of
  // this many, and a row's swizzle value depends on row % 8 only.
  static constexpr int kSwizzleGroup = kChunks % 8 == 0 ? 8 : 4;

  // Byte offset of 16-byte chunk `chunk` (logical) of row `row`.
  FLASHPP_TILE_FN static std::uint32_t offset(int row, int chunk) {
    int phys;
    if constexpr (kChunks % 8 == 0)
      phys = chunk ^ (row & 7);
    else
      phys = chunk ^ ((row >> 1) & 3);
    return std::uint32_t(row * kRowBytes + phys * 16);
  }

  // The offset of (row + 16 r, chunk + 2 c) from offset(row, chunk) = off, where
  // chunk % kSwizzleGroup is 0 or 1: rows move by whole swizzle periods (an add), and
  // 2 c chunks split into whole groups (an add) and an even step inside the group,
  // which cannot carry past the group and so commutes with the swizzle XOR: it XORs
  // the same chunk bits of the offset. The same holds from any chunk whose bits are
  // disjoint from 2 c and that stays inside its group (fragments.cuh,
  // steps_stay_in_group). Requires the tile's address to be aligned to a
  // group (16 kSwizzleGroup bytes) when applied to an address rather than an offset.
  // Whether step_xor/step_add hold for a walk whose first chunk (less the lane's
  // bit) is a multiple of `align` chunks and which steps `steps` times by 2 chunks:
  // either that chunk starts a swizzle group, or the steps span a power of two of
  // chunks that divides both the group and the start (a warp at w times its own
  // span), so they stay inside one group without carrying.
  FLASHPP_TILE_FN static constexpr bool steps_stay_in_group(int align, int steps) {
    const int span = 2 * steps;
    return align % kSwizzleGroup == 0 ||
           ((span & (span - 1)) == 0 && kSwizzleGroup % span == 0 && align % span == 0);
  }
  FLASHPP_TILE_FN static constexpr std::uint32_t step_xor(int c) { return 16u * ((2 * c) % kSwizzleGroup); }
  FLASHPP_TILE_FN static constexpr std::uint32_t step_add(int r, int c) {
    return std::uint32_t(16 * r * kRowBytes + 16 * kSwizzleGroup * ((2 * c) / kSwizzleGroup));
  }
};

}  // namespace flashpp::cuda
