// The oracle itself: the fp64 reference against values computed here with
// plain formulas, and its backward against finite differences of its forward.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "api/validate.hpp"
#include "reference/reference.hpp"
#include "support/host_tensor.hpp"
#include "support/seed.hpp"

namespace flashpp::test {
namespace {

using reference::Precision;

// Fixed-length fp32 problem on host tensors (contiguous).
struct Problem {
  int b, sq, sk, hq, hk, d, dv;
  HostTensor q, k, v, out, lse, dout, dq, dk, dv_;
  AttentionOptions opts;

  Problem(int b_, int sq_, int sk_, int hq_, int hk_, int d_, int dv__)
      : b(b_), sq(sq_), sk(sk_), hq(hq_), hk(hk_), d(d_), dv(dv__),
        q(DType::f32, {b, sq, hq, d}), k(DType::f32, {b, sk, hk, d}), v(DType::f32, {b, sk, hk, dv}),
        out(DType::f32, {b, sq, hq, dv}), lse(DType::f32, {b, hq, sq}), dout(DType::f32, {b, sq, hq, dv}),
        dq(DType::f32, {b, sq, hq, d}), dk(DType::f32, {b, sk, hk, d}), dv_(DType::f32, {b, sk, hk, dv}) {}

  AttnParams params() const {
    return detail::make_backward_params(dout.view(), q.view(), k.view(), v.view(), out.view(), lse.view(), dq.view(),
                                        dk.view(), dv_.view(), opts);
  }
  void forward(std::vector<double>& o, std::vector<double>& l) const {
    reference::forward(params(), Precision::f64, o, l);
  }
};

// Small exact numbers so every product below is exact in double.
void fill_small(HostTensor& t, std::mt19937_64& rng) {
  std::uniform_int_distribution<int> n(-64, 64);
  for (std::int64_t i = 0; i < t.numel(); ++i) {
    int x = n(rng);
    if (x == 0) x = 1;
    t.set(i, x / 32.0);
  }
}

// q, k of head dim 8 with only the first two entries non-zero, sq = sk = 2:
// the 2x2 score matrix, its softmax, O and LSE computed by hand.
TEST(Reference, HandComputedTwoByTwo) {
  for (bool causal : {false, true}) {
    SCOPED_TRACE(causal ? "causal" : "full");
    Problem p(1, 2, 2, 1, 1, 8, 8);
    auto rng = make_rng("Reference.HandComputed", causal);
    const double Q[2][2] = {{1.0, 0.5}, {-0.25, 2.0}};
    const double K[2][2] = {{0.5, -1.0}, {1.5, 0.25}};
    double V[2][8];
    for (int j = 0; j < 2; ++j)
      for (int c = 0; c < 8; ++c) V[j][c] = (j + 1) * 0.5 + c * 0.125 * (j ? -1 : 1);
    for (int i = 0; i < 2; ++i)
      for (int c = 0; c < 8; ++c) {
        p.q.set(i * 8 + c, c < 2 ? Q[i][c] : 0.0);
        p.k.set(i * 8 + c, c < 2 ? K[i][c] : 0.0);
        p.v.set(i * 8 + c, V[i][c]);
      }
    p.dout.fill_normal(rng);  // not read by forward, but backward params need it
    p.opts.causal = causal;
    const double scale = 1.0 / std::sqrt(8.0);
    p.opts.softmax_scale = float(scale);

    std::vector<double> o, l;
    p.forward(o, l);
    const double fscale = double(float(scale));
    for (int i = 0; i < 2; ++i) {
      const double s0 = fscale * (Q[i][0] * K[0][0] + Q[i][1] * K[0][1]);
      const double s1 = fscale * (Q[i][0] * K[1][0] + Q[i][1] * K[1][1]);
      // Causal, sq == sk: row 0 sees only key 0.
      const bool sees1 = !causal || i == 1;
      const double m = sees1 ? std::max(s0, s1) : s0;
      const double e0 = std::exp(s0 - m), e1 = sees1 ? std::exp(s1 - m) : 0.0;
      const double want_lse = m + std::log(e0 + e1);
      EXPECT_NEAR(l[i], want_lse, 1e-14) << "row " << i;
      for (int c = 0; c < 8; ++c) {
        const double want = (e0 * V[0][c] + e1 * V[1][c]) / (e0 + e1);
        EXPECT_NEAR(o[i * 8 + c], want, 1e-14) << "row " << i << " col " << c;
      }
    }
  }
}

// Bottom-right causal alignment with seqlen_q > seqlen_k: row 0 sees no key.
TEST(Reference, FullyMaskedRowIsZeroWithMinusInfLse) {
  Problem p(1, 2, 1, 1, 1, 8, 8);
  auto rng = make_rng("Reference.FullyMasked");
  p.q.fill_normal(rng);
  p.k.fill_normal(rng);
  p.v.fill_normal(rng);
  p.dout.fill_normal(rng);
  p.opts.causal = true;
  std::vector<double> o, l;
  p.forward(o, l);
  EXPECT_EQ(l[0], -std::numeric_limits<double>::infinity());
  for (int c = 0; c < 8; ++c) EXPECT_EQ(o[c], 0.0);
  // Row 1 sees key 0 alone: O = v[0], LSE = its score.
  for (int c = 0; c < 8; ++c) EXPECT_DOUBLE_EQ(o[8 + c], p.v.get(c));
  double s = 0;
  for (int c = 0; c < 8; ++c) s += p.q.get(8 + c) * p.k.get(c);
  EXPECT_NEAR(l[1], s * double(float(1 / std::sqrt(8.0))), 1e-12);
  std::vector<double> dq, dk, dv;
  reference::backward(p.params(), Precision::f64, dq, dk, dv);
  for (int c = 0; c < 8; ++c) EXPECT_EQ(dq[c], 0.0) << "masked row gradient";
}

// d/dx of L = sum(dout * O) by central differences with Richardson
// extrapolation; inputs are multiples of 2^-5 and steps powers of two, so
// every perturbed input is exact in fp32 and the fp64 forward adds no noise.
TEST(Reference, BackwardMatchesFiniteDifferences) {
  auto rng = make_rng("Reference.FiniteDifferences");
  // GQA (2 query heads on 1 kv head), causal with seqlen_q > seqlen_k (row 0
  // sees nothing), softcap 2 and a custom scale: every backward term is live.
  Problem p(1, 4, 3, 2, 1, 8, 16);
  fill_small(p.q, rng);
  fill_small(p.k, rng);
  fill_small(p.v, rng);
  fill_small(p.dout, rng);
  p.opts.causal = true;
  p.opts.softcap = 2.0f;
  p.opts.softmax_scale = 0.75f;

  std::vector<double> dq, dk, dv;
  reference::backward(p.params(), Precision::f64, dq, dk, dv);

  const std::vector<double> g = p.dout.to_dense();
  auto loss = [&]() {
    std::vector<double> o, l;
    p.forward(o, l);
    double s = 0;
    for (std::size_t i = 0; i < o.size(); ++i) s += g[i] * o[i];
    return s;
  };
  auto numeric = [&](HostTensor& t, std::int64_t i) {
    const double x = t.get(i);
    auto central = [&](double h) {
      t.set(i, x + h);
      const double up = loss();
      t.set(i, x - h);
      const double down = loss();
      t.set(i, x);
      return (up - down) / (2 * h);
    };
    const double h = 1.0 / 256;
    return (4 * central(h / 2) - central(h)) / 3;
  };
  struct Grad {
    const char* name;
    HostTensor* input;
    const std::vector<double>* analytic;
  };
  double max_grad = 0;
  for (const Grad& gr : {Grad{"dq", &p.q, &dq}, Grad{"dk", &p.k, &dk}, Grad{"dv", &p.v, &dv}}) {
    ASSERT_EQ(std::int64_t(gr.analytic->size()), gr.input->numel());
    for (std::int64_t i = 0; i < gr.input->numel(); ++i) {
      const double want = numeric(*gr.input, i), got = (*gr.analytic)[std::size_t(i)];
      max_grad = std::max(max_grad, std::abs(got));
      EXPECT_NEAR(got, want, 2e-6 * (1 + std::abs(want))) << gr.name << "[" << i << "]";
    }
  }
  EXPECT_GT(max_grad, 1e-2) << "gradients should not all vanish";
  for (int c = 0; c < 8; ++c) {  // query row 0 (both heads) sees no key
    EXPECT_EQ(dq[c], 0.0);
    EXPECT_EQ(dq[8 + c], 0.0);
  }
}

// The same-dtype naive reference stays close to the oracle (it is the error
// budget of the tolerance rule, so it must be a sane implementation).
TEST(Reference, StoragePrecisionTracksOracle) {
  auto rng = make_rng("Reference.Storage");
  for (DType dt : {DType::f32, DType::f16, DType::bf16}) {
    SCOPED_TRACE(dtype_name(dt));
    HostTensor q(dt, {1, 17, 2, 32}), k(dt, {1, 33, 2, 32}), v(dt, {1, 33, 2, 32}), out(dt, {1, 17, 2, 32}),
        lse(DType::f32, {1, 2, 17});
    q.fill_normal(rng);
    k.fill_normal(rng);
    v.fill_normal(rng);
    AttentionOptions o;
    const AttnParams p = detail::make_forward_params(q.view(), k.view(), v.view(), out.view(), lse.view(), o);
    std::vector<double> o64, l64, ost, lst;
    reference::forward(p, Precision::f64, o64, l64);
    reference::forward(p, Precision::storage, ost, lst);
    double err = 0;
    for (std::size_t i = 0; i < o64.size(); ++i) err = std::max(err, std::abs(o64[i] - ost[i]));
    const double unit = dt == DType::f32 ? 1e-6 : dt == DType::f16 ? 1e-3 : 8e-3;
    EXPECT_LT(err, 10 * unit);
    EXPECT_GT(err, 0.0) << "rounding to the storage dtype should perturb the result";
  }
}

}  // namespace
}  // namespace flashpp::test
