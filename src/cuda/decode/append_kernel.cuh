#pragma once
// Appends k_new (rotated at its cache positions) and v_new into the cache
// before the attention kernel reads it (same stream, so ordering is free).
// One block per (sequence, new token); threads walk the heads' elements. The
// bytes are tiny next to the cache read, so the kernel favours simplicity:
// each k element is produced from itself and its rotary partner.
#include <cstdint>

#include "common/kvcache_params.hpp"
#include "common/rotary.hpp"
#include "cuda/common/element.cuh"
#include "cuda/decode/validation.cuh"
#include "cuda/ptx/grid_dependency.cuh"

namespace flashpp::cuda::decode {

template <typename T>
__global__ void __launch_bounds__(128) append_kernel(const __grid_constant__ KVCacheParams p) {
  const int b = blockIdx.x / p.seqlen_new, j = blockIdx.x % p.seqlen_new;
  // A programmatic dependent (sm90): the tokens may come from the kernel before;
  // the attention kernel after it may be scheduled at once and waits for this grid.
  ptx::wait_prior_grids();
  ptx::allow_dependent_launch();
  if (p.validate_on_device && !sequence_valid(p, b)) return;
  const AttnParams& a = p.attn;
  const int pos = cache_len(p, b) + j;
  const T* kn = static_cast<const T*>(p.k_new) + b * p.kn_batch_stride + j * p.kn_row_stride;
  const T* vn = static_cast<const T*>(p.v_new) + b * p.vn_batch_stride + j * p.vn_row_stride;
  T* kc = static_cast<T*>(const_cast<void*>(a.k)) + cache_slot_offset(p, b, pos, a.k_batch_stride, a.k_row_stride);
  T* vc = static_cast<T*>(const_cast<void*>(a.v)) + cache_slot_offset(p, b, pos, a.v_batch_stride, a.v_row_stride);
  const T* cs = static_cast<const T*>(p.rotary_cos) + std::int64_t(pos) * p.rotary_cos_stride;
  const T* sn = static_cast<const T*>(p.rotary_sin) + std::int64_t(pos) * p.rotary_sin_stride;

  for (int e = threadIdx.x; e < a.heads_kv * a.head_dim; e += blockDim.x) {
    const int h = e / a.head_dim, x = e % a.head_dim;
    const T* src = kn + h * p.kn_head_stride;
    float val = Element<T>::to_float(src[x]);
    if (p.rotary_cos != nullptr && x < p.rotary_dim) {
      bool first = false;
      const int pr = rotary_pair_of(x, p.rotary_dim, p.rotary_interleaved, first);
      const RotaryPair pair = rotary_pair(pr, p.rotary_dim, p.rotary_interleaved);
      float xa = Element<T>::to_float(src[pair.a]), xb = Element<T>::to_float(src[pair.b]);
      rotate_pair(xa, xb, Element<T>::to_float(cs[pr]), Element<T>::to_float(sn[pr]));
      val = first ? xa : xb;
    }
    kc[h * a.k_head_stride + x] = Element<T>::from_float(val);
  }
  for (int e = threadIdx.x; e < a.heads_kv * a.head_dim_v; e += blockDim.x) {
    const int h = e / a.head_dim_v, x = e % a.head_dim_v;
    vc[h * a.v_head_stride + x] = vn[h * p.vn_head_stride + x];
  }
}

}  // namespace flashpp::cuda::decode
