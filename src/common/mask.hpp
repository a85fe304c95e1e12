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

}  // namespace flashpp
