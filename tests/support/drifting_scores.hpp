#pragma once
// Inputs whose row max keeps moving along the keys: every query of head 0 scores
// key j about `drift` log2 units per 128 keys higher than key j - 128, every query
// of head 1 that much lower, plus noise. Random inputs settle a row's max within
// its first key tiles; these make an online softmax move it on almost every tile
// (in either walk direction), which a kernel that rescales lazily, or skips the
// rescale for warps whose rows did not move, must follow exactly.
#include <cmath>
#include <cstdint>
#include <random>
#include <stdexcept>

#include "support/attention_case.hpp"
#include "support/attention_tensors.hpp"

namespace flashpp::test {

// For fixed-length cases with two query and two kv heads and the default scale
// 1 / sqrt(d): q = +1 (head 0) or -1 (head 1) in every column, k[j] = alpha j +
// N(0, 1/4), so score j = +-alpha j sqrt(d) (natural units) plus noise.
inline void make_drifting_scores(const AttnCase& c, AttnTensors& t, std::mt19937_64& rng, double drift = 3.0) {
  // The index arithmetic below is that layout's; any other case would be filled wrongly.
  if (c.varlen || c.heads_q != 2 || c.heads_kv != 2 || c.softmax_scale.has_value())
    throw std::invalid_argument("make_drifting_scores: needs a fixed-length case with 2 query and 2 kv heads "
                                "and the default scale");
  const int d = c.head_dim;
  const double alpha = drift / 128.0 / (std::sqrt(double(d)) * 1.4426950408889634);
  std::normal_distribution<double> noise(0.0, 0.5);
  for (int b = 0; b < c.batch; ++b) {
    for (int i = 0; i < c.seqlen_q; ++i)
      for (int h = 0; h < 2; ++h)
        for (int x = 0; x < d; ++x)
          t.q.set(((std::int64_t(b) * c.seqlen_q + i) * 2 + h) * d + x, h == 0 ? 1.0 : -1.0);
    for (int j = 0; j < c.seqlen_k; ++j)
      for (int h = 0; h < 2; ++h)
        for (int x = 0; x < d; ++x)
          t.k.set(((std::int64_t(b) * c.seqlen_k + j) * 2 + h) * d + x, alpha * j + noise(rng));
  }
}

}  // namespace flashpp::test
