#pragma once
// Row statistics of the online softmax for the accumulator layout of mma.m16n8k16:
// each lane holds two rows per 16-row block (g and g+8) and 2 of every 8 columns, so
// a row's full max needs the 4 lanes of a quad (xor 1, 2). Scores arrive already in
// the log2 domain (scale * log2(e) folded in), so exp() is a single ex2.
#include <cmath>

#include "cuda/ptx/math.cuh"

namespace flashpp::cuda {

__device__ __forceinline__ float quad_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}

__device__ __forceinline__ float quad_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

// The lazy rescale's headroom (log2 domain), shared by every kernel that uses it:
// the max that exponents are taken against moves only when a row's new max exceeds
// it by more than this, so probabilities stay below 2^8, which fp32 sums and 16-bit
// P hold at full relative precision, and the output accumulator is rescaled only
// when some row's max jumps that far.
inline constexpr float kLazyRescaleLog2 = 8.f;

// Running max and (lane-partial) sum of each row a lane holds. Normalization is
// deferred to the end (FA2): the output accumulator is only rescaled when the max
// grows, and the partial sums are reduced across the quad once.
template <int MT>
struct OnlineSoftmax {
  float max[MT][2];
  float sum[MT][2];

  __device__ __forceinline__ void init() {
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int hh = 0; hh < 2; ++hh) {
        max[mt][hh] = -INFINITY;
        sum[mt][hh] = 0.f;
      }
  }

  // s: scores (-inf where masked) that reach the log2 domain when multiplied by
  // `scale` (> 0: the max of s then gives the max of s * scale, so the multiply folds
  // into the exponent's FFMA; 1 when s is already in the log2 domain) -> probabilities relative to the new running max
  // (kept in the log2 domain); o: output accumulator rescaled to that max.
  template <int NS, int NO>
  __device__ __forceinline__ void update(float (&s)[MT][NS][4], float (&o)[MT][NO][4], float scale = 1.f) {
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int hh = 0; hh < 2; ++hh) {
        float mx = -INFINITY;
#pragma unroll
        for (int nt = 0; nt < NS; ++nt) mx = fmaxf(mx, fmaxf(s[mt][nt][2 * hh], s[mt][nt][2 * hh + 1]));
        mx = fmaxf(quad_max(mx) * scale, max[mt][hh]);
        // A row that has seen only masked keys keeps max -inf; subtracting 0 instead
        // keeps every exponent -inf (probability 0) rather than NaN.
        const float base = mx == -INFINITY ? 0.f : mx;
        const float corr = ptx::ex2_approx(max[mt][hh] - base);
        max[mt][hh] = mx;
#pragma unroll
        for (int nt = 0; nt < NO; ++nt) {
          o[mt][nt][2 * hh] *= corr;
          o[mt][nt][2 * hh + 1] *= corr;
        }
        sum[mt][hh] = exponentiate(s, mt, hh, scale, base, sum[mt][hh] * corr);
      }
  }

  // update() that skips the rescale of o while no row's max has grown by more
  // than kLazyRescaleLog2 past the max its exponents are taken against:
  // probabilities are then relative to that older max. The sum and o share the
  // reference max, so the result is the same softmax.
  // The test is warp-uniform (any row of the warp over the slack rescales every
  // row as update() does), so a warp either runs the rescale or skips it whole.
  // Decode tiles stream K/V with one warp per scheduler, where the rescale's
  // MT * NO * 4 multiplies per tile are a fifth of the warp's instructions.
  // `scale` as in update().
  template <int NS, int NO>
  __device__ __forceinline__ void update_lazy(float (&s)[MT][NS][4], float (&o)[MT][NO][4], float scale = 1.f) {
    float mx[MT][2];
    bool grow = false;
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int hh = 0; hh < 2; ++hh) {
        float m = -INFINITY;
#pragma unroll
        for (int nt = 0; nt < NS; ++nt) m = fmaxf(m, fmaxf(s[mt][nt][2 * hh], s[mt][nt][2 * hh + 1]));
        mx[mt][hh] = quad_max(m) * scale;
        grow = grow || mx[mt][hh] > max[mt][hh] + kLazyRescaleLog2;
      }
    if (__any_sync(0xffffffffu, grow)) {
      update(s, o, scale);
      return;
    }
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int hh = 0; hh < 2; ++hh) {
        // max stays -inf only while every key so far was masked (s = -inf too).
        const float base = max[mt][hh] == -INFINITY ? 0.f : max[mt][hh];
        sum[mt][hh] = exponentiate(s, mt, hh, scale, base, sum[mt][hh]);
      }
  }

  // Row hh of block mt: scores -> probabilities 2^(s * scale - base) in place; returns
  // `part` plus their lane-partial sum.
  template <int NS>
  __device__ __forceinline__ static float exponentiate(float (&s)[MT][NS][4], int mt, int hh, float scale, float base,
                                                       float part) {
#pragma unroll
    for (int nt = 0; nt < NS; ++nt) {
      const float p0 = ptx::ex2_approx(fmaf(s[mt][nt][2 * hh], scale, -base));
      const float p1 = ptx::ex2_approx(fmaf(s[mt][nt][2 * hh + 1], scale, -base));
      s[mt][nt][2 * hh] = p0;
      s[mt][nt][2 * hh + 1] = p1;
      part += p0 + p1;
    }
    return part;
  }
};

}  // namespace flashpp::cuda
