// Host-side checks (no GPU needed) of the persistent FA2-class forward's rounds
// (fwd_rounds.hpp): every query block is taken exactly once, a block of threads
// stops at its first index past the end and nothing comes after it, and under a
// causal mask the rotation spreads the long query blocks over the blocks of threads.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "cuda/sm80/fwd_rounds.hpp"

namespace flashpp::test {
namespace {

using flashpp::cuda::sm80::round_index;

// What block c takes: its indices below total, in round order, stopping at the first
// one past the end (as the kernel does).
std::vector<int> walk(int block, int grid, int total) {
  std::vector<int> taken;
  for (int r = 0; round_index(r, block, grid) < total; ++r) taken.push_back(round_index(r, block, grid));
  return taken;
}

TEST(CudaFwdRounds, EveryQueryBlockOnce) {
  for (int grid : {1, 2, 7, 132}) {
    for (int total : {1, 5, 131, 132, 133, 1024, 4097}) {
      std::vector<int> seen(total, 0);
      for (int c = 0; c < grid; ++c)
        for (int index : walk(c, grid, total)) ++seen[index];
      for (int i = 0; i < total; ++i) ASSERT_EQ(seen[i], 1) << "grid " << grid << " total " << total << " index " << i;
    }
  }
}

TEST(CudaFwdRounds, NothingAfterTheFirstIndexPastTheEnd) {
  for (int grid : {3, 132})
    for (int total : {10, 500, 1000})
      for (int c = 0; c < grid; ++c) {
        int r = 0;
        while (round_index(r, c, grid) < total) ++r;
        for (int later = r; later < r + 4; ++later) EXPECT_GE(round_index(later, c, grid), total);
      }
}

// Causal, 32 heads x 4 query blocks of 128 rows at N = 512 on 132 blocks of threads,
// the grid order's query blocks issued last-first (8, 6, 4, 2 key tiles): every block
// of threads gets nearly the same number of key tiles; without the rotation (block c
// takes r G + c) some would get only 8-tile blocks and others only 2-tile ones.
TEST(CudaFwdRounds, CausalWorkIsSpread) {
  const int grid = 132, per_head = 4, total = 32 * 8 * per_head;
  auto tiles_of = [&](int index) { return 2 * (per_head - index % per_head); };
  int most = 0, least = 1 << 30, most_plain = 0, least_plain = 1 << 30;
  for (int c = 0; c < grid; ++c) {
    int work = 0, work_plain = 0;
    for (int index : walk(c, grid, total)) work += tiles_of(index);
    for (int index = c; index < total; index += grid) work_plain += tiles_of(index);
    most = std::max(most, work);
    least = std::min(least, work);
    most_plain = std::max(most_plain, work_plain);
    least_plain = std::min(least_plain, work_plain);
  }
  EXPECT_LE(most - least, 8) << "rotated rounds: " << least << " .. " << most << " key tiles";
  EXPECT_GE(most_plain - least_plain, 40) << "plain rounds: " << least_plain << " .. " << most_plain;
}

}  // namespace
}  // namespace flashpp::test
