// CPU attention over a KV cache: one task per (sequence, kv head) processes
// every query row that shares the kv head (GQA packing) and every query
// position, so each cached K/V row is converted once per task. The visible
// keys are cut into num_splits spans (common/kvcache_params.hpp); each span
// runs its own online softmax, and the partial (O, LSE) pairs merge through
// common/lse_merge.hpp exactly as the CUDA combine does.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "common/lse_merge.hpp"
#include "common/mask.hpp"
#include "common/rotary.hpp"
#include "cpu/kvcache_backend.hpp"
#include "cpu/kvcache_row_math.hpp"
#include "cpu/row_io.hpp"
#include "cpu/tasks.hpp"

namespace flashpp::cpu {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr int kTile = 64;  // keys converted to fp32 at a time; also the split granule

struct TaskScratch {
  int rows, d, dv;
  std::vector<float> q;        // rows x d, rotated and rounded like the GPU's operands
  std::vector<float> k, v;     // kTile x d, kTile x dv
  std::vector<float> acc;      // rows x dv, unnormalized
  std::vector<float> m, l;     // running max / sum per row
  std::vector<float> part_o;   // splits x rows x dv, normalized partial outputs
  std::vector<float> part_lse; // splits x rows
  std::vector<float> cs;       // rotary cos/sin row
  TaskScratch(const KVCacheParams& p, int splits)
      : rows(p.attn.seqlen_q * p.attn.gqa_ratio),
        d(p.attn.head_dim),
        dv(p.attn.head_dim_v),
        q(std::size_t(rows) * d),
        k(std::size_t(kTile) * d),
        v(std::size_t(kTile) * dv),
        acc(std::size_t(rows) * dv),
        m(rows),
        l(rows),
        part_o(std::size_t(splits) * rows * dv),
        part_lse(std::size_t(splits) * rows),
        cs(std::size_t(std::max(p.rotary_dim, 2))) {}
};

// Partial attention of every row over keys [span.lo, span.hi) -> part_o/part_lse[s].
void attend_span(const KVCacheParams& p, int b, int hk, int seqlen_k, KeySpan span, int s, TaskScratch& w) {
  const AttnParams& a = p.attn;
  const int g = a.gqa_ratio, R = w.rows, d = w.d, dv = w.dv;
  std::fill(w.acc.begin(), w.acc.end(), 0.f);
  std::fill(w.m.begin(), w.m.end(), kNegInf);
  std::fill(w.l.begin(), w.l.end(), 0.f);
  for (int j0 = span.lo; j0 < span.hi; j0 += kTile) {
    const int cols = std::min(kTile, span.hi - j0);
    for (int c = 0; c < cols; ++c) {
      const int j = j0 + c;
      load_row(a.k, a.dtype, cache_slot_offset(p, b, j, a.k_batch_stride, a.k_row_stride) + hk * a.k_head_stride, d,
               &w.k[std::size_t(c) * d]);
      load_row(a.v, a.dtype, cache_slot_offset(p, b, j, a.v_batch_stride, a.v_row_stride) + hk * a.v_head_stride, dv,
               &w.v[std::size_t(c) * dv]);
    }
    for (int r = 0; r < R; ++r) {
      const VisibleRange vr = visible_keys(r / g, a.seqlen_q, seqlen_k, a.window_left, a.window_right);
      const int lo = int(std::max<std::int64_t>(vr.lo, j0)) - j0;
      const int hi = int(std::min<std::int64_t>(vr.hi, j0 + cols)) - j0;
      if (lo >= hi) continue;
      float sc[kTile];
      float tile_max = kNegInf;
      const float* qr = &w.q[std::size_t(r) * d];
      for (int c = lo; c < hi; ++c) {
        const float* kr = &w.k[std::size_t(c) * d];
        float dot = 0.f;
        for (int x = 0; x < d; ++x) dot += qr[x] * kr[x];
        float sx = dot * a.scale;
        if (a.softcap > 0.f) sx = a.softcap * std::tanh(sx / a.softcap);
        sc[c] = sx;
        tile_max = std::max(tile_max, sx);
      }
      const float m_new = std::max(w.m[r], tile_max);
      const float alpha = w.m[r] == kNegInf ? 0.f : std::exp(w.m[r] - m_new);
      float* ar = &w.acc[std::size_t(r) * dv];
      if (alpha != 1.f)
        for (int x = 0; x < dv; ++x) ar[x] *= alpha;
      float sum = 0.f;
      for (int c = lo; c < hi; ++c) {
        const float e = std::exp(sc[c] - m_new);
        sum += e;
        const float* vr_ = &w.v[std::size_t(c) * dv];
        for (int x = 0; x < dv; ++x) ar[x] += e * vr_[x];
      }
      w.l[r] = w.l[r] * alpha + sum;
      w.m[r] = m_new;
    }
  }
  for (int r = 0; r < R; ++r) {
    float* po = &w.part_o[(std::size_t(s) * R + r) * dv];
    const float* ar = &w.acc[std::size_t(r) * dv];
    const bool empty = w.l[r] == 0.f;
    const float inv = empty ? 0.f : 1.f / w.l[r];
    for (int x = 0; x < dv; ++x) po[x] = ar[x] * inv;
    w.part_lse[std::size_t(s) * R + r] = empty ? kNegInf : w.m[r] + std::log(w.l[r]);
  }
}

void attention_task(const KVCacheParams& p, int b, int hk, TaskScratch& w) {
  const AttnParams& a = p.attn;
  const int g = a.gqa_ratio, R = w.rows, d = w.d, dv = w.dv, splits = p.num_splits;
  const int len = cache_len(p, b);
  const int seqlen_k = len + p.seqlen_new;

  for (int r = 0; r < R; ++r) {
    const int i = r / g, h = hk * g + r % g;
    float* qr = &w.q[std::size_t(r) * d];
    load_row(a.q, a.dtype, b * a.q_batch_stride + i * a.q_row_stride + h * a.q_head_stride, d, qr);
    if (p.rotary_cos) {
      rotate_row(p, rotary_q_position(len, i, p.rotary_q_per_row), qr, w.cs.data());
      round_row(a.dtype, qr, d);
    }
  }

  // Visible ranges grow with the query position, so the first and last
  // positions bound the union every split is cut from.
  const VisibleRange first = visible_keys(0, a.seqlen_q, seqlen_k, a.window_left, a.window_right);
  const VisibleRange last = visible_keys(a.seqlen_q - 1, a.seqlen_q, seqlen_k, a.window_left, a.window_right);
  const int lo = int(first.lo), hi = int(last.hi);
  for (int s = 0; s < splits; ++s)
    attend_span(p, b, hk, seqlen_k, split_span(lo, hi, kTile, splits, s), s, w);

  std::vector<float> out(static_cast<std::size_t>(dv));
  for (int r = 0; r < R; ++r) {
    const int i = r / g, h = hk * g + r % g;
    LseMerge merge;
    for (int s = 0; s < splits; ++s) merge.add(w.part_lse[std::size_t(s) * R + r]);
    const float lse = merge.lse();
    std::fill(out.begin(), out.end(), 0.f);
    for (int s = 0; s < splits; ++s) {
      const float wgt = merge_weight(w.part_lse[std::size_t(s) * R + r], lse);
      if (wgt == 0.f) continue;
      const float* po = &w.part_o[(std::size_t(s) * R + r) * dv];
      for (int x = 0; x < dv; ++x) out[x] += wgt * po[x];
    }
    const std::int64_t ooff = b * a.o_batch_stride + i * a.o_row_stride + h * a.o_head_stride;
    if (lse == kNegInf)
      store_zero_row(a.o, a.dtype, ooff, dv);
    else
      store_row(a.o, a.dtype, ooff, dv, out.data());
    if (a.lse) a.lse[b * a.lse_batch_stride + h * a.lse_head_stride + i] = lse;
  }
}

}  // namespace

int kvcache_num_splits(const KVCacheParams& p) {
  if (p.num_splits > 0) return p.num_splits;
  const int pieces = (p.capacity + 4095) / 4096;
  return std::clamp(pieces, 1, 8);
}

std::size_t kvcache_workspace_bytes(const KVCacheParams&) { return 0; }

void attention_with_kvcache(const KVCacheParams& p, void*) {
  if (p.validation_status)
    for (int i = 0; i < 4; ++i) p.validation_status[i] = 0;
  kvcache_append(p);
  const AttnParams& a = p.attn;
  if (a.seqlen_q == 0) return;
  const std::size_t tasks = std::size_t(a.batch) * a.heads_kv;
  run_parallel(tasks, [&](auto&& for_each) {
    TaskScratch w(p, p.num_splits);
    for_each([&](std::size_t t) { attention_task(p, int(t / a.heads_kv), int(t % a.heads_kv), w); });
  });
}

}  // namespace flashpp::cpu
