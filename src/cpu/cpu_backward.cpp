// CPU backward, recomputing P = exp(S - LSE) tile by tile:
//   pass 1: one task per (batch, query head, query block) sweeps its key tiles
//           twice: first for the row sums of P and P * dP, which give D and a
//           renormalization factor (both stored in the workspace), then for
//           dS = P * (dP - D) and dQ = dS K;
//   pass 2: one task per (batch, kv head, key block) accumulates dK and dV over
//           every query head of its GQA group and every query block that sees it.
// D equals rowsum(dO * O) in exact arithmetic; it is summed from the
// recomputed P and dP (fp32, or fp64 for fp32 inputs) rather than from the stored O because O has been
// rounded to the input dtype, and for rows that see few keys (P nearly
// one-hot) that rounding dominates dP - D. The extra sweep costs about a
// quarter of the backward and keeps its error at or below a naive
// implementation's.
// The renormalization cancels the rounding of the fp32 LSE: with logits in the
// hundreds, exp(S - LSE) is off by a common factor 1 + O(ulp(LSE)) per row,
// which dK = sum_i dS q_i would multiply by the (large) q.
// With partial_keys (out and LSE of a larger key set, e.g. one ring shard)
// both choices are wrong, since the sums over these keys alone are not the
// softmax's: pass 1 then skips the first sweep and takes the FA2 form,
// D = rowsum(dO * O) from the given out and P = exp(S - LSE) unnormalized.
// Each gradient element has one owner task, so no atomics and the result is
// deterministic for any thread count.
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

float lse_at(const AttnParams& p, int b, int h, const SequenceInfo& s, std::int64_t r) {
  return p.lse[b * p.lse_batch_stride + h * p.lse_head_stride + s.lse_row0 + r];
}

// Query-side rows of one (batch, query head, query block) tile in fp32; q and
// dout rows are zero padded to whole register blocks. D is loaded from d_sum
// when given.
struct QueryTile {
  int dp, dvp;
  std::vector<float> q, dout, lse;
  std::vector<double> dsum, norm;  // D and the renormalization factor
  explicit QueryTile(const AttnParams& p)
      : dp(padded(p.head_dim)),
        dvp(padded(p.head_dim_v)),
        q(std::size_t(kBlockQ) * dp),
        dout(std::size_t(kBlockQ) * dvp),
        lse(kBlockQ),
        dsum(kBlockQ),
        norm(kBlockQ, 1.0) {}

  // d_sum: D then the factor, each (heads_q, total_q rows); null = not yet known.
  void load(const AttnParams& p, const double* d_sum, int b, int h, const SequenceInfo& s, int r0, int rows) {
    const std::int64_t tq = total_q_rows(p);
    for (int r = 0; r < rows; ++r) {
      const std::int64_t row = s.q_row0 + r0 + r;
      load_row(p.q, p.dtype, row_offset(p.q_batch_stride, p.q_row_stride, p.q_head_stride, b, row, h), p.head_dim,
               &q[std::size_t(r) * dp]);
      load_row(p.dout, p.dtype, row_offset(p.do_batch_stride, p.do_row_stride, p.do_head_stride, b, row, h),
               p.head_dim_v, &dout[std::size_t(r) * dvp]);
      lse[r] = lse_at(p, b, h, s, r0 + r);
      if (d_sum) {
        const std::int64_t at = h * tq + global_q_row(p, b, s, r0 + r);
        dsum[r] = d_sum[at];
        norm[r] = d_sum[std::int64_t(p.heads_q) * tq + at];
      }
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

// The recomputed probability tile P = exp(S - LSE) and dP = dO V^T, both 0
// where masked (row stride kBlockK); derive_ds turns dP into
// dS = P * (dP - D) times the softcap derivative and softmax_scale (the
// derivative of scale * q.k).
// For fp32 inputs S, dP and the element-wise algebra up to dS stay in fp64
// (pw, dsw) and only P and dS are rounded, once each, for the fp32 GEMMs: with
// logits in the tens or hundreds, the fp32 roundings of scale * S, S - LSE and
// dP - D would each cost more than a naive fp32 implementation loses, and dK =
// sum_i dS q_i multiplies them by the large q. For 16-bit inputs the inputs'
// own rounding dominates and the fp32 path (vectorized exp) is kept.
struct ProbTile {
  bool wide;
  std::vector<float> p, ds, th;
  std::vector<double> pw, dsw, thw;
  explicit ProbTile(const AttnParams& prm)
      : wide(prm.dtype == ElemType::f32),
        p(std::size_t(kBlockQ) * kBlockK),
        ds(std::size_t(kBlockQ) * kBlockK),
        th(std::size_t(kBlockQ) * kBlockK),
        pw(wide ? std::size_t(kBlockQ) * kBlockK : 0),
        dsw(wide ? std::size_t(kBlockQ) * kBlockK : 0),
        thw(wide ? std::size_t(kBlockQ) * kBlockK : 0) {}

  void recompute(const AttnParams& prm, const SequenceInfo& s, int r0, int rows, std::int64_t j0, int cols,
                 const QueryTile& qt, const KeyTile& kt) {
    if (wide) return recompute_wide(prm, s, r0, rows, j0, cols, qt, kt);
    gemm_abt(qt.q.data(), qt.dp, rows, kt.kt.data(), prm.head_dim, p.data(), false);
    gemm_abt(qt.dout.data(), qt.dvp, rows, kt.vt.data(), prm.head_dim_v, ds.data(), false);  // dP
    for (int r = 0; r < rows; ++r) {
      float* prow = &p[std::size_t(r) * kBlockK];
      float* drow = &ds[std::size_t(r) * kBlockK];
      float* trow = &th[std::size_t(r) * kBlockK];
      ColRange cr = visible_cols(r0 + r, j0, cols, s.seqlen_q, s.seqlen_k, prm);
      const float lse = qt.lse[r], nrm = float(qt.norm[r]);
      // A row whose (possibly larger) key set was empty contributes nothing;
      // exp(S - (-inf)) must not be formed.
      if (lse == -std::numeric_limits<float>::infinity()) cr.hi = cr.lo;
      if (prm.softcap > 0.f) {
        for (int c = 0; c < kBlockK; ++c) {
          const float x = prow[c] * prm.scale;
          const float t = std::tanh(x / prm.softcap);
          const float e = exp_fast(prm.softcap * t - lse) * nrm;
          const bool vis = c >= cr.lo && c < cr.hi;
          prow[c] = vis ? e : 0.f;
          drow[c] = vis ? drow[c] : 0.f;
          trow[c] = t;
        }
      } else {
#pragma omp simd
        for (int c = 0; c < kBlockK; ++c) {
          const float x = prow[c] * prm.scale;
          const float e = exp_fast(x - lse) * nrm;
          const bool vis = c >= cr.lo && c < cr.hi;
          prow[c] = vis ? e : 0.f;
          drow[c] = vis ? drow[c] : 0.f;
        }
      }
    }
  }

  void recompute_wide(const AttnParams& prm, const SequenceInfo& s, int r0, int rows, std::int64_t j0, int cols,
                      const QueryTile& qt, const KeyTile& kt) {
    gemm_abt_in<double, double>(qt.q.data(), qt.dp, rows, kt.kt.data(), prm.head_dim, pw.data());
    gemm_abt_in<double, double>(qt.dout.data(), qt.dvp, rows, kt.vt.data(), prm.head_dim_v, dsw.data());  // dP
    const double scale = prm.scale, cap = prm.softcap;
    for (int r = 0; r < rows; ++r) {
      double* prow = &pw[std::size_t(r) * kBlockK];
      double* drow = &dsw[std::size_t(r) * kBlockK];
      double* trow = &thw[std::size_t(r) * kBlockK];
      ColRange cr = visible_cols(r0 + r, j0, cols, s.seqlen_q, s.seqlen_k, prm);
      const double lse = qt.lse[r], nrm = qt.norm[r];
      if (qt.lse[r] == -std::numeric_limits<float>::infinity()) cr.hi = cr.lo;
      for (int c = 0; c < kBlockK; ++c) {
        const bool vis = c >= cr.lo && c < cr.hi;
        double e = 0, t = 0;
        if (vis) {
          const double x = prow[c] * scale;
          t = cap > 0 ? std::tanh(x / cap) : 0.0;
          e = std::exp((cap > 0 ? cap * t : x) - lse) * nrm;
        }
        prow[c] = e;
        drow[c] = vis ? drow[c] : 0.0;
        trow[c] = t;
        p[std::size_t(r) * kBlockK + c] = float(e);
      }
    }
  }

  // Row sums of this tile: psum[r] += sum_c P[r][c], dsum[r] += sum_c P[r][c] * dP[r][c].
  void accumulate_sums(int rows, double* psum, double* dsum) const {
    for (int r = 0; r < rows; ++r) {
      if (wide) {
        double acc = dsum[r], ps = psum[r];
        for (int c = 0; c < kBlockK; ++c) {
          acc += pw[std::size_t(r) * kBlockK + c] * dsw[std::size_t(r) * kBlockK + c];
          ps += pw[std::size_t(r) * kBlockK + c];
        }
        dsum[r] = acc;
        psum[r] = ps;
        continue;
      }
      // fp32 sums for 16-bit inputs (each partial rounded to float as it is kept)
      float acc = float(dsum[r]), ps = float(psum[r]);
      for (int c = 0; c < kBlockK; ++c) {
        acc = madd(p[std::size_t(r) * kBlockK + c], ds[std::size_t(r) * kBlockK + c], acc);
        ps += p[std::size_t(r) * kBlockK + c];
      }
      dsum[r] = acc;
      psum[r] = ps;
    }
  }

  void derive_ds(const AttnParams& prm, int rows, const double* dsum) {
    if (wide) {
      const double scale = prm.scale;
      for (int r = 0; r < rows; ++r) {
        const double* prow = &pw[std::size_t(r) * kBlockK];
        const double* drow = &dsw[std::size_t(r) * kBlockK];
        const double* trow = &thw[std::size_t(r) * kBlockK];
        float* out = &ds[std::size_t(r) * kBlockK];
        const double d = dsum[r];
        for (int c = 0; c < kBlockK; ++c) {
          // t = 0 without softcap, so the factor is 1 there
          out[c] = float(prow[c] * (drow[c] - d) * (1.0 - trow[c] * trow[c]) * scale);
        }
      }
      return;
    }
    for (int r = 0; r < rows; ++r) {
      float* prow = &p[std::size_t(r) * kBlockK];
      float* drow = &ds[std::size_t(r) * kBlockK];
      const float* trow = &th[std::size_t(r) * kBlockK];
      const float d = float(dsum[r]);
      if (prm.softcap > 0.f) {
        for (int c = 0; c < kBlockK; ++c) drow[c] = prow[c] * (drow[c] - d) * (1.f - trow[c] * trow[c]) * prm.scale;
      } else {
#pragma omp simd
        for (int c = 0; c < kBlockK; ++c) drow[c] = prow[c] * (drow[c] - d) * prm.scale;
      }
    }
  }
};

// FA2's D = rowsum(dO * O) for the tile's rows from the given out (partial_keys
// only); out_row is scratch for one row of out.
void dout_dot_out(const AttnParams& p, int b, int h, const SequenceInfo& s, int r0, int rows, QueryTile& qt,
                  float* out_row) {
  for (int r = 0; r < rows; ++r) {
    const std::int64_t row = s.q_row0 + r0 + r;
    load_row(p.o, p.dtype, row_offset(p.o_batch_stride, p.o_row_stride, p.o_head_stride, b, row, h), p.head_dim_v,
             out_row);
    const float* dout = &qt.dout[std::size_t(r) * qt.dvp];
    float acc = 0.f;
    for (int c = 0; c < p.head_dim_v; ++c) acc = madd(dout[c], out_row[c], acc);
    qt.dsum[r] = acc;
  }
}

void compute_dkdv(const AttnParams& p, const double* d_sum) {
  const int d = p.head_dim, dv = p.head_dim_v;
  const std::vector<RowBlockTask> tasks = key_block_tasks(p, kBlockK);
  run_parallel(tasks.size(), [&](auto&& for_each) {
    QueryTile qt(p);
    KeyTile kt(p);
    ProbTile pt(p);
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
          pt.recompute(p, s, r0, rows, t.row0, cols, qt, kt);
          pt.derive_ds(p, rows, qt.dsum.data());
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

void compute_dq_and_dsum(const AttnParams& p, double* d_sum) {
  const int d = p.head_dim;
  const std::int64_t tq = total_q_rows(p);
  const std::vector<RowBlockTask> tasks = query_block_tasks(p, kBlockQ);
  run_parallel(tasks.size(), [&](auto&& for_each) {
    QueryTile qt(p);
    KeyTile kt(p);
    ProbTile pt(p);
    std::vector<float> dq(std::size_t(kBlockQ) * qt.dp), orow(std::size_t(qt.dvp));
    std::vector<double> psum(kBlockQ), dsum(kBlockQ);
    for_each([&](std::size_t i) {
      const RowBlockTask& t = tasks[i];
      const SequenceInfo& s = t.seq;
      const int rows = t.row1 - t.row0;
      const int hk = t.head / p.gqa_ratio;
      qt.load(p, nullptr, t.batch, t.head, s, t.row0, rows);
      const VisibleRange keys = block_visible_keys(t.row0, t.row1, s.seqlen_q, s.seqlen_k, p);
      std::fill(qt.dsum.begin(), qt.dsum.end(), 0.0);
      std::fill(qt.norm.begin(), qt.norm.end(), 1.0);
      if (p.partial_keys) {
        dout_dot_out(p, t.batch, t.head, s, t.row0, rows, qt, orow.data());
      } else {
        std::fill(psum.begin(), psum.end(), 0.0);
        std::fill(dsum.begin(), dsum.end(), 0.0);
        for (std::int64_t j0 = keys.lo; j0 < keys.hi; j0 += kBlockK) {
          const int cols = int(std::min<std::int64_t>(kBlockK, keys.hi - j0));
          kt.load(p, t.batch, hk, s, j0, cols);
          pt.recompute(p, s, t.row0, rows, j0, cols, qt, kt);
          pt.accumulate_sums(rows, psum.data(), dsum.data());
        }
        for (int r = 0; r < rows; ++r) {
          // psum is 1 up to the LSE's rounding (0 for rows that see no key).
          // fp32 inputs keep D and the factor in fp64: for a row that sees one
          // key dP - D must cancel to (nearly) zero, which a rounded D breaks.
          if (pt.wide) {
            qt.norm[r] = psum[r] > 0 ? 1.0 / psum[r] : 1.0;
            qt.dsum[r] = dsum[r] * qt.norm[r];
          } else {
            qt.norm[r] = psum[r] > 0 ? 1.f / float(psum[r]) : 1.f;
            qt.dsum[r] = float(float(dsum[r]) * float(qt.norm[r]));
          }
        }
      }
      for (int r = 0; r < rows; ++r) {
        const std::int64_t at = t.head * tq + global_q_row(p, t.batch, s, t.row0 + r);
        d_sum[at] = qt.dsum[r];
        d_sum[std::int64_t(p.heads_q) * tq + at] = qt.norm[r];
      }

      std::fill(dq.begin(), dq.end(), 0.f);
      for (std::int64_t j0 = keys.lo; j0 < keys.hi; j0 += kBlockK) {
        const int cols = int(std::min<std::int64_t>(kBlockK, keys.hi - j0));
        kt.load(p, t.batch, hk, s, j0, cols);
        pt.recompute(p, s, t.row0, rows, j0, cols, qt, kt);
        pt.derive_ds(p, rows, qt.dsum.data());
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
  // D and the renormalization factor per (query head, query row), in fp64.
  return 2 * std::size_t(total_q_rows(p)) * std::size_t(p.heads_q) * sizeof(double);
}

void backward(const AttnParams& p, void* workspace) {
  double* d_sum = static_cast<double*>(workspace);
  compute_dq_and_dsum(p, d_sum);
  compute_dkdv(p, d_sum);
}

}  // namespace flashpp::cpu
