#pragma once
// The one place partial attention results are merged. Attention over disjoint
// key sets K_1..K_n gives normalized partial outputs O_k with log-sum-exps
// LSE_k; over their union
//   LSE = log(sum_k exp(LSE_k))            O = sum_k exp(LSE_k - LSE) * O_k
// exactly. A part that saw no key has LSE_k = -inf and weight 0 (its O_k is
// never read, so it may hold anything); if every part is empty, LSE = -inf
// and O = 0. Used by the CPU backend's split-KV path and the CUDA decode
// kernel (merging its warps), host and device alike; the CUDA split combine
// (cuda/decode/split_combine.cuh) folds the same sums chunk by chunk.
#include <cmath>

#ifndef FLASHPP_HD
#if defined(__CUDACC__)
#define FLASHPP_HD __host__ __device__ __forceinline__
#else
#define FLASHPP_HD inline
#endif
#endif

namespace flashpp {

// Running logsumexp of partial LSEs (natural log), stable for any magnitudes.
struct LseMerge {
  float max = -INFINITY;  // largest LSE_k seen
  float sum = 0.f;        // sum_k exp(LSE_k - max)

  FLASHPP_HD void add(float part_lse) {
    if (part_lse == -INFINITY) return;
    if (part_lse > max) {
      sum = sum * expf(max - part_lse) + 1.f;  // exp(-inf) = 0 on the first part
      max = part_lse;
    } else {
      sum += expf(part_lse - max);
    }
  }

  // Folds in another running merge (tree reductions across threads).
  FLASHPP_HD void add(const LseMerge& o) {
    if (o.max == -INFINITY) return;
    if (max == -INFINITY) {
      *this = o;
      return;
    }
    const float m = fmaxf(max, o.max);
    sum = sum * expf(max - m) + o.sum * expf(o.max - m);
    max = m;
  }

  FLASHPP_HD float lse() const { return sum > 0.f ? max + logf(sum) : -INFINITY; }
};

// Weight of a part in the merged output: exp(LSE_k - LSE), 0 for empty parts.
FLASHPP_HD float merge_weight(float part_lse, float total_lse) {
  return part_lse == -INFINITY ? 0.f : expf(part_lse - total_lse);
}

// LSE (natural log) of an online-softmax state kept in the log2 domain: the
// running max m2 of scores * log2(e) and the sum l of exp2(score - m2).
FLASHPP_HD float lse_from_log2_state(float m2, float l) {
  return l > 0.f ? (m2 + log2f(l)) * 0.69314718055994531f : -INFINITY;
}

}  // namespace flashpp
