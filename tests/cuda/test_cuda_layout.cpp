// Host-side checks of the shared-memory swizzle (no GPU needed): every access
// pattern the kernels issue touches 8 distinct 16-byte bank groups per phase, and
// the mapping is a permutation of each row's chunks. Also the backward's blocked
// dQ accumulator layout.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>
#include <cstdint>

#include "cuda/common/smem_tile.cuh"
#include "cuda/sm80/bwd_args.hpp"

namespace flashpp::test {
namespace {

using flashpp::cuda::SmemTile;

// The tile shapes the kernels use (rows x 16-bit columns), each passed to
// f.template operator()<Tile>(name).
template <class F>
void for_each_kernel_tile(F&& f) {
  f.template operator()<SmemTile<128, 32>>("128x32");
  f.template operator()<SmemTile<128, 64>>("128x64");
  f.template operator()<SmemTile<128, 96>>("128x96");
  f.template operator()<SmemTile<128, 128>>("128x128");
  f.template operator()<SmemTile<64, 96>>("64x96");
  f.template operator()<SmemTile<64, 128>>("64x128");
  f.template operator()<SmemTile<64, 192>>("64x192");
  f.template operator()<SmemTile<64, 256>>("64x256");
}

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
  for_each_kernel_tile([]<class Tile>(const std::string& name) { check_tile<Tile>(name); });
}

// The stepped ldmatrix addresses (fragments.cuh, stepped_addr): from a first load at
// (row, chunk) with chunk = a multiple of `align` plus a lane bit, the load 16 r rows
// and 2 c chunks on is offset(row, chunk) ^ step_xor(c) + step_add(r, c), for every
// start the kernels' lanes take and every walk steps_stay_in_group allows. The walks
// it refuses must have a start where the formula is wrong (else the rule is too
// strict, and a kernel takes the slow form for nothing).
template <class Tile>
void check_stepped(const std::string& name) {
  for (int align = 2; align <= Tile::kChunks; align += 2)
    for (int steps = 1; 2 * steps <= Tile::kChunks; ++steps) {
      bool all_hold = true;
      for (int c0 = 0; c0 + 2 * steps <= Tile::kChunks; c0 += align)
        for (int bit = 0; bit < 2; ++bit)
          for (int row = 0; row + 16 <= Tile::kRows; ++row)
            for (int r = 0; row + 16 * r < Tile::kRows && r < 3; ++r)
              for (int c = 0; c < steps; ++c) {
                const std::uint32_t want = Tile::offset(row + 16 * r, c0 + bit + 2 * c);
                const std::uint32_t got = (Tile::offset(row, c0 + bit) ^ Tile::step_xor(c)) + Tile::step_add(r, c);
                if (want != got) all_hold = false;
                if (Tile::steps_stay_in_group(align, steps)) {
                  ASSERT_EQ(got, want) << name << ": align " << align << " steps " << steps << " start (" << row
                                       << ", " << c0 + bit << ") step (" << r << ", " << c << ")";
                }
              }
      // A refused walk with more than one start must fail somewhere.
      if (!Tile::steps_stay_in_group(align, steps) && align + 2 * steps <= Tile::kChunks) {
        EXPECT_FALSE(all_hold) << name << ": align " << align << " steps " << steps << " holds but is refused";
      }
    }
}

TEST(CudaSmemLayout, SteppedFragmentAddresses) {
  for_each_kernel_tile([]<class Tile>(const std::string& name) { check_stepped<Tile>(name); });
  // The backward's warp offsets along [k][m] operands (bwd_kernel.cuh, phases B/C):
  // at head dims 64 and 128 they keep the steps inside a swizzle group (whether those
  // products step is the tile table's choice, bwd_stepped), at 96 and 192 (48-column
  // warp shares) they do not, so those take the general form.
  EXPECT_TRUE((SmemTile<64, 128>::steps_stay_in_group(64 / 8, 4)));
  EXPECT_TRUE((SmemTile<128, 64>::steps_stay_in_group(32 / 8, 2)));
  EXPECT_FALSE((SmemTile<64, 96>::steps_stay_in_group(48 / 8, 3)));
  EXPECT_FALSE((SmemTile<64, 192>::steps_stay_in_group(48 / 8, 3)));
}

// The dQ accumulator's 8 x 8 blocks (sm80::dq_accum_index): a bijection of
// (rows rounded up to 8) x width onto [0, that many floats); each row's 8-column
// chunk is 8 consecutive floats (the convert kernel's two float4 loads); and one
// warp's red.v2 of an m16n8 fragment half (rows g = lane / 4 of an 8-row band,
// columns 2 (lane % 4)) covers 64 consecutive floats in lane order.
TEST(CudaDqAccumLayout, BlockedIndex) {
  using flashpp::cuda::sm80::dq_accum_index;
  for (std::int64_t width : {8, 64, 3 * 96, 16 * 256}) {
    for (std::int64_t rows : {1, 7, 8, 13, 40}) {
      const std::int64_t band_rows = (rows + 7) / 8 * 8;
      std::vector<char> hit(std::size_t(band_rows * width), 0);
      for (std::int64_t r = 0; r < band_rows; ++r)
        for (std::int64_t c = 0; c < width; ++c) {
          const std::int64_t i = dq_accum_index(r, c, width);
          ASSERT_GE(i, 0);
          ASSERT_LT(i, band_rows * width) << "row " << r << " col " << c << " width " << width;
          ASSERT_EQ(hit[std::size_t(i)], 0) << "two elements at index " << i;
          hit[std::size_t(i)] = 1;
          if (c % 8 != 0) {
            EXPECT_EQ(i, dq_accum_index(r, c - 1, width) + 1);
          }
        }
    }
    // Whole bands and blocks away (dq_accum_offset): from any element, including rows
    // that do not start a band.
    for (std::int64_t r = 0; r < 24; r += 3)
      for (std::int64_t c = 0; c < width; c += 5)
        for (int bands = 0; bands < 3; ++bands)
          for (int blocks = 0; 8 * blocks + c < width; ++blocks)
            EXPECT_EQ(dq_accum_index(r + 8 * bands, c + 8 * blocks, width),
                      dq_accum_index(r, c, width) + flashpp::cuda::sm80::dq_accum_offset(bands, blocks, width))
                << "row " << r << " col " << c << " bands " << bands << " blocks " << blocks;
    for (std::int64_t band = 0; band < 3; ++band)
      for (std::int64_t c0 = 0; c0 < width; c0 += 8) {
        const std::int64_t first = dq_accum_index(band * 8, c0, width);
        for (int lane = 0; lane < 32; ++lane)
          EXPECT_EQ(dq_accum_index(band * 8 + lane / 4, c0 + 2 * (lane % 4), width), first + 2 * lane);
      }
  }
}

}  // namespace
}  // namespace flashpp::test
