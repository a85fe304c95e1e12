// The CPU backward on one shard of the keys (AttentionOptions::partial_keys),
// as ring attention calls it: the keys are split into 1-3 shards, the shard
// forwards are merged through their LSEs (common/lse_merge.hpp), and each
// shard's backward runs with the merged out and LSE. The sum of the shards'
// dq and the per-shard dk/dv must match the whole attention's gradients under
// the tolerance rule (fp64 and same-dtype naive references of the full case).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <tuple>
#include <vector>

#include "common/lse_merge.hpp"
#include "flashpp/attention.hpp"
#include "support/case_runner.hpp"
#include "support/seed.hpp"

namespace flashpp::test {
namespace {

// Rows [r0, r0 + n) of dim 1 (the sequence dim) of a (b, s, h, d) view.
TensorView seq_rows(const TensorView& t, std::int64_t r0, std::int64_t n) {
  TensorView s = t;
  s.data = static_cast<char*>(t.data) + r0 * t.stride[1] * std::int64_t(dtype_size(t.dtype));
  s.shape[1] = n;
  return s;
}

struct Shard {
  std::int64_t k0, k1;     // keys [k0, k1) of the full sequence
  AttentionOptions opts;   // the full mask restricted to these keys
  HostTensor out, lse, dq;
};

// Causal over the full keys, seen from keys [k0, k1): the diagonal of the
// shard's (sq x len) block sits sk - k1 columns right of its own corner.
AttentionOptions shard_options(const AttnCase& c, std::int64_t k1, bool partial_keys) {
  AttentionOptions o = c.options();
  if (c.causal) {
    o.causal = false;
    o.window_right = c.seqlen_k - k1;
  }
  o.partial_keys = partial_keys;
  return o;
}

std::vector<Shard> make_shards(const AttnCase& c, const std::vector<std::int64_t>& cuts, bool partial_keys) {
  std::vector<Shard> shards(cuts.size() - 1);
  for (std::size_t i = 0; i < shards.size(); ++i) {
    shards[i].k0 = cuts[i];
    shards[i].k1 = cuts[i + 1];
    shards[i].opts = shard_options(c, cuts[i + 1], partial_keys);
  }
  return shards;
}

std::vector<std::int64_t> random_cuts(std::mt19937_64& rng, int seqlen_k, int shards) {
  std::vector<std::int64_t> cuts = {0, seqlen_k};
  std::uniform_int_distribution<int> at(1, seqlen_k - 1);
  while (int(cuts.size()) < shards + 1) {
    const std::int64_t x = at(rng);
    if (std::find(cuts.begin(), cuts.end(), x) == cuts.end()) cuts.push_back(x);
  }
  std::sort(cuts.begin(), cuts.end());
  return cuts;
}

// Shard forwards, merged into t.out / t.lse (out rounded to the dtype, as a
// caller that stores the merged output does).
void sharded_forward(const AttnCase& c, AttnTensors& t, std::vector<Shard>& shards) {
  const std::int64_t b = c.batch, sq = c.seqlen_q, hq = c.heads_q, dv = c.head_dim_v;
  for (Shard& s : shards) {
    s.out = HostTensor(c.dtype, {b, sq, hq, dv});
    s.lse = HostTensor(DType::f32, {b, hq, sq});
    const TensorView k = seq_rows(t.k.view(), s.k0, s.k1 - s.k0), v = seq_rows(t.v.view(), s.k0, s.k1 - s.k0);
    const HostWorkspace ws(forward_workspace_bytes(t.q.view(), k, v, s.opts));
    forward(t.q.view(), k, v, s.out.view(), s.lse.view(), s.opts, ws.get());
  }
  for (std::int64_t bi = 0; bi < b; ++bi)
    for (std::int64_t h = 0; h < hq; ++h)
      for (std::int64_t i = 0; i < sq; ++i) {
        const std::int64_t lse_at = (bi * hq + h) * sq + i;
        LseMerge m;
        for (const Shard& s : shards) m.add(float(s.lse.get(lse_at)));
        const float lse = m.lse();
        t.lse.set(lse_at, lse);
        for (std::int64_t x = 0; x < dv; ++x) {
          const std::int64_t out_at = ((bi * sq + i) * hq + h) * dv + x;
          double acc = 0;
          for (const Shard& s : shards) {
            const float w = merge_weight(float(s.lse.get(lse_at)), lse);
            if (w != 0.f) acc += double(w) * s.out.get(out_at);
          }
          t.out.set(out_at, acc);
        }
      }
}

// Shard backwards with the merged out/LSE: dk/dv land in the shard's rows of
// t.dk / t.dv, dq per shard (returned summed, dense).
std::vector<double> sharded_backward(const AttnCase& c, AttnTensors& t, std::vector<Shard>& shards) {
  std::vector<double> dq(std::size_t(t.q.numel()), 0.0);
  for (Shard& s : shards) {
    s.dq = HostTensor(c.dtype, t.q.shape());
    s.dq.poison();
    const std::int64_t n = s.k1 - s.k0;
    const TensorView k = seq_rows(t.k.view(), s.k0, n), v = seq_rows(t.v.view(), s.k0, n);
    const HostWorkspace ws(backward_workspace_bytes(t.q.view(), k, v, s.opts));
    backward(t.dout.view(), t.q.view(), k, v, t.out.view(), t.lse.view(), s.dq.view(), seq_rows(t.dk.view(), s.k0, n),
             seq_rows(t.dv.view(), s.k0, n), s.opts, ws.get());
    const std::vector<double> part = s.dq.to_dense();
    for (std::size_t i = 0; i < dq.size(); ++i) dq[i] += part[i];
  }
  return dq;
}

AttnCase shard_case(std::mt19937_64& rng, DType dtype) {
  constexpr int kSeqlens[] = {17, 64, 65, 130};
  constexpr int kHeadDims[] = {16, 32, 64, 72};
  auto pick = [&](const auto& xs) { return xs[std::uniform_int_distribution<std::size_t>(0, std::size(xs) - 1)(rng)]; };
  std::uniform_int_distribution<int> coin(0, 1);
  AttnCase c;
  c.label = "shards";
  c.dtype = dtype;
  c.batch = 1 + coin(rng);
  c.seqlen_k = pick(kSeqlens);
  c.seqlen_q = coin(rng) ? c.seqlen_k : pick(kSeqlens);
  c.heads_kv = 1 + coin(rng);
  c.heads_q = c.heads_kv * (1 + 2 * coin(rng));  // GQA ratio 1 or 3
  c.head_dim = c.head_dim_v = pick(kHeadDims);
  if (coin(rng)) c.head_dim_v = pick(kHeadDims);
  c.causal = coin(rng) != 0;
  if (c.causal) c.seqlen_q = std::min(c.seqlen_q, c.seqlen_k);
  if (std::uniform_int_distribution<int>(0, 3)(rng) == 0) c.softcap = 15.f;
  c.q_magnitude = 1.0;
  return c;
}

constexpr DType kDtypes[] = {DType::f32, DType::f16, DType::bf16};

// Out and LSE merged over the shards, dq summed over them, dk/dv per shard.
AttnResult sharded_result(const AttnCase& c, AttnTensors& t, std::vector<Shard>& shards) {
  sharded_forward(c, t, shards);
  AttnResult ours = collect(t, false);
  ours.dq = sharded_backward(c, t, shards);
  ours.dk = t.dk.to_dense();
  ours.dv = t.dv.to_dense();
  return ours;
}

class CpuPartialKeys : public testing::TestWithParam<std::tuple<DType, int>> {};

TEST_P(CpuPartialKeys, ShardedGradientsMatchFullAttention) {
  const auto [dtype, index] = GetParam();
  auto rng = make_rng(std::string("CpuPartialKeys.") + short_dtype(dtype), std::uint64_t(index));
  const AttnCase c = shard_case(rng, dtype);
  const int n_shards = std::min(1 + index % 3, c.seqlen_k);
  const std::vector<std::int64_t> cuts = random_cuts(rng, c.seqlen_k, n_shards);
  AttnTensors t = make_tensors(c, rng, true);
  std::string where = c.describe() + " shards at";
  for (std::int64_t x : cuts) {
    where += ' ';
    where += std::to_string(x);
  }
  SCOPED_TRACE(where);

  std::vector<Shard> shards = make_shards(c, cuts, true);
  const AttnResult ours = sharded_result(c, t, shards);

  const AttnResult f64 = reference_result(c, t, reference::Precision::f64, true);
  const AttnResult naive = reference_result(c, t, reference::Precision::storage, true);
  expect_within_tolerance(check_results(c, ours, f64, naive, true));
  expect_no_messages(check_masked_rows(c, ours, true), "masked rows");
  expect_no_messages(check_padding(t, true), "padding");
}

INSTANTIATE_TEST_SUITE_P(Sampled, CpuPartialKeys,
                         testing::Combine(testing::ValuesIn(kDtypes), testing::Range(0, 24)),
                         [](const auto& info) {
                           return std::string(short_dtype(std::get<0>(info.param))) + "_" +
                                  std::to_string(std::get<1>(info.param));
                         });

// Without the flag a shard's backward is the gradient of attention over that
// shard alone, so the sharded gradients miss the tolerance by far: the test
// above would notice a backend that ignored partial_keys.
TEST(CpuPartialKeysControl, WithoutTheFlagShardsDisagree) {
  auto rng = make_rng("CpuPartialKeysControl");
  AttnCase c;
  c.dtype = DType::f32;
  c.seqlen_q = c.seqlen_k = 64;
  c.heads_q = c.heads_kv = 2;
  c.head_dim = c.head_dim_v = 32;
  AttnTensors t = make_tensors(c, rng, true);
  std::vector<Shard> shards = make_shards(c, {0, 32, 64}, false);
  const AttnResult ours = sharded_result(c, t, shards);
  const AttnResult f64 = reference_result(c, t, reference::Precision::f64, true);
  const AttnResult naive = reference_result(c, t, reference::Precision::storage, true);
  const std::vector<ToleranceResult> r = check_results(c, ours, f64, naive, true);
  EXPECT_TRUE(r[0].ok && r[1].ok) << "the merged forward itself must be right";
  EXPECT_FALSE(r[2].ok) << "dq: " << r[2].line;
  EXPECT_FALSE(r[3].ok) << "dk: " << r[3].line;
}

}  // namespace
}  // namespace flashpp::test
