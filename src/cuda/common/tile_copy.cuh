#pragma once
// Cooperative global -> shared tile copies through cp.async, one 16-byte chunk per
// thread per step. Rows past `rows` and columns past `cols` are zero-filled in shared
// memory and never read from global memory, which is how partial tiles and head dims
// below the compiled size are handled. Offsets are 64-bit: a row stride times a row
// index can exceed 2^31 elements.
#include <cstdint>

#include "cuda/common/smem_tile.cuh"
#include "cuda/ptx/cp_async.cuh"

namespace flashpp::cuda {

// kFullTilePath adds a branch for full tiles (rows and columns all in bounds) that
// copies without bounds or zero fill: fewer integer instructions per copy, but the
// second copy loop costs registers, so only kernels that measured it take it.
template <class Tile, int THREADS, bool kFullTilePath = false, typename T>
__device__ __forceinline__ void copy_tile_async(std::uint32_t tile, const T* base, std::int64_t row_stride, int rows,
                                                int cols, int tid) {
  constexpr int kTotal = Tile::kRows * Tile::kChunks;
  constexpr int kSteps = (kTotal + THREADS - 1) / THREADS;
  if constexpr (THREADS % Tile::kChunks == 0 && (THREADS / Tile::kChunks) % 4 == 0) {
    // Each thread keeps one chunk column and steps down by kRowsPerStep rows. The
    // swizzle depends on the row only through row % 8, so with a step of 8 rows or a
    // multiple the thread's swizzled column never changes, and with a step of 4 it
    // alternates between two: one or two shared addresses and one global pointer,
    // advanced by constants, instead of a table of per-step addresses in registers.
    constexpr int kRowsPerStep = THREADS / Tile::kChunks;
    constexpr int kPhases = kRowsPerStep % 8 == 0 ? 1 : 2;
    const int row0 = tid / Tile::kChunks, chunk = tid % Tile::kChunks;
    // dst[s % kPhases] + s * kRowsPerStep * kRowBytes is step s's shared address.
    std::uint32_t dst[kPhases];
#pragma unroll
    for (int ph = 0; ph < kPhases; ++ph)
      dst[ph] = tile + Tile::offset(row0 + ph * kRowsPerStep, chunk) - ph * kRowsPerStep * Tile::kRowBytes;
    const T* src = base + std::int64_t(row0) * row_stride + chunk * 8;
    const std::int64_t step = std::int64_t(kRowsPerStep) * row_stride;
    if (kFullTilePath && rows >= Tile::kRows && cols >= Tile::kCols) {
      // A full tile (every step of a long sequence): no bounds, no zero fill, one
      // pointer advanced by the step. The checked loop below costs ~10 integer
      // instructions per copy, which in the backward's loop was a quarter of its
      // non-mma instructions.
#pragma unroll
      for (int s = 0; s < kSteps; ++s) {
        ptx::cp_async_16(dst[s % kPhases] + s * kRowsPerStep * Tile::kRowBytes, src, true);
        src += step;
      }
      return;
    }
    const bool col_ok = chunk * 8 < cols;
#pragma unroll
    for (int s = 0; s < kSteps; ++s) {
      const bool valid = col_ok && row0 + s * kRowsPerStep < rows;
      ptx::cp_async_16(dst[s % kPhases] + s * kRowsPerStep * Tile::kRowBytes, valid ? src + s * step : base, valid);
    }
  } else {
#pragma unroll
    for (int s = 0; s < kSteps; ++s) {
      const int idx = tid + s * THREADS;
      if (kTotal % THREADS != 0 && idx >= kTotal) break;
      const int row = idx / Tile::kChunks;
      const int chunk = idx % Tile::kChunks;
      const bool valid = row < rows && chunk * 8 < cols;
      const T* src = valid ? base + std::int64_t(row) * row_stride + chunk * 8 : base;
      ptx::cp_async_16(tile + Tile::offset(row, chunk), src, valid);
    }
  }
}

// N fp32 values, one per thread with 0 <= tid < N (callers shift tid to pick threads) -> shared memory; entries at or
// past `valid` are zero-filled.
template <int N>
__device__ __forceinline__ void copy_floats_async(std::uint32_t dst, const float* src, int valid, int tid) {
  if (tid >= 0 && tid < N) ptx::cp_async_4(dst + 4u * tid, tid < valid ? src + tid : src, tid < valid);
}

}  // namespace flashpp::cuda
