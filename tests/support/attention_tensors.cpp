#include "support/attention_tensors.hpp"

#include <cstdlib>
#include <new>

#include "api/validate.hpp"
#include "common/mask.hpp"
#include "flashpp/attention.hpp"

namespace flashpp::test {
namespace {

Layout layout_for(LayoutKind kind, Role role, const std::vector<std::int64_t>& shape, std::mt19937_64& rng,
                  int align) {
  const int nd = int(shape.size());
  switch (kind) {
    case LayoutKind::contiguous: return contiguous_layout();
    case LayoutKind::padded: return padded_layout(nd, rng, align);
    case LayoutKind::heads_outer: return heads_outer_layout(nd);
    case LayoutKind::packed: {
      if (role == Role::lse) return contiguous_layout();
      // q/k/v (and their gradients) take their own slot of a 3-slot buffer.
      const int slot = role == Role::q || role == Role::dq ? 0 : role == Role::k || role == Role::dk ? 1 : 2;
      return packed_slot_layout(shape, 3, slot);
    }
    case LayoutKind::shuffled: return shuffled_layout(nd, rng, align);
  }
  return contiguous_layout();
}

}  // namespace

HostTensor& AttnTensors::get(Role r) {
  HostTensor* all[kRoles] = {&q, &k, &v, &out, &lse, &dout, &dq, &dk, &dv};
  return *all[int(r)];
}
const HostTensor& AttnTensors::get(Role r) const { return const_cast<AttnTensors*>(this)->get(r); }

AttentionOptions AttnTensors::options(const AttnCase& c) const {
  AttentionOptions o = c.options();
  if (c.varlen) {
    o.cu_seqlens_q = cu_q.view();
    o.cu_seqlens_k = cu_k.view();
  }
  return o;
}

std::string AttnTensors::describe() const {
  std::string s;
  for (int r = 0; r < kRoles; ++r) {
    const HostTensor& t = get(Role(r));
    if (t.ndim() == 0) continue;
    s += "  ";
    s += role_name(Role(r));
    s += ": ";
    s += t.describe();
    s += '\n';
  }
  return s;
}

AttnTensors make_tensors(const AttnCase& c, std::mt19937_64& rng, bool backward) {
  using V = std::vector<std::int64_t>;
  const std::int64_t b = c.batch, hq = c.heads_q, hk = c.heads_kv, d = c.head_dim, dv = c.head_dim_v;
  V shape[kRoles];
  if (c.varlen) {
    const std::int64_t tq = c.total_q(), tk = c.total_k();
    shape[int(Role::q)] = {tq, hq, d};
    shape[int(Role::k)] = {tk, hk, d};
    shape[int(Role::v)] = {tk, hk, dv};
    shape[int(Role::out)] = {tq, hq, dv};
    shape[int(Role::lse)] = {hq, tq};
  } else {
    const std::int64_t sq = c.seqlen_q, sk = c.seqlen_k;
    shape[int(Role::q)] = {b, sq, hq, d};
    shape[int(Role::k)] = {b, sk, hk, d};
    shape[int(Role::v)] = {b, sk, hk, dv};
    shape[int(Role::out)] = {b, sq, hq, dv};
    shape[int(Role::lse)] = {b, hq, sq};
  }
  shape[int(Role::dout)] = shape[int(Role::out)];
  shape[int(Role::dq)] = shape[int(Role::q)];
  shape[int(Role::dk)] = shape[int(Role::k)];
  shape[int(Role::dv)] = shape[int(Role::v)];

  AttnTensors t;
  const int roles = backward ? kRoles : int(Role::lse) + 1;
  for (int r = 0; r < roles; ++r) {
    const DType dt = Role(r) == Role::lse ? DType::f32 : c.dtype;
    t.get(Role(r)) = HostTensor(dt, shape[r], layout_for(c.layout[r], Role(r), shape[r], rng, c.align));
  }
  t.q.fill_normal(rng, c.q_magnitude);
  t.k.fill_normal(rng);
  t.v.fill_normal(rng);
  if (backward) t.dout.fill_normal(rng);
  if (c.varlen) {
    t.cu_q = make_cu_seqlens(c.seqlens_q);
    t.cu_k = make_cu_seqlens(c.seqlens_k);
  }
  return t;
}

void HostWorkspace::Free::operator()(void* p) const { std::free(p); }

HostWorkspace::HostWorkspace(std::size_t bytes) : bytes_(bytes) {
  if (bytes > 0) {
    data_.reset(std::aligned_alloc(64, (bytes + 63) / 64 * 64));
    if (!data_) throw std::bad_alloc();
  }
}

void run_forward(const AttnCase& c, AttnTensors& t) {
  const AttentionOptions o = t.options(c);
  const HostWorkspace ws(forward_workspace_bytes(t.q.view(), t.k.view(), t.v.view(), o));
  forward(t.q.view(), t.k.view(), t.v.view(), t.out.view(), t.lse.view(), o, ws.get());
}

void run_backward(const AttnCase& c, AttnTensors& t) {
  const AttentionOptions o = t.options(c);
  const HostWorkspace ws(backward_workspace_bytes(t.q.view(), t.k.view(), t.v.view(), o));
  backward(t.dout.view(), t.q.view(), t.k.view(), t.v.view(), t.out.view(), t.lse.view(), t.dq.view(), t.dk.view(),
           t.dv.view(), o, ws.get());
}

AttnResult collect(const AttnTensors& t, bool backward) {
  AttnResult r;
  r.out = t.out.to_dense();
  r.lse = t.lse.to_dense();
  if (backward) {
    r.dq = t.dq.to_dense();
    r.dk = t.dk.to_dense();
    r.dv = t.dv.to_dense();
  }
  return r;
}

AttnResult reference_result(const AttnCase& c, const AttnTensors& t, reference::Precision prec, bool backward) {
  const AttentionOptions o = t.options(c);
  AttnResult r;
  // The validated parameter block describes our host buffers; the reference
  // reads inputs through it and writes dense vectors of its own.
  const AttnParams p = backward ? detail::make_backward_params(t.dout.view(), t.q.view(), t.k.view(), t.v.view(),
                                                               t.out.view(), t.lse.view(), t.dq.view(),
                                                               t.dk.view(), t.dv.view(), o)
                                : detail::make_forward_params(t.q.view(), t.k.view(), t.v.view(), t.out.view(),
                                                              t.lse.view(), o);
  reference::forward(p, prec, r.out, r.lse);
  if (backward) reference::backward(p, prec, r.dq, r.dk, r.dv);
  return r;
}

std::vector<ToleranceResult> check_results(const AttnCase& c, const AttnResult& ours, const AttnResult& f64,
                                           const AttnResult& storage, bool backward) {
  const std::string desc = c.describe();
  std::vector<ToleranceResult> v;
  v.push_back(check_tolerance("out", desc, c.dtype, ours.out, f64.out, storage.out));
  // LSE is fp32 for every input dtype, but its error budget follows the
  // inputs: the naive LSE is computed from scores rounded to the input dtype.
  v.push_back(check_tolerance("lse", desc, c.dtype, ours.lse, f64.lse, storage.lse));
  if (backward) {
    v.push_back(check_tolerance("dq", desc, c.dtype, ours.dq, f64.dq, storage.dq));
    v.push_back(check_tolerance("dk", desc, c.dtype, ours.dk, f64.dk, storage.dk));
    v.push_back(check_tolerance("dv", desc, c.dtype, ours.dv, f64.dv, storage.dv));
  }
  return v;
}

std::vector<std::string> check_masked_rows(const AttnCase& c, const AttnResult& ours, bool backward) {
  std::vector<std::string> bad;
  const int wl = int(c.window_left), wr = c.causal ? 0 : int(c.window_right);
  const std::int64_t hq = c.heads_q, hk = c.heads_kv;
  std::int64_t q0 = 0, k0 = 0;  // first global row of sequence b
  auto row_is_zero = [](const std::vector<double>& x, std::int64_t row, std::int64_t width) {
    for (std::int64_t i = 0; i < width; ++i)
      if (x[std::size_t(row * width + i)] != 0.0) return false;
    return true;
  };
  for (int b = 0; b < c.batch; ++b) {
    const int sq = c.sq(b), sk = c.sk(b);
    // Fixed-length rows are (b, i); varlen rows are cu_seqlens[b] + i: both are q0 + i.
    std::vector<char> key_seen(std::size_t(sk), 0);
    for (int i = 0; i < sq; ++i) {
      const VisibleRange vr = visible_keys(i, sq, sk, wl, wr);
      for (std::int64_t j = vr.lo; j < vr.hi; ++j) key_seen[std::size_t(j)] = 1;
      if (vr.lo < vr.hi) continue;
      const std::int64_t row = q0 + i;
      if (!row_is_zero(ours.out, row, hq * c.head_dim_v))
        bad.push_back("out row " + std::to_string(row) + " sees no key but is not exactly 0");
      if (backward && !row_is_zero(ours.dq, row, hq * c.head_dim))
        bad.push_back("dq row " + std::to_string(row) + " sees no key but is not exactly 0");
    }
    if (backward)
      for (int j = 0; j < sk; ++j) {
        if (key_seen[std::size_t(j)]) continue;
        const std::int64_t row = k0 + j;
        if (!row_is_zero(ours.dk, row, hk * c.head_dim))
          bad.push_back("dk row " + std::to_string(row) + " is seen by no query but is not exactly 0");
        if (!row_is_zero(ours.dv, row, hk * c.head_dim_v))
          bad.push_back("dv row " + std::to_string(row) + " is seen by no query but is not exactly 0");
      }
    q0 += sq;
    k0 += sk;
  }
  if (bad.size() > 8) {
    const std::size_t n = bad.size();
    bad.resize(8);
    bad.push_back("... " + std::to_string(n - 8) + " more");
  }
  return bad;
}

std::vector<std::string> check_padding(const AttnTensors& t, bool backward) {
  std::vector<std::string> bad;
  // Inputs are read-only; outputs own only the elements of their views.
  for (int r = 0; r < kRoles; ++r) {
    const bool grad_role = Role(r) == Role::dout || Role(r) == Role::dq || Role(r) == Role::dk || Role(r) == Role::dv;
    if (grad_role && !backward) continue;
    if (!t.get(Role(r)).padding_is_poison())
      bad.push_back(std::string(role_name(Role(r))) + ": storage outside the view was written");
  }
  return bad;
}

}  // namespace flashpp::test
