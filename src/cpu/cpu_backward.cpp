// CPU backward, recomputing P = exp(S - LSE) tile by tile:
//   pass 0: D = rowsum(dO * O) per query row (into the workspace);
//   pass 1: one task per (batch, kv head, key block) accumulates dK and dV over
//           every query head of its GQA group and every query block that sees it;
//   pass 2: one task per (batch, query head, query block) accumulates dQ.
// Each gradient element has one owner task, so no atomics and the result is
// deterministic for any thread count (P is recomputed twice; on the CPU that
// is cheaper than synchronizing dQ).
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

namespace {

// D for (head h, global query row) lives at d_sum[h * total_q + row].
std::int64_t total_q_rows(const AttnParams& p) {
  return p.cu_seqlens_q ? p.total_q : std::int64_t(p.batch) * p.seqlen_q;
}
std::int64_t global_q_row(const AttnParams& p, int b, const SequenceInfo& s, std::int64_t r) {
  return p.cu_seqlens_q ? s.q_row0 + r : std::int64_t(b) * p.seqlen_q + r;
}

float row_dot(const float* a, const float* b, int n) {
  float acc = 0.f;
#pragma omp simd reduction(+ : acc)
  for (int i = 0; i < n; ++i) acc += a[i] * b[i];
  return acc;
}

float lse_at(const AttnParams& p, int b, int h, const SequenceInfo& s, std::int64_t r) {
  return p.lse[b * p.lse_batch_stride + h * p.lse_head_stride + s.lse_row0 + r];
}

// Query-side rows of one (batch, query head, query block) tile in fp32; q and
// dout rows are zero padded to whole register blocks.
struct QueryTile {
  int dp, dvp;
  std::vector<float> q, dout, lse, dsum;
  explicit QueryTile(const AttnParams& p)
      : dp(padded(p.head_dim)),
        dvp(padded(p.head_dim_v)),
        q(std::size_t(kBlockQ) * dp),
        dout(std::size_t(kBlockQ) * dvp),
        lse(kBlockQ),
        dsum(kBlockQ) {}

  void load(const AttnParams& p, const float* d_sum, int b, int h, const SequenceInfo& s, int r0, int rows) {
    const std::int64_t tq = total_q_rows(p);
    for (int r = 0; r < rows; ++r) {
      const std::int64_t row = s.q_row0 + r0 + r;
      load_row(p.q, p.dtype, row_offset(p.q_batch_stride, p.q_row_stride, p.q_head_stride, b, row, h), p.head_dim,
               &q[std::size_t(r) * dp]);
      load_row(p.dout, p.dtype, row_offset(p.do_batch_stride, p.do_row_stride, p.do_head_stride, b, row, h),
               p.head_dim_v, &dout[std::size_t(r) * dvp]);
      lse[r] = lse_at(p, b, h, s, r0 + r);
      dsum[r] = d_sum[h * tq + global_q_row(p, b, s, r0 + r)];
    }
  }
};

// Key-side rows of one (batch, kv head, key block) tile in fp32: K both
// transposed (for S = Q K^T) and row-major padded (for dQ = dS K), V
// transposed (for dP = dO V^T).
struct KeyTile {
  int dp;
  std::vector<float> kt, k, vt, row;
  explicit KeyTile(const AttnParams& p)
      : dp(padded(p.head_dim)),
        kt(std::size_t(p.head_dim) * kBlockK),
        k(std::size_t(kBlockK) * dp),
        vt(std::size_t(p.head_dim_v) * kBlockK),
        row(std::max(p.head_dim, p.head_dim_v)) {}

  void load(const AttnParams& p, int b, int hk, const SequenceInfo& s, std::int64_t j0, int cols) {
    for (int c = 0; c < cols; ++c) {
      const std::int64_t r = s.k_row0 + j0 + c;
      load_row(p.k, p.dtype, row_offset(p.k_batch_stride, p.k_row_stride, p.k_head_stride, b, r, hk), p.head_dim,
               &k[std::size_t(c) * dp]);
      for (int x = 0; x < p.head_dim; ++x) kt[std::size_t(x) * kBlockK + c] = k[std::size_t(c) * dp + x];
      load_row(p.v, p.dtype, row_offset(p.v_batch_stride, p.v_row_stride, p.v_head_stride, b, r, hk), p.head_dim_v,
               row.data());
      for (int x = 0; x < p.head_dim_v; ++x) vt[std::size_t(x) * kBlockK + c] = row[x];
    }
  }
};

// The recomputed probability tile P = exp(S - LSE) and dS = P * (dP - D)
// (times the softcap derivative and softmax_scale, the derivative of
// scale * q.k), both 0 where masked; row stride kBlockK.
struct ProbTile {
  std::vector<float> p, ds;
  ProbTile() : p(std::size_t(kBlockQ) * kBlockK), ds(std::size_t(kBlockQ) * kBlockK) {}

  void compute(const AttnParams& prm, const SequenceInfo& s, int r0, int rows, std::int64_t j0, int cols,
               const QueryTile& qt, const KeyTile& kt) {
    gemm_abt(qt.q.data(), qt.dp, rows, kt.kt.data(), prm.head_dim, p.data());
    gemm_abt(qt.dout.data(), qt.dvp, rows, kt.vt.data(), prm.head_dim_v, ds.data());  // dP
    for (int r = 0; r < rows; ++r) {
      float* prow = &p[std::size_t(r) * kBlockK];
      float* drow = &ds[std::size_t(r) * kBlockK];
      const ColRange cr = visible_cols(r0 + r, j0, cols, s.seqlen_q, s.seqlen_k, prm);
      const float lse = qt.lse[r], dsum = qt.dsum[r];
      if (prm.softcap > 0.f) {
        for (int c = 0; c < kBlockK; ++c) {
          const float th = std::tanh(prow[c] * prm.scale / prm.softcap);
          const float e = exp_fast(prm.softcap * th - lse);
          const bool vis = c >= cr.lo && c < cr.hi;
          prow[c] = vis ? e : 0.f;
          drow[c] = vis ? e * (drow[c] - dsum) * (1.f - th * th) * prm.scale : 0.f;
        }
      } else {
#pragma omp simd
        for (int c = 0; c < kBlockK; ++c) {
          const float e = exp_fast(prow[c] * prm.scale - lse);
          const bool vis = c >= cr.lo && c < cr.hi;
          prow[c] = vis ? e : 0.f;
          drow[c] = vis ? e * (drow[c] - dsum) * prm.scale : 0.f;
        }
      }
    }
  }
};

void compute_dsum(const AttnParams& p, float* d_sum) {
  const std::vector<RowBlockTask> tasks = query_block_tasks(p, kBlockQ);
  const std::int64_t tq = total_q_rows(p);
  run_parallel(tasks.size(), [&](auto&& for_each) {
    std::vector<float> o(p.head_dim_v), g(p.head_dim_v);
    for_each([&](std::size_t i) {
      const RowBlockTask& t = tasks[i];
      for (int r = t.row0; r < t.row1; ++r) {
        const std::int64_t row = t.seq.q_row0 + r;
        load_row(p.o, p.dtype, row_offset(p.o_batch_stride, p.o_row_stride, p.o_head_stride, t.batch, row, t.head),
                 p.head_dim_v, o.data());
        load_row(p.dout, p.dtype,
                 row_offset(p.do_batch_stride, p.do_row_stride, p.do_head_stride, t.batch, row, t.head),
                 p.head_dim_v, g.data());
        d_sum[t.head * tq + global_q_row(p, t.batch, t.seq, r)] = row_dot(o.data(), g.data(), p.head_dim_v);
      }
    });
  });
}

void compute_dkdv(const AttnParams& p, const float* d_sum) {
  const int d = p.head_dim, dv = p.head_dim_v;
  const std::vector<RowBlockTask> tasks = key_block_tasks(p, kBlockK);
  run_parallel(tasks.size(), [&](auto&& for_each) {
    QueryTile qt(p);
    KeyTile kt(p);
    ProbTile pt;
    std::vector<float> dk(std::size_t(kBlockK) * qt.dp), dvv(std::size_t(kBlockK) * qt.dvp);
    for_each([&](std::size_t i) {
      const RowBlockTask& t = tasks[i];
      const SequenceInfo& s = t.seq;
      const int cols = t.row1 - t.row0;
      kt.load(p, t.batch, t.head, s, t.row0, cols);
      std::fill(dk.begin(), dk.end(), 0.f);
      std::fill(dvv.begin(), dvv.end(), 0.f);
      for (int g = 0; g < p.gqa_ratio; ++g) {
        const int h = t.head * p.gqa_ratio + g;
        for (int r0 = 0; r0 < s.seqlen_q; r0 += kBlockQ) {
          const int rows = std::min(kBlockQ, s.seqlen_q - r0);
          const VisibleRange keys = block_visible_keys(r0, r0 + rows, s.seqlen_q, s.seqlen_k, p);
          if (keys.hi <= t.row0 || keys.lo >= t.row1) continue;
          qt.load(p, d_sum, t.batch, h, s, r0, rows);
          pt.compute(p, s, r0, rows, t.row0, cols, qt, kt);
          gemm_atb_acc(pt.p.data(), rows, cols, qt.dout.data(), qt.dvp, qt.dvp, dvv.data(), qt.dvp);
          gemm_atb_acc(pt.ds.data(), rows, cols, qt.q.data(), qt.dp, qt.dp, dk.data(), qt.dp);
        }
      }
      for (int c = 0; c < cols; ++c) {
        const std::int64_t row = s.k_row0 + t.row0 + c;
        store_row(p.dk, p.dtype, row_offset(p.dk_batch_stride, p.dk_row_stride, p.dk_head_stride, t.batch, row, t.head),
                  d, &dk[std::size_t(c) * qt.dp]);
        store_row(p.dv, p.dtype, row_offset(p.dv_batch_stride, p.dv_row_stride, p.dv_head_stride, t.batch, row, t.head),
                  dv, &dvv[std::size_t(c) * qt.dvp]);
      }
    });
  });
}

void compute_dq(const AttnParams& p, const float* d_sum) {
  const int d = p.head_dim;
  const std::vector<RowBlockTask> tasks = query_block_tasks(p, kBlockQ);
  run_parallel(tasks.size(), [&](auto&& for_each) {
    QueryTile qt(p);
    KeyTile kt(p);
    ProbTile pt;
    std::vector<float> dq(std::size_t(kBlockQ) * qt.dp);
    for_each([&](std::size_t i) {
      const RowBlockTask& t = tasks[i];
      const SequenceInfo& s = t.seq;
      const int rows = t.row1 - t.row0;
      const int hk = t.head / p.gqa_ratio;
      std::fill(dq.begin(), dq.end(), 0.f);
      qt.load(p, d_sum, t.batch, t.head, s, t.row0, rows);
      const VisibleRange keys = block_visible_keys(t.row0, t.row1, s.seqlen_q, s.seqlen_k, p);
      for (std::int64_t j0 = keys.lo; j0 < keys.hi; j0 += kBlockK) {
        const int cols = int(std::min<std::int64_t>(kBlockK, keys.hi - j0));
        kt.load(p, t.batch, hk, s, j0, cols);
        pt.compute(p, s, t.row0, rows, j0, cols, qt, kt);
        gemm_ab_acc(pt.ds.data(), rows, cols, kt.k.data(), kt.dp, kt.dp, dq.data(), qt.dp);
      }
      for (int r = 0; r < rows; ++r) {
        const std::int64_t row = s.q_row0 + t.row0 + r;
        store_row(p.dq, p.dtype, row_offset(p.dq_batch_stride, p.dq_row_stride, p.dq_head_stride, t.batch, row, t.head),
                  d, &dq[std::size_t(r) * qt.dp]);
      }
    });
  });
}

}  // namespace

std::size_t backward_workspace_bytes(const AttnParams& p) {
  return std::size_t(total_q_rows(p)) * std::size_t(p.heads_q) * sizeof(float);
}

void backward(const AttnParams& p, void* workspace) {
  float* d_sum = static_cast<float*>(workspace);
  compute_dsum(p, d_sum);
  compute_dkdv(p, d_sum);
  compute_dq(p, d_sum);
}

}  // namespace flashpp::cpu
