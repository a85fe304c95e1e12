// CPU forward: one task per (batch, head, block of kBlockQ query rows). Each
// task streams the K/V tiles its rows can see, keeping a running row max m,
// running sum l and an unnormalized accumulator (online softmax); O and LSE
// are normalized and written once at the end.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "common/sequence.hpp"
#include "cpu/cpu_backend.hpp"
#include "cpu/row_io.hpp"
#include "cpu/tasks.hpp"
#include "cpu/tiles.hpp"

namespace flashpp::cpu {

std::size_t forward_workspace_bytes(const AttnParams&) { return 0; }

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

struct ForwardScratch {
  int dvp;
  std::vector<float> q, kt, v, s, acc, m, l, row;
  explicit ForwardScratch(const AttnParams& p)
      : dvp(padded(p.head_dim_v)),
        q(std::size_t(kBlockQ) * p.head_dim),
        kt(std::size_t(p.head_dim) * kBlockK),
        v(std::size_t(kBlockK) * dvp),
        s(std::size_t(kBlockQ) * kBlockK),
        acc(std::size_t(kBlockQ) * dvp),
        m(kBlockQ),
        l(kBlockQ),
        row(std::max(p.head_dim, p.head_dim_v)) {}
};

void forward_task(const AttnParams& p, const RowBlockTask& t, ForwardScratch& w) {
  const int d = p.head_dim, dv = p.head_dim_v, dvp = w.dvp;
  const SequenceInfo& s = t.seq;
  const int hk = t.head / p.gqa_ratio;
  const int rows = t.row1 - t.row0;

  for (int r = 0; r < rows; ++r)
    load_row(p.q, p.dtype,
             row_offset(p.q_batch_stride, p.q_row_stride, p.q_head_stride, t.batch, s.q_row0 + t.row0 + r, t.head), d,
             &w.q[std::size_t(r) * d]);
  std::fill(w.acc.begin(), w.acc.end(), 0.f);
  std::fill(w.m.begin(), w.m.end(), kNegInf);
  std::fill(w.l.begin(), w.l.end(), 0.f);

  const VisibleRange keys = block_visible_keys(t.row0, t.row1, s.seqlen_q, s.seqlen_k, p);
  for (std::int64_t j0 = keys.lo; j0 < keys.hi; j0 += kBlockK) {
    const int cols = int(std::min<std::int64_t>(kBlockK, keys.hi - j0));
    for (int c = 0; c < cols; ++c) {
      const std::int64_t row = s.k_row0 + j0 + c;
      load_row(p.k, p.dtype, row_offset(p.k_batch_stride, p.k_row_stride, p.k_head_stride, t.batch, row, hk), d,
               w.row.data());
      for (int x = 0; x < d; ++x) w.kt[std::size_t(x) * kBlockK + c] = w.row[x];
      load_row(p.v, p.dtype, row_offset(p.v_batch_stride, p.v_row_stride, p.v_head_stride, t.batch, row, hk), dv,
               &w.v[std::size_t(c) * dvp]);
    }
    gemm_abt(w.q.data(), d, rows, w.kt.data(), d, w.s.data(), p.dtype == ElemType::f32);

    for (int r = 0; r < rows; ++r) {
      float* srow = &w.s[std::size_t(r) * kBlockK];
      const ColRange cr = visible_cols(t.row0 + r, j0, cols, s.seqlen_q, s.seqlen_k, p);
      if (cr.lo >= cr.hi) {
        std::fill(srow, srow + kBlockK, 0.f);
        continue;
      }
      float tile_max = kNegInf;
      for (int c = cr.lo; c < cr.hi; ++c) {
        float x = srow[c] * p.scale;
        if (p.softcap > 0.f) x = p.softcap * std::tanh(x / p.softcap);
        srow[c] = x;
        tile_max = std::max(tile_max, x);
      }
      const float m_new = std::max(w.m[r], tile_max);
      // alpha rescales what was accumulated under the old max (0 when it was -inf).
      const float alpha = w.m[r] == kNegInf ? 0.f : exp_fast(w.m[r] - m_new);
      float sum = 0.f;
#pragma omp simd reduction(+ : sum)
      for (int c = 0; c < kBlockK; ++c) {
        const float e = exp_fast(srow[c] - m_new);
        const float pc = (c >= cr.lo && c < cr.hi) ? e : 0.f;
        srow[c] = pc;
        sum += pc;
      }
      if (alpha != 1.f) {
        float* arow = &w.acc[std::size_t(r) * dvp];
#pragma omp simd
        for (int x = 0; x < dvp; ++x) arow[x] *= alpha;
      }
      w.l[r] = w.l[r] * alpha + sum;
      w.m[r] = m_new;
    }
    gemm_ab_acc(w.s.data(), rows, cols, w.v.data(), dvp, dvp, w.acc.data(), dvp);
  }

  for (int r = 0; r < rows; ++r) {
    const std::int64_t qrow = s.q_row0 + t.row0 + r;
    const std::int64_t ooff = row_offset(p.o_batch_stride, p.o_row_stride, p.o_head_stride, t.batch, qrow, t.head);
    float* arow = &w.acc[std::size_t(r) * dvp];
    const bool empty = w.l[r] == 0.f;
    if (empty) {
      store_zero_row(p.o, p.dtype, ooff, dv);
    } else {
      const float inv = 1.f / w.l[r];
      for (int x = 0; x < dv; ++x) arow[x] *= inv;
      store_row(p.o, p.dtype, ooff, dv, arow);
    }
    if (p.lse)
      p.lse[t.batch * p.lse_batch_stride + t.head * p.lse_head_stride + s.lse_row0 + t.row0 + r] =
          empty ? kNegInf : w.m[r] + std::log(w.l[r]);
  }
}

}  // namespace

void forward(const AttnParams& p, void*) {
  const std::vector<RowBlockTask> tasks = query_block_tasks(p, kBlockQ);
  run_parallel(tasks.size(), [&](auto&& for_each) {
    ForwardScratch w(p);
    for_each([&](std::size_t i) { forward_task(p, tasks[i], w); });
  });
}

}  // namespace flashpp::cpu
