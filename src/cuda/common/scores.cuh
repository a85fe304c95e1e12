#pragma once
// Raw q.k products -> scores in the log2 domain, shared by forward and backward so
// both apply softcap and the scale identically:
//   no softcap: x = qk * scale * log2(e)
//   softcap:    t = tanh(qk * scale / cap),  x = t * cap * log2(e)
// The backward also needs dx/d(qk) / scale = 1 - t^2 (1 without softcap).
#include <cmath>

#include "common/params.hpp"
#include "common/score_fold.hpp"
#include "cuda/ptx/math.cuh"

namespace flashpp::cuda {

struct ScoreMap {
  float pre;     // multiplier inside tanh (softcap only)
  float log2sc;  // multiplier taking the (capped) score to the log2 domain
  float inv_log2sc;
  bool capped;

  __device__ __forceinline__ static ScoreMap from(const AttnParams& p) {
    ScoreMap m;
    m.capped = p.softcap > 0.f;
    m.pre = m.capped ? p.scale / p.softcap : 0.f;
    m.log2sc = m.capped ? p.softcap * 1.4426950408889634f : p.scale_log2;
    m.inv_log2sc = m.capped ? 1.f / m.log2sc : 0.f;
    return m;
  }
  // True when the log2-domain map is a positive multiple of the raw product
  // (common/score_fold.hpp). Softcap, or a zero or negative softmax_scale, take apply().
  __device__ __forceinline__ bool folds() const { return score_map_folds(capped, log2sc); }

  // Raw products -> log2-domain scores, in place. The softcap test sits outside the
  // element loop so the plain path stays a single multiply per element.
  template <int MT, int NT>
  __device__ __forceinline__ void apply(float (&s)[MT][NT][4]) const {
    if (capped) {
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int nt = 0; nt < NT; ++nt)
#pragma unroll
          for (int e = 0; e < 4; ++e) s[mt][nt][e] = tanhf(s[mt][nt][e] * pre) * log2sc;
    } else {
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int nt = 0; nt < NT; ++nt)
#pragma unroll
          for (int e = 0; e < 4; ++e) s[mt][nt][e] *= log2sc;
    }
  }
  // With softcap, x = t * log2sc with t = tanh(...): the backward's factor 1 - t^2.
  // A masked score (-inf) clamps to t = -1, giving 0 rather than -inf (and NaN later).
  __device__ __forceinline__ float dtanh_from_score(float x) const {
    const float t = fmaxf(x * inv_log2sc, -1.f);
    return 1.f - t * t;
  }
};

// Backward, one score element: x (log2 domain, -inf if masked), the row's LSE offset
// and D, and dP -> the probability P (returned) and dS (written to dp).
// `mul` is the map's log2sc when the scores are still raw products (ScoreMap::folds),
// 1 when apply() has already mapped them.
template <bool CAPPED>
__device__ __forceinline__ float prob_and_grad(float x, float mul, float lse2, float dsum, float& dp,
                                               const ScoreMap& m) {
  const float pr = ptx::ex2_approx(fmaf(x, mul, -lse2));
  float ds = pr * (dp - dsum);
  if constexpr (CAPPED) ds *= m.dtanh_from_score(x);
  dp = ds;
  return pr;
}

// LSE (natural log) -> the log2-domain offset that turns scores into probabilities.
// A row that saw no key (LSE = -inf) and rows past the sequence get +inf, so their
// probabilities are exactly 0 instead of NaN.
__device__ __forceinline__ float lse_to_log2(float lse, bool valid) {
  return (valid && lse != -INFINITY) ? lse * 1.4426950408889634f : INFINITY;
}

}  // namespace flashpp::cuda
