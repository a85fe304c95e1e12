#pragma once
// Epilogue of the Hopper forward: one consumer warpgroup's 64 rows of O (the
// wgmma accumulator layout, see ptx/wgmma.cuh) normalized and written out, either
//  - staged: into a shared-memory tile of 64-column panels with the 128-byte
//    swizzle (the layout a TMA store reads) through stmatrix, 16x16 elements per
//    instruction; a TMA store then writes whole 128-byte lines of the box;
//  - direct: from registers, 4 bytes (two elements) per lane and store, for
//    outputs TMA cannot describe and for the rows a box would write past a
//    varlen sequence's end (a store box has no per-sequence bound).
// The LSE is written from registers in both cases.
#include <cmath>
#include <cstdint>

#include "common/params.hpp"
#include "cuda/common/element.cuh"
#include "cuda/ptx/stmatrix.cuh"

namespace flashpp::cuda::sm90 {

// Runtime choices of one launch (kernel parameter); the launcher's fwd_knobs()
// sets them from a rule measured on the device and the environment's overrides.
struct FwdKnobs {
  int o_tma = 0;     // epilogue through shared memory and a TMA store (maps.o is encoded)
  int snake = 0;     // snake rounds of the tile order (tile_order.cuh)
  int q_double = 0;  // alternate two Q buffers where the tile has them (fwd_tiles.hpp)
  // Dynamic schedule (tile_queue.cuh): a zeroed counter in the caller's
  // workspace from which blocks claim tiles; null for the static order.
  int* tile_counter = nullptr;
  int head_group = 0;  // (batch, head) pairs per head group of a masked order (tile_order.cuh)
  // A consumer whose rows see none of the upper half of its first key tile (the
  // causal diagonal) computes that tile's S and softmax over the lower half only;
  // P V stays full width, with zero probabilities (fwd_kernel.cuh, kHalfFirst).
  int half_first = 0;
};

// Writes this thread's share of O (rows 16 * warp .. + 15 of consumer c, all D
// columns), scaled by inv[hh] per row half, into the staged tile at o_tile
// (block_m rows per 64-column panel, 1024-aligned). Lanes 8i..8i+7 address the
// rows of matrix i of each x4 store: i & 1 picks the upper or lower 8 rows, i >> 1
// the first or second 8-column chunk of the 16 columns j, j + 1.
template <typename T, int D, int BM>
__device__ __forceinline__ void stage_o_rows(const float (&o)[D / 2], const float (&inv)[2], std::uint32_t o_tile, int c,
                                             int warp, int lane) {
  static_assert(D % 16 == 0, "x4 stores take 16 columns at a time");
  const int i = lane >> 3, k = lane & 7;
  const int row = c * 64 + warp * 16 + (i & 1) * 8 + k;  // row & 7 == k: the swizzle phase
#pragma unroll
  for (int j = 0; j < D / 8; j += 2) {
    const int chunk = j + (i >> 1);  // 16-byte chunk (8 columns) of the whole row
    const std::uint32_t addr = o_tile + std::uint32_t((chunk / 8) * BM * 128 + row * 128 + (((chunk % 8) ^ k) << 4));
    ptx::stmatrix_x4(addr, Element<T>::pack(o[4 * j + 0] * inv[0], o[4 * j + 1] * inv[0]),
                     Element<T>::pack(o[4 * j + 2] * inv[1], o[4 * j + 3] * inv[1]),
                     Element<T>::pack(o[4 * j + 4] * inv[0], o[4 * j + 5] * inv[0]),
                     Element<T>::pack(o[4 * j + 6] * inv[1], o[4 * j + 7] * inv[1]));
  }
}

// Writes this thread's elements of O directly: rows row0 + 8 * hh of the block
// (those below rows_q), columns below head_dim_v. o_block points at the block's
// first row.
template <typename T, int D>
__device__ __forceinline__ void store_o_rows(const float (&o)[D / 2], const float (&inv)[2], T* o_block,
                                             std::int64_t row_stride, int row0, int rows_q, int head_dim_v, int t4) {
#pragma unroll
  for (int hh = 0; hh < 2; ++hh) {
    const int r = row0 + 8 * hh;
    if (r >= rows_q) continue;
    T* orow = o_block + std::int64_t(r) * row_stride;
#pragma unroll
    for (int j = 0; j < D / 8; ++j) {
      const int col = j * 8 + 2 * t4;
      if (col < head_dim_v)
        *reinterpret_cast<std::uint32_t*>(orow + col) =
            Element<T>::pack(o[4 * j + 2 * hh] * inv[hh], o[4 * j + 2 * hh + 1] * inv[hh]);
    }
  }
}

}  // namespace flashpp::cuda::sm90
