#include "reference/reference.hpp"

#include <cmath>
#include <cstdint>
#include <limits>

#include "common/half.hpp"
#include "common/mask.hpp"
#include "common/sequence.hpp"

namespace flashpp::reference {

double load(const void* base, ElemType t, long long index) {
  switch (t) {
    case ElemType::f32: return static_cast<const float*>(base)[index];
    case ElemType::f16: return fp16_to_float(static_cast<const std::uint16_t*>(base)[index]);
    case ElemType::bf16: return bf16_to_float(static_cast<const std::uint16_t*>(base)[index]);
    case ElemType::e4m3: break;
  }
  return std::numeric_limits<double>::quiet_NaN();
}

double round_to(double x, ElemType t) {
  const float f = float(x);
  switch (t) {
    case ElemType::f32: return f;
    case ElemType::f16: return fp16_to_float(float_to_fp16(f));
    case ElemType::bf16: return bf16_to_float(float_to_bf16(f));
    case ElemType::e4m3: break;
  }
  return std::numeric_limits<double>::quiet_NaN();
}

namespace {

struct Seq {
  int sq, sk;
  long long q0, k0;
};

Seq sequence(const AttnParams& p, int b) {
  const SequenceInfo s = host_sequence(p, b);
  return {s.seqlen_q, s.seqlen_k, s.q_row0, s.k_row0};
}

void gather(const void* base, ElemType t, long long boff, long long rs, long long hoff, long long row0, int rows,
            int cols, std::vector<double>& dst) {
  dst.assign(std::size_t(rows) * cols, 0.0);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) dst[std::size_t(r) * cols + c] = load(base, t, boff + (row0 + r) * rs + hoff + c);
}

// A dot-product accumulator: fp64 for the oracle; for Precision::storage a
// sequential fp32 sum, as the fp32-accumulating GEMMs and reductions of an
// unfused implementation do.
struct Acc {
  bool f32;
  double d = 0;
  float f = 0;
  explicit Acc(bool storage) : f32(storage) {}
  void add(double a, double b) {
    if (f32)
      f += float(a) * float(b);
    else
      d += a * b;
  }
  double value() const { return f32 ? double(f) : d; }
};

// Forward for one slice; P (sq x sk) and the row LSE are returned for backward.
// S is rounded as an unfused implementation would store it when prec == storage.
void slice_forward(const AttnParams& p, Precision prec, const Seq& s, const std::vector<double>& q,
                   const std::vector<double>& k, const std::vector<double>& v, std::vector<double>& P,
                   std::vector<double>& S, std::vector<double>& lse, std::vector<double>& out) {
  const int d = p.head_dim, dv = p.head_dim_v;
  const bool st = prec == Precision::storage;
  auto rnd = [&](double x) { return st ? round_to(x, p.dtype) : x; };
  P.assign(std::size_t(s.sq) * s.sk, 0.0);
  S.assign(std::size_t(s.sq) * s.sk, 0.0);
  lse.assign(s.sq, -std::numeric_limits<double>::infinity());
  out.assign(std::size_t(s.sq) * dv, 0.0);
  // Rows are independent: threads split them when the slice is big enough to pay for it.
#pragma omp parallel for schedule(dynamic, 8) if (std::int64_t(s.sq) * s.sk * d > (1 << 20))
  for (int i = 0; i < s.sq; ++i) {
    const VisibleRange vr = visible_keys(i, s.sq, s.sk, p.window_left, p.window_right);
    if (vr.lo >= vr.hi) continue;
    double mx = -std::numeric_limits<double>::infinity();
    for (long long j = vr.lo; j < vr.hi; ++j) {
      Acc acc(st);
      for (int c = 0; c < d; ++c) acc.add(q[std::size_t(i) * d + c], k[std::size_t(j) * d + c]);
      double x = st ? rnd(rnd(acc.value()) * rnd(p.scale)) : acc.value() * double(p.scale);
      if (p.softcap > 0) x = rnd(double(p.softcap) * std::tanh(x / double(p.softcap)));
      S[std::size_t(i) * s.sk + j] = x;
      mx = std::max(mx, x);
    }
    Acc sum(st);
    for (long long j = vr.lo; j < vr.hi; ++j) sum.add(std::exp(S[std::size_t(i) * s.sk + j] - mx), 1.0);
    lse[i] = mx + std::log(sum.value());
    for (long long j = vr.lo; j < vr.hi; ++j)
      P[std::size_t(i) * s.sk + j] = rnd(std::exp(S[std::size_t(i) * s.sk + j] - mx) / sum.value());
    for (int c = 0; c < dv; ++c) {
      Acc acc(st);
      for (long long j = vr.lo; j < vr.hi; ++j) acc.add(P[std::size_t(i) * s.sk + j], v[std::size_t(j) * dv + c]);
      out[std::size_t(i) * dv + c] = rnd(acc.value());
    }
  }
}

}  // namespace

void forward(const AttnParams& p, Precision prec, std::vector<double>& out, std::vector<double>& lse) {
  const int hq = p.heads_q, dv = p.head_dim_v;
  const long long total_q = p.cu_seqlens_q ? p.total_q : (long long)p.batch * p.seqlen_q;
  out.assign(std::size_t(total_q) * hq * dv, 0.0);
  lse.assign(std::size_t(total_q) * hq, 0.0);
  std::vector<double> q, k, v, P, S, l, o;
  for (int b = 0; b < p.batch; ++b) {
    const Seq s = sequence(p, b);
    const long long qrow0 = p.cu_seqlens_q ? s.q0 : (long long)b * p.seqlen_q;
    for (int h = 0; h < hq; ++h) {
      const int hk = h / p.gqa_ratio;
      gather(p.q, p.dtype, b * p.q_batch_stride, p.q_row_stride, h * p.q_head_stride, s.q0, s.sq, p.head_dim, q);
      gather(p.k, p.dtype, b * p.k_batch_stride, p.k_row_stride, hk * p.k_head_stride, s.k0, s.sk, p.head_dim, k);
      gather(p.v, p.dtype, b * p.v_batch_stride, p.v_row_stride, hk * p.v_head_stride, s.k0, s.sk, dv, v);
      slice_forward(p, prec, s, q, k, v, P, S, l, o);
      for (int i = 0; i < s.sq; ++i) {
        for (int c = 0; c < dv; ++c) out[(std::size_t(qrow0 + i) * hq + h) * dv + c] = o[std::size_t(i) * dv + c];
        // (b, h, i) for fixed length; (h, total_row) for varlen
        const std::size_t li = p.cu_seqlens_q ? std::size_t(h) * total_q + std::size_t(s.q0 + i)
                                              : (std::size_t(b) * hq + h) * p.seqlen_q + i;
        lse[li] = l[i];
      }
    }
  }
}

void backward(const AttnParams& p, Precision prec, std::vector<double>& dq, std::vector<double>& dk,
              std::vector<double>& dv_out) {
  const int hq = p.heads_q, hkv = p.heads_kv, d = p.head_dim, dv = p.head_dim_v;
  const bool st = prec == Precision::storage;
  auto rnd = [&](double x) { return st ? round_to(x, p.dtype) : x; };
  const long long total_q = p.cu_seqlens_q ? p.total_q : (long long)p.batch * p.seqlen_q;
  const long long total_k = p.cu_seqlens_k ? p.total_k : (long long)p.batch * p.seqlen_k;
  dq.assign(std::size_t(total_q) * hq * d, 0.0);
  dk.assign(std::size_t(total_k) * hkv * d, 0.0);
  dv_out.assign(std::size_t(total_k) * hkv * dv, 0.0);
  std::vector<double> q, k, v, g, P, S, l, o, dP, dS;
  for (int b = 0; b < p.batch; ++b) {
    const Seq s = sequence(p, b);
    const long long qrow0 = p.cu_seqlens_q ? s.q0 : (long long)b * p.seqlen_q;
    const long long krow0 = p.cu_seqlens_k ? s.k0 : (long long)b * p.seqlen_k;
    for (int h = 0; h < hq; ++h) {
      const int hk = h / p.gqa_ratio;
      gather(p.q, p.dtype, b * p.q_batch_stride, p.q_row_stride, h * p.q_head_stride, s.q0, s.sq, d, q);
      gather(p.k, p.dtype, b * p.k_batch_stride, p.k_row_stride, hk * p.k_head_stride, s.k0, s.sk, d, k);
      gather(p.v, p.dtype, b * p.v_batch_stride, p.v_row_stride, hk * p.v_head_stride, s.k0, s.sk, dv, v);
      gather(p.dout, p.dtype, b * p.do_batch_stride, p.do_row_stride, h * p.do_head_stride, s.q0, s.sq, dv, g);
      slice_forward(p, prec, s, q, k, v, P, S, l, o);
      dP.assign(std::size_t(s.sq) * s.sk, 0.0);
      dS.assign(std::size_t(s.sq) * s.sk, 0.0);
      const bool par = std::int64_t(s.sq) * s.sk * d > (1 << 20);
#pragma omp parallel for schedule(dynamic, 8) if (par)
      for (int i = 0; i < s.sq; ++i) {
        const VisibleRange vr = visible_keys(i, s.sq, s.sk, p.window_left, p.window_right);
        Acc dsum(st);
        for (long long j = vr.lo; j < vr.hi; ++j) {
          Acc acc(st);
          for (int c = 0; c < dv; ++c) acc.add(g[std::size_t(i) * dv + c], v[std::size_t(j) * dv + c]);
          dP[std::size_t(i) * s.sk + j] = rnd(acc.value());
          dsum.add(P[std::size_t(i) * s.sk + j], dP[std::size_t(i) * s.sk + j]);
        }
        const double Di = rnd(dsum.value());
        for (long long j = vr.lo; j < vr.hi; ++j) {
          const std::size_t ij = std::size_t(i) * s.sk + j;
          double x = rnd(P[ij] * rnd(dP[ij] - Di));
          if (p.softcap > 0) {
            const double t = S[ij] / double(p.softcap);
            x = rnd(x * (1.0 - t * t));
          }
          dS[ij] = x;
        }
      }
      const double sc = p.scale;
#pragma omp parallel for schedule(dynamic, 8) if (par)
      for (int i = 0; i < s.sq; ++i)
        for (int c = 0; c < d; ++c) {
          Acc acc(st);
          for (int j = 0; j < s.sk; ++j) acc.add(dS[std::size_t(i) * s.sk + j], k[std::size_t(j) * d + c]);
          dq[(std::size_t(qrow0 + i) * hq + h) * d + c] = rnd(acc.value() * sc);
        }
#pragma omp parallel for schedule(dynamic, 8) if (par)
      for (int j = 0; j < s.sk; ++j) {
        for (int c = 0; c < d; ++c) {
          Acc acc(st);
          for (int i = 0; i < s.sq; ++i) acc.add(dS[std::size_t(i) * s.sk + j], q[std::size_t(i) * d + c]);
          dk[(std::size_t(krow0 + j) * hkv + hk) * d + c] += rnd(acc.value() * sc);
        }
        for (int c = 0; c < dv; ++c) {
          Acc acc(st);
          for (int i = 0; i < s.sq; ++i) acc.add(P[std::size_t(i) * s.sk + j], g[std::size_t(i) * dv + c]);
          dv_out[(std::size_t(krow0 + j) * hkv + hk) * dv + c] += rnd(acc.value());
        }
      }
    }
  }
  if (st) {
    // an unfused implementation stores the GQA-summed gradients in the input dtype
    for (auto& x : dk) x = rnd(x);
    for (auto& x : dv_out) x = rnd(x);
  }
}

}  // namespace flashpp::reference
