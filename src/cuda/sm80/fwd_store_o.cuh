#pragma once
// Output store of the FA2-class forward: a warp's normalized O rows leave through
// shared memory (its own rows of the Q tile, or a K/V stage in the persistent
// kernel), as whole 16-byte chunks per lane.
//
// Why: written from the mma accumulator layout, each 4-byte store of a warp
// touches 8 rows, 16 bytes in each (8 partial sectors per instruction, 2 * MT * D / 8
// such stores per thread). Staged, a warp stores whole rows: one 16-byte store
// per lane, each instruction 512 contiguous-by-row bytes (full sectors), an eighth
// of the instructions at 16 bytes per lane. The block's tail -- the part of a block
// that nothing else on the SM hides when one block fills it (d 192/256) -- gets
// shorter; at short sequences that tail is a large share of a block.
//
// Why the Q tile: a warp's mma reads only its own 16 * MT rows of Q (the A operand),
// so once the warp's last S = Q K^T is done those rows are free for it alone; no
// block barrier is needed, only the warp's own ordering (__syncwarp).
#include <cstdint>

#include "cuda/common/element.cuh"

namespace flashpp::cuda::sm80 {

// Stages rows wrow .. wrow + 16 MT - 1 of O, each scaled by inv[mt][hh] (the rows
// g and g + 8 of m tile mt), at `rows` (generic pointer to 16 MT rows laid out as
// QTile's rows, swizzle included: QTile::offset(r - wrow, chunk); wrow is a multiple
// of 16, so in the Q tile that is the warp's own rows), then writes the rows below
// rows_q and the 16-byte chunks below cols (head_dim_v, a multiple of 8) to o (the
// block's first row) with row stride row_stride. The caller guarantees that every
// copy into those bytes has landed and that no other warp reads or writes them
// until the stores below are done.
template <typename T, class QTile, int MT, int NO>
__device__ __forceinline__ void store_o_staged(const float (&o)[MT][NO][4], const float (&inv)[MT][2],
                                               unsigned char* rows, int wrow, int lane, T* o_ptr,
                                               std::int64_t row_stride, int rows_q, int cols) {
  static_assert(NO == QTile::kChunks, "one 8-column n tile per 16-byte chunk of a row");
  const int g = lane >> 2, t4 = lane & 3;
  __syncwarp();  // every lane's last ldmatrix of these rows precedes the stores below
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      const int r = mt * 16 + g + 8 * hh;
#pragma unroll
      for (int nt = 0; nt < NO; ++nt)
        // Chunk nt of 8 rows g: the swizzle puts the 8 rows' chunks in distinct banks.
        *reinterpret_cast<std::uint32_t*>(rows + QTile::offset(r, nt) + 4 * t4) =
            Element<T>::pack(o[mt][nt][2 * hh] * inv[mt][hh], o[mt][nt][2 * hh + 1] * inv[mt][hh]);
    }
  __syncwarp();
  constexpr int kRows = 16 * MT, kChunks = QTile::kChunks;
  static_assert(kRows * kChunks % 32 == 0, "whole rounds of 32 lanes");
  if constexpr (32 % kChunks == 0) {
    // A round of 32 lanes covers whole rows: each lane keeps its chunk and steps its
    // row by 32 / kChunks, so the address is one add per round.
    constexpr int kRowStep = 32 / kChunks;
    const int c = lane % kChunks;
    int r = lane / kChunks;  // row in the warp's rows
    const unsigned char* src = rows + QTile::offset(r, c);
    T* dst = o_ptr + std::int64_t(wrow + r) * row_stride + c * 8;
    const std::int64_t dst_step = kRowStep * row_stride;
    const bool col_ok = c * 8 < cols;
#pragma unroll
    for (int i = 0; i < kRows / kRowStep; ++i, r += kRowStep, dst += dst_step) {
      // With a row step of 8 every row of the walk has the first one's swizzle (it
      // depends on r % 8), so the offset is one add; steps of 1, 2 or 4 recompute it.
      const unsigned char* at = kRowStep % 8 == 0 ? src + i * kRowStep * QTile::kRowBytes : rows + QTile::offset(r, c);
      if (col_ok && wrow + r < rows_q) *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(at);
    }
  } else {
#pragma unroll
    for (int i = 0; i < kRows * kChunks / 32; ++i) {
      const int idx = i * 32 + lane;
      const int r = idx / kChunks, c = idx % kChunks;
      if (wrow + r < rows_q && c * 8 < cols)
        *reinterpret_cast<uint4*>(o_ptr + std::int64_t(wrow + r) * row_stride + c * 8) =
            *reinterpret_cast<const uint4*>(rows + QTile::offset(r, c));
    }
  }
}

}  // namespace flashpp::cuda::sm80
