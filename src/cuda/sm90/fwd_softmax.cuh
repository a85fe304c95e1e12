#pragma once
// The Hopper forward consumers' online softmax over one key tile, in the wgmma
// accumulator's register layout: a thread holds two rows (r0, r0 + 8) and, per
// 8-key group of the tile, two adjacent keys of each (s[4 j + 2 hh + e]).
#include <cmath>

#include "cuda/common/online_softmax.cuh"
#include "cuda/common/scores.cuh"
#include "cuda/common/sequence.cuh"
#include "cuda/ptx/math.cuh"

namespace flashpp::cuda::sm90 {

// op-reduction of v[0..N) as a balanced tree (v is overwritten).
template <int N, typename Op>
__device__ __forceinline__ float tree_reduce(float (&v)[N], Op op) {
#pragma unroll
  for (int w = 1; w < N; w *= 2)
#pragma unroll
    for (int j = 0; j + w < N; j += 2 * w) v[j] = op(v[j], v[j + w]);
  return v[0];
}

// Lazy rescale (the plain loop's key tiles, kLazyRescaleLog2): after the first tiles
// of a row the base rarely moves, and a warp skips the rescale's D / 2 multiplies
// when none of its rows moved. The result is the same up to rounding: O and the row
// sum are both relative to the base, and the LSE is the base plus log2 of the sum.

// The online softmax step of one consumer thread's two rows (r0, r0 + 8) over the
// first W keys of key tile n0 / BN: scores (log2 domain after `mul`), masked where
// the tile needs it, -> probabilities in place (those of keys past W: 0); row max
// and sum updated; corr gets the factors by which O must be rescaled once the PV
// product in flight has landed. Lazy: the base moves by the lazy rule above.
// Sums = false: the row sums come from the tensor pipe (row_sums_by_tensor), row_sum
// is left alone.
template <int W, int N, bool Lazy = false, bool Sums = true>
__device__ __forceinline__ void tile_softmax(float (&s)[N], float (&row_max)[2], float (&row_sum)[2], float (&corr)[2],
                                             const ScoreMap& smap, bool fold, float mul, bool masked, int n0, int r0,
                                             const SeqRows& seq, int wl, int wr, int t4) {
  if (!fold) {
    auto& s3 = *reinterpret_cast<float(*)[1][W / 8][4]>(&s);
    smap.apply(s3);
  }
  if (masked) {
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      const KeyBounds r = key_bounds(r0 + 8 * hh, seq, wl, wr);
#pragma unroll
      for (int j = 0; j < W / 8; ++j)
#pragma unroll
        for (int e = 0; e < 2; ++e)
          if (!r.has(n0 + j * 8 + 2 * t4 + e)) s[4 * j + 2 * hh + e] = -INFINITY;
    }
  }
#pragma unroll
  for (int hh = 0; hh < 2; ++hh) {
    // Row max and row sum as trees (depth log2(W / 4) instead of a chain of W / 4
    // dependent instructions): this runs between a GEMM's end and the next issue
    // of this consumer, where latency, not throughput, counts.
    float part_max[W / 8];
#pragma unroll
    for (int j = 0; j < W / 8; ++j) part_max[j] = fmaxf(s[4 * j + 2 * hh], s[4 * j + 2 * hh + 1]);
    float mx = tree_reduce<W / 8>(part_max, [](float a, float b) { return fmaxf(a, b); });
    const float tile_mx = quad_max(mx) * mul;
    if constexpr (Lazy)
      mx = tile_mx > row_max[hh] + kLazyRescaleLog2 ? tile_mx : row_max[hh];
    else
      mx = fmaxf(tile_mx, row_max[hh]);
    // A row that has seen only masked keys keeps max -inf; subtracting 0 keeps
    // its exponents at -inf (probability 0) instead of NaN.
    const float base_hh = mx == -INFINITY ? 0.f : mx;
    corr[hh] = ptx::ex2_approx(row_max[hh] - base_hh);
    row_max[hh] = mx;
    float part_sum[W / 8];
#pragma unroll
    for (int j = 0; j < W / 8; ++j) {
      const float p0 = ptx::ex2_approx(fmaf(s[4 * j + 2 * hh], mul, -base_hh));
      const float p1 = ptx::ex2_approx(fmaf(s[4 * j + 2 * hh + 1], mul, -base_hh));
      s[4 * j + 2 * hh] = p0;
      s[4 * j + 2 * hh + 1] = p1;
      part_sum[j] = p0 + p1;
    }
    if constexpr (Sums)
      row_sum[hh] = fmaf(row_sum[hh], corr[hh], tree_reduce<W / 8>(part_sum, [](float a, float b) { return a + b; }));
  }
  // Keys past the first W have probability 0.
#pragma unroll
  for (int i = W / 2; i < N; ++i) s[i] = 0.f;
}

}  // namespace flashpp::cuda::sm90
