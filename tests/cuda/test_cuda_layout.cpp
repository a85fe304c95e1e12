// Host-side checks of the shared-memory swizzle (no GPU needed): every access
// pattern the kernels issue touches 8 distinct 16-byte bank groups per phase, and
// the mapping is a permutation of each row's chunks.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "cuda/common/smem_tile.cuh"

namespace flashpp::test {
namespace {

using flashpp::cuda::SmemTile;

template <class Tile>
void check_tile(const std::string& name) {
  // Each row's chunks map onto the row's own bytes, one to one.
  for (int r = 0; r < Tile::kRows; ++r) {
    std::set<unsigned> seen;
    for (int c = 0; c < Tile::kChunks; ++c) {
      const unsigned off = Tile::offset(r, c);
      ASSERT_GE(off, unsigned(r * Tile::kRowBytes)) << name;
      ASSERT_LT(off, unsigned((r + 1) * Tile::kRowBytes)) << name;
      seen.insert(off);
    }
    ASSERT_EQ(int(seen.size()), Tile::kChunks) << name << " row " << r;
  }
  // ldmatrix phase: 8 consecutive rows (from a multiple of 8), one chunk column.
  for (int r0 = 0; r0 < Tile::kRows; r0 += 8)
    for (int c = 0; c < Tile::kChunks; ++c) {
      std::set<unsigned> banks;
      for (int j = 0; j < 8; ++j) banks.insert((Tile::offset(r0 + j, c) / 16) % 8);
      EXPECT_EQ(banks.size(), 8u) << name << ": ldmatrix rows " << r0 << "+8, chunk " << c << " conflicts";
    }
  // cp.async phase: 8 consecutive chunks in row-major chunk order.
  const int total = Tile::kRows * Tile::kChunks;
  for (int i0 = 0; i0 + 8 <= total; i0 += 8) {
    std::set<unsigned> banks;
    for (int j = 0; j < 8; ++j) {
      const int idx = i0 + j;
      banks.insert((Tile::offset(idx / Tile::kChunks, idx % Tile::kChunks) / 16) % 8);
    }
    EXPECT_EQ(banks.size(), 8u) << name << ": copy chunks " << i0 << "+8 conflict";
  }
}

TEST(CudaSmemLayout, SwizzleIsConflictFree) {
  check_tile<SmemTile<128, 32>>("128x32");
  check_tile<SmemTile<128, 64>>("128x64");
  check_tile<SmemTile<128, 96>>("128x96");
  check_tile<SmemTile<128, 128>>("128x128");
  check_tile<SmemTile<64, 192>>("64x192");
  check_tile<SmemTile<64, 256>>("64x256");
  check_tile<SmemTile<128, 64>>("P^T 128x64");
}

}  // namespace
}  // namespace flashpp::test
