#pragma once
// The visibility rule shared by every backend and the reference: windows are
// aligned to the bottom-right corner of the (seqlen_q x seqlen_k) score matrix.
#include <cstdint>

#if defined(__CUDACC__)
#define FLASHPP_HD __host__ __device__ __forceinline__
#else
#define FLASHPP_HD inline
#endif

namespace flashpp {

struct VisibleRange {
  // Keys [lo, hi) are visible to a query row; empty when lo >= hi.
  std::int64_t lo;
  std::int64_t hi;
};

// Whether a causal or sliding-window mask hides any key (causal is window_right = 0).
FLASHPP_HD bool has_window(int window_left, int window_right) { return window_left >= 0 || window_right >= 0; }

// Keys visible to query row i given the sequence lengths and window
// (window_left/right < 0 means unbounded on that side).
FLASHPP_HD VisibleRange visible_keys(std::int64_t i, std::int64_t seqlen_q, std::int64_t seqlen_k,
                                     int window_left, int window_right) {
  const std::int64_t diag = i + seqlen_k - seqlen_q;
  std::int64_t lo = window_left < 0 ? 0 : diag - window_left;
  std::int64_t hi = window_right < 0 ? seqlen_k : diag + window_right + 1;
  if (lo < 0) lo = 0;
  if (hi > seqlen_k) hi = seqlen_k;
  return {lo, hi};
}

// One sequence's lengths, for host callers of tile_needs_mask (the kernels pass
// their SeqRows, cuda/common/sequence.cuh).
struct SeqLengths {
  int len_q = 0, len_k = 0;
};

// A tile of query rows [m0, m0 + rows) x keys [n0, n0 + cols) of one sequence (any
// type with int len_q and len_k) needs element masks unless every row sees every
// key of it. Visible ranges are monotone in the row, so the last row bounds lo and
// the first row bounds hi.
template <typename Seq>
FLASHPP_HD bool tile_needs_mask(int m0, int rows, int n0, int cols, const Seq& s, int wl, int wr) {
  if (n0 + cols > s.len_k) return true;
  // Without a window every row sees every key: skip the 64-bit range arithmetic,
  // which the backward would otherwise run on every query step.
  if (!has_window(wl, wr)) return false;
  const VisibleRange first = visible_keys(m0, s.len_q, s.len_k, wl, wr);
  const VisibleRange last = visible_keys(m0 + rows - 1, s.len_q, s.len_k, wl, wr);
  return !(last.lo <= n0 && first.hi >= n0 + cols);
}

// The query blocks for which a tile of keys [n0, n0 + cols) needs no element mask
// (tile_needs_mask false), found once per key tile so that a loop over query blocks
// tests two ints instead of the 64-bit range arithmetic per block: the blocks whose
// first row sees the tile's last key (first_row_min on) and whose last row sees its
// first key (up to last_row_max). Monotone visible ranges make that exact.
struct UnmaskedQueryRows {
  int first_row_min;
  int last_row_max;
  FLASHPP_HD bool covers(int m0, int rows) const { return m0 >= first_row_min && m0 + rows - 1 <= last_row_max; }
};
template <typename Seq>
FLASHPP_HD UnmaskedQueryRows unmasked_query_rows(int n0, int cols, const Seq& s, int wl, int wr) {
  constexpr std::int64_t kMin = -2147483647 - 1, kMax = 2147483647;
  auto clamp = [](std::int64_t x) { return int(x < kMin ? kMin : x > kMax ? kMax : x); };
  if (n0 + cols > s.len_k) return {int(kMax), int(kMin)};  // keys past the end: always masked
  const std::int64_t shift = std::int64_t(s.len_k) - s.len_q;
  UnmaskedQueryRows u{int(kMin), int(kMax)};
  // hi(row) = min(len_k, row + shift + wr + 1) reaches n0 + cols <= len_k.
  if (wr >= 0) u.first_row_min = clamp(std::int64_t(n0) + cols - 1 - shift - wr);
  // lo(row) = max(0, row + shift - wl) is at most n0 (n0 >= 0).
  if (wl >= 0) u.last_row_max = clamp(std::int64_t(n0) + wl - shift);
  return u;
}

// The element mask of a tile whose corner is row m0, key n0, as offsets from that
// corner: key n0 + kk is visible to row m0 + rr when kk - rr lies in [diff_min,
// diff_max] and kk < kk_end. Found once per tile (the 64-bit arithmetic), it costs a
// transposed tile, whose thread holds many rows, two compares per element instead of
// one visible_keys per row. The bounds are clamped to +-2^24, far beyond any tile's
// |kk - rr|, so they fit an int without changing an answer.
struct TileElementMask {
  int diff_min, diff_max, kk_end;
  FLASHPP_HD bool has(int kk, int rr) const {
    const int d = kk - rr;
    return d >= diff_min && d <= diff_max && kk < kk_end;
  }
};
template <typename Seq>
FLASHPP_HD TileElementMask tile_element_mask(int m0, int n0, const Seq& s, int wl, int wr) {
  constexpr std::int64_t kFar = std::int64_t(1) << 24;
  auto clamp = [](std::int64_t x) { return int(x < -kFar ? -kFar : x > kFar ? kFar : x); };
  // Key n0 + kk, row m0 + rr: visible iff key - (row + len_k - len_q) is in [-wl, wr]
  // (each side only with its window) and 0 <= key < len_k (n0 >= 0, kk >= 0).
  const std::int64_t corner = std::int64_t(n0) - m0 - (std::int64_t(s.len_k) - s.len_q);
  return {wl >= 0 ? clamp(-std::int64_t(wl) - corner) : int(-kFar), wr >= 0 ? clamp(std::int64_t(wr) - corner) : int(kFar),
          clamp(std::int64_t(s.len_k) - n0)};
}

// The tiles of bn keys [lo, hi) some row of the query block [m0, m0 + rows) sees
// (lo = hi = 0: none).
struct KeyTileRange {
  int lo = 0, hi = 0;
  FLASHPP_HD bool any() const { return hi > lo; }
};
FLASHPP_HD KeyTileRange key_tile_range(int m0, int rows, int len_q, int len_k, int bn, int wl, int wr) {
  KeyTileRange t;
  const VisibleRange first = visible_keys(m0, len_q, len_k, wl, wr);
  const VisibleRange last = visible_keys(m0 + rows - 1, len_q, len_k, wl, wr);
  if (first.lo < last.hi) {
    t.lo = int(first.lo / bn);
    t.hi = int((last.hi + bn - 1) / bn);
  }
  return t;
}

}  // namespace flashpp
