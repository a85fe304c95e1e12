#pragma once
// Rotary position embedding, shared by the CPU backend and the CUDA kernels so
// both pair the same elements and rotate with the same arithmetic (fp32).
// cos/sin hold rotary_dim / 2 entries per position; pair p rotates by entry p:
//   interleaved (GPT-J):      elements (2p, 2p + 1)
//   non-interleaved (NeoX):   elements (p, p + rotary_dim / 2)
//   (x_a, x_b) -> (x_a * cos - x_b * sin, x_a * sin + x_b * cos)
// Elements at or past rotary_dim are left unchanged.
#ifndef FLASHPP_HD
#if defined(__CUDACC__)
#define FLASHPP_HD __host__ __device__ __forceinline__
#else
#define FLASHPP_HD inline
#endif
#endif

namespace flashpp {

struct RotaryPair {
  int a, b;  // element indices of pair p
};

FLASHPP_HD RotaryPair rotary_pair(int p, int rotary_dim, bool interleaved) {
  return interleaved ? RotaryPair{2 * p, 2 * p + 1} : RotaryPair{p, p + rotary_dim / 2};
}

// The pair element e (< rotary_dim) belongs to, and whether it is the pair's first.
FLASHPP_HD int rotary_pair_of(int e, int rotary_dim, bool interleaved, bool& first) {
  if (interleaved) {
    first = (e & 1) == 0;
    return e >> 1;
  }
  const int half = rotary_dim / 2;
  first = e < half;
  return first ? e : e - half;
}

FLASHPP_HD void rotate_pair(float& xa, float& xb, float c, float s) {
  const float a = xa * c - xb * s;
  xb = xa * s + xb * c;
  xa = a;
}

// Position of query row i of a sequence holding cache_len tokens before the
// call: its own position when causal/windowed, else the first new position.
FLASHPP_HD int rotary_q_position(int cache_len, int i, bool per_row) { return per_row ? cache_len + i : cache_len; }

}  // namespace flashpp
