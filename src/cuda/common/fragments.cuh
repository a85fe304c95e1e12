#pragma once
// Warp-wide loads of mma.m16n8k16 operand fragments from swizzled shared-memory
// tiles (see ptx/mma.cuh for the register layouts). "Stored [m][k]" means the tile's
// rows are the operand's m (or n) index and its columns the k index; "[k][m]" the
// transpose, which ldmatrix .trans turns back into the same fragment.
#include <cstdint>

#include "cuda/common/smem_tile.cuh"
#include "cuda/ptx/ldmatrix.cuh"

namespace flashpp::cuda {

enum class Major { mk, km };  // operand stored [m or n][k] (mk) or [k][m or n] (km)

// Where each lane points for a fragment load (the tile's address plus the offset of
// the row and chunk that lane addresses):
//  - A (16x16) at (m0, k0), stored [m][k]: lanes 0-15 rows m0..m0+15 at column k0,
//    lanes 16-31 the same rows at k0+8 (ldmatrix x4);
//  - A at (m0, k0), stored [k][m]: the transposed walk (ldmatrix x4 .trans);
//  - two B fragments (k16 x n8 each) for n0..n0+7 and n0+8..n0+15 at k0, stored
//    [n][k] (ldmatrix x4) or [k][n] (.trans).
template <class Tile, Major M>
__device__ __forceinline__ std::uint32_t a_lane_addr(std::uint32_t tile, int m0, int k0, int lane) {
  if constexpr (M == Major::mk)
    return tile + Tile::offset(m0 + (lane & 15), (k0 >> 3) + (lane >> 4));
  else
    return tile + Tile::offset(k0 + (lane & 7) + ((lane >> 4) << 3), (m0 >> 3) + ((lane >> 3) & 1));
}
template <class Tile, Major M>
__device__ __forceinline__ std::uint32_t b_lane_addr(std::uint32_t tile, int n0, int k0, int lane) {
  if constexpr (M == Major::mk)
    return tile + Tile::offset(n0 + (lane & 7) + ((lane >> 4) << 3), (k0 >> 3) + ((lane >> 3) & 1));
  else
    return tile + Tile::offset(k0 + (lane & 15), (n0 >> 3) + (lane >> 4));
}

// The address of the load `mn` 16-blocks along m (or n) and `ks` 16-blocks along k
// from a lane's first load `base` (SmemTile::step_xor/step_add): a [m][k] tile steps
// rows with m and chunks with k, a [k][m] tile the reverse. Valid when the first
// load's chunk (k0 / 8, or m0 / 8 for [k][m]) is a multiple of the swizzle group, or
// the steps stay inside one group (SmemTile::steps_stay_in_group), and the tile's address is a
// multiple of the group's bytes; one XOR with a constant per
// load, the add folded into the ldmatrix's immediate, where the general form
// recomputes the swizzle (two or three integer instructions per load).
template <class Tile, Major M>
__device__ __forceinline__ std::uint32_t stepped_addr(std::uint32_t base, int mn, int ks) {
  if constexpr (M == Major::mk)
    return (base ^ Tile::step_xor(ks)) + Tile::step_add(mn, ks);
  else
    return (base ^ Tile::step_xor(mn)) + Tile::step_add(ks, mn);
}

// An A fragment or a pair of B fragments from an address (either orientation).
template <Major M>
__device__ __forceinline__ void load_a_at(std::uint32_t (&a)[4], std::uint32_t addr) {
  if constexpr (M == Major::mk)
    ptx::ldmatrix_x4(a[0], a[1], a[2], a[3], addr);
  else
    ptx::ldmatrix_x4_trans(a[0], a[1], a[2], a[3], addr);
}
template <Major M>
__device__ __forceinline__ void load_b_pair_at(std::uint32_t (&b0)[2], std::uint32_t (&b1)[2], std::uint32_t addr) {
  if constexpr (M == Major::mk)
    ptx::ldmatrix_x4(b0[0], b0[1], b1[0], b1[1], addr);
  else
    ptx::ldmatrix_x4_trans(b0[0], b0[1], b1[0], b1[1], addr);
}

}  // namespace flashpp::cuda
