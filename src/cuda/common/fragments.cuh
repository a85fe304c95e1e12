#pragma once
// Warp-wide loads of mma.m16n8k16 operand fragments from swizzled shared-memory
// tiles (see ptx/mma.cuh for the register layouts). "Stored [m][k]" means the tile's
// rows are the operand's m (or n) index and its columns the k index; "[k][m]" the
// transpose, which ldmatrix .trans turns back into the same fragment.
#include <cstdint>

#include "cuda/common/smem_tile.cuh"
#include "cuda/ptx/ldmatrix.cuh"

namespace flashpp::cuda {

// A fragment (16x16) at (m0, k0) of a tile stored [m][k]. Lanes 0-15 address rows
// m0..m0+15 at column k0, lanes 16-31 the same rows at k0+8.
template <class Tile>
__device__ __forceinline__ void load_a(std::uint32_t (&a)[4], std::uint32_t tile, int m0, int k0, int lane) {
  const int row = m0 + (lane & 15);
  const int chunk = (k0 >> 3) + (lane >> 4);
  ptx::ldmatrix_x4(a[0], a[1], a[2], a[3], tile + Tile::offset(row, chunk));
}

// A fragment (16x16) at (m0, k0) of a tile stored [k][m].
template <class Tile>
__device__ __forceinline__ void load_a_trans(std::uint32_t (&a)[4], std::uint32_t tile, int m0, int k0, int lane) {
  const int row = k0 + (lane & 7) + ((lane >> 4) << 3);
  const int chunk = (m0 >> 3) + ((lane >> 3) & 1);
  ptx::ldmatrix_x4_trans(a[0], a[1], a[2], a[3], tile + Tile::offset(row, chunk));
}

// Two B fragments (k16 x n8 each) for n0..n0+7 and n0+8..n0+15 at k0, tile stored [n][k].
template <class Tile>
__device__ __forceinline__ void load_b_pair(std::uint32_t (&b0)[2], std::uint32_t (&b1)[2], std::uint32_t tile, int n0,
                                            int k0, int lane) {
  const int row = n0 + (lane & 7) + ((lane >> 4) << 3);
  const int chunk = (k0 >> 3) + ((lane >> 3) & 1);
  ptx::ldmatrix_x4(b0[0], b0[1], b1[0], b1[1], tile + Tile::offset(row, chunk));
}

// Two B fragments for n0..n0+15 at k0, tile stored [k][n].
template <class Tile>
__device__ __forceinline__ void load_b_pair_trans(std::uint32_t (&b0)[2], std::uint32_t (&b1)[2], std::uint32_t tile,
                                                  int n0, int k0, int lane) {
  const int row = k0 + (lane & 15);
  const int chunk = (n0 >> 3) + (lane >> 4);
  ptx::ldmatrix_x4_trans(b0[0], b0[1], b1[0], b1[1], tile + Tile::offset(row, chunk));
}

}  // namespace flashpp::cuda
