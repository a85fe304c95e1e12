#pragma once
// Whether the log2-domain score is a positive multiple of the raw q.k product: no
// softcap and a positive scale. The multiply then folds into the softmax's exponent
// (one FFMA per element), and the maximum of the raw products is the maximum of the
// scores. The kernels' ScoreMap::folds (cuda/common/scores.cuh) and the host's
// plain-loop test (cuda/sm90/plain_loop.hpp) both ask this one rule.
#if defined(__CUDACC__)
#define FLASHPP_SCORE_FOLD_HD __host__ __device__ __forceinline__
#else
#define FLASHPP_SCORE_FOLD_HD inline
#endif

namespace flashpp {

// capped: a softcap applies; log2_multiplier: what takes the (capped) score to the
// log2 domain (softmax_scale * log2(e) without a softcap).
FLASHPP_SCORE_FOLD_HD bool score_map_folds(bool capped, float log2_multiplier) {
  return !capped && log2_multiplier > 0.f;
}

}  // namespace flashpp

#undef FLASHPP_SCORE_FOLD_HD
