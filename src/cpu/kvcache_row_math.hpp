#pragma once
// Small row helpers of the CPU KV-cache path: rounding a row to the storage
// dtype (the GPU keeps rotated q in its input dtype) and rotating a row.
#include <cstdint>

#include "common/half.hpp"
#include "common/kvcache_params.hpp"
#include "common/params.hpp"
#include "common/rotary.hpp"
#include "cpu/row_io.hpp"

namespace flashpp::cpu {

inline void round_row(ElemType t, float* x, int n) {
  if (t == ElemType::f16)
    for (int i = 0; i < n; ++i) x[i] = fp16_to_float(float_to_fp16(x[i]));
  else if (t == ElemType::bf16)
    for (int i = 0; i < n; ++i) x[i] = bf16_to_float(float_to_bf16(x[i]));
}

// Applies the rotary embedding of position pos to the first rotary_dim
// elements of x (fp32), with cos/sin read in the input dtype.
inline void rotate_row(const KVCacheParams& p, int pos, float* x, float* cs_scratch) {
  const int half = p.rotary_dim / 2;
  float* c = cs_scratch;
  float* s = cs_scratch + half;
  load_row(p.rotary_cos, p.attn.dtype, std::int64_t(pos) * p.rotary_cos_stride, half, c);
  load_row(p.rotary_sin, p.attn.dtype, std::int64_t(pos) * p.rotary_sin_stride, half, s);
  for (int i = 0; i < half; ++i) {
    const RotaryPair pr = rotary_pair(i, p.rotary_dim, p.rotary_interleaved);
    rotate_pair(x[pr.a], x[pr.b], c[i], s[i]);
  }
}

}  // namespace flashpp::cpu
