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
