// CPU KV-cache append: k_new (rotated at its cache positions) and v_new are
// written into slots [cache_seqlens[b], cache_seqlens[b] + seqlen_new) of
// sequence b; no other slot is touched.
#include <vector>

#include "cpu/kvcache_backend.hpp"
#include "cpu/kvcache_row_math.hpp"
#include "cpu/row_io.hpp"
#include "cpu/tasks.hpp"

namespace flashpp::cpu {

void kvcache_append(const KVCacheParams& p) {
  if (p.k_new == nullptr || p.seqlen_new == 0) return;
  const AttnParams& a = p.attn;
  run_parallel(std::size_t(a.batch), [&](auto&& for_each) {
    std::vector<float> row(std::size_t(a.head_dim > a.head_dim_v ? a.head_dim : a.head_dim_v));
    std::vector<float> cs(std::size_t(p.rotary_dim > 0 ? p.rotary_dim : 2));
    for_each([&](std::size_t bi) {
      const int b = int(bi);
      const int len = cache_len(p, b);
      for (int j = 0; j < p.seqlen_new; ++j) {
        const int pos = len + j;
        const std::int64_t kslot = cache_slot_offset(p, b, pos, a.k_batch_stride, a.k_row_stride);
        const std::int64_t vslot = cache_slot_offset(p, b, pos, a.v_batch_stride, a.v_row_stride);
        for (int h = 0; h < a.heads_kv; ++h) {
          load_row(p.k_new, a.dtype, b * p.kn_batch_stride + j * p.kn_row_stride + h * p.kn_head_stride, a.head_dim,
                   row.data());
          if (p.rotary_cos) rotate_row(p, pos, row.data(), cs.data());
          store_row(const_cast<void*>(a.k), a.dtype, kslot + h * a.k_head_stride, a.head_dim, row.data());
          load_row(p.v_new, a.dtype, b * p.vn_batch_stride + j * p.vn_row_stride + h * p.vn_head_stride,
                   a.head_dim_v, row.data());
          store_row(const_cast<void*>(a.v), a.dtype, vslot + h * a.v_head_stride, a.head_dim_v, row.data());
        }
      }
    });
  });
}

}  // namespace flashpp::cpu
