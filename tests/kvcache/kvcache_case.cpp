#include "kvcache/kvcache_case.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "common/mask.hpp"
#include "common/params.hpp"
#include "common/rotary.hpp"
#include "reference/reference.hpp"

namespace flashpp::test::kv {
namespace {

using V = std::vector<std::int64_t>;

int pick(std::mt19937_64& rng, int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); }
bool chance(std::mt19937_64& rng, double p) { return std::uniform_real_distribution<double>(0, 1)(rng) < p; }
template <typename T>
T one_of(std::mt19937_64& rng, std::initializer_list<T> xs) {
  return *(xs.begin() + pick(rng, 0, int(xs.size()) - 1));
}

ElemType elem(DType t) { return t == DType::f32 ? ElemType::f32 : t == DType::f16 ? ElemType::f16 : ElemType::bf16; }

int mantissa_bits(DType t) { return t == DType::f32 ? 23 : t == DType::f16 ? 10 : 7; }

// One unit in the last place of x in dtype t (the gap to its neighbour).
double ulp(double x, DType t) {
  const double ax = std::abs(x);
  const int min_exp = t == DType::f16 ? -14 : -126;
  int e = ax > 0 ? int(std::floor(std::log2(ax))) : min_exp;
  e = std::max(e, min_exp);
  return std::ldexp(1.0, e - mantissa_bits(t));
}

Layout layout_of(const KVCase& c, int ndim, std::mt19937_64& rng) {
  return c.padded_layouts ? padded_layout(ndim, rng, 8) : contiguous_layout();
}

// Dense index of element x of (slot pos, head h) of sequence b in the cache.
std::int64_t cache_index(const KVCase& c, const KVTensors& t, int b, int pos, int h, int x, int width) {
  std::int64_t row, slot;
  if (c.paged) {
    row = std::int64_t(t.block_table.get(std::int64_t(b) * c.max_pages + pos / c.page_size));
    slot = pos % c.page_size;
    return ((row * c.page_size + slot) * c.heads_kv + h) * width + x;
  }
  row = c.use_batch_idx ? std::int64_t(t.cache_batch_idx.get(b)) : b;
  return ((row * c.seqlen_cache + pos) * c.heads_kv + h) * width + x;
}

// fp64 rotation of one head row (values of dtype t), rounded back to t.
// slack (optional) receives |x_a cos| + |x_b sin| per element: the size of the
// terms a single-precision rotation cancels, which bounds its rounding error.
void rotate_reference(const KVCase& c, const KVTensors& t, int pos, std::vector<double>& x,
                      std::vector<double>* slack = nullptr) {
  const int half = c.rotary_dim / 2;
  if (slack) slack->assign(x.size(), 0.0);
  for (int p = 0; p < half; ++p) {
    const RotaryPair pr = rotary_pair(p, c.rotary_dim, c.rotary_interleaved);
    const double cs = t.rotary_cos.get(std::int64_t(pos) * half + p);
    const double sn = t.rotary_sin.get(std::int64_t(pos) * half + p);
    const double a = x[std::size_t(pr.a)], b = x[std::size_t(pr.b)];
    x[std::size_t(pr.a)] = a * cs - b * sn;
    x[std::size_t(pr.b)] = a * sn + b * cs;
    if (slack) {
      (*slack)[std::size_t(pr.a)] = std::abs(a * cs) + std::abs(b * sn);
      (*slack)[std::size_t(pr.b)] = std::abs(a * sn) + std::abs(b * cs);
    }
  }
  for (auto& v : x) v = reference::round_to(v, elem(c.dtype));
}

bool q_per_row(const KVCase& c) { return c.causal || c.window_left >= 0 || c.window_right >= 0; }

}  // namespace

AttentionOptions KVCase::options() const {
  AttentionOptions o;
  o.causal = causal;
  o.window_left = window_left;
  o.window_right = window_right;
  o.softcap = softcap;
  o.softmax_scale = softmax_scale;
  return o;
}

std::string KVCase::describe() const {
  std::string s = label + " " + dtype_name(dtype) + " b" + std::to_string(batch) + " sq" + std::to_string(seqlen_q) +
                  " h" + std::to_string(heads_q) + "/" + std::to_string(heads_kv) + " d" + std::to_string(head_dim) +
                  "/" + std::to_string(head_dim_v);
  if (paged)
    s += " paged(ps" + std::to_string(page_size) + " x" + std::to_string(max_pages) + " +" + std::to_string(extra_pages) + ")";
  else
    s += " cache" + std::to_string(seqlen_cache) + (use_batch_idx ? " batch_idx+" + std::to_string(extra_cache_rows) : "");
  s += " lens[";
  for (int b = 0; b < batch; ++b) s += (b ? "," : "") + std::to_string(cache_len(b));
  s += "] new" + std::to_string(seqlen_new);
  if (rotary_dim) s += std::string(" rot") + std::to_string(rotary_dim) + (rotary_interleaved ? "i" : "n");
  if (causal) s += " causal";
  if (window_left >= 0 || window_right >= 0)
    s += " win(" + std::to_string(window_left) + "," + std::to_string(window_right) + ")";
  if (softcap > 0) s += " cap" + std::to_string(softcap);
  if (softmax_scale) s += " scale" + std::to_string(*softmax_scale);
  s += " splits" + std::to_string(num_splits);
  if (q_magnitude != 1.0) s += " qmag" + std::to_string(q_magnitude);
  if (padded_layouts) s += " padded";
  return s;
}

double KVCase::cost() const {
  double keys = 0;
  for (int b = 0; b < batch; ++b) keys += seqlen_k(b);
  return keys * seqlen_q * heads_q * (head_dim + head_dim_v);
}

KVCase sample_kv_case(std::mt19937_64& rng, DType dtype, bool large) {
  for (;;) {
    KVCase c;
    c.dtype = dtype;
    c.batch = pick(rng, 1, large ? 6 : 4);
    c.heads_kv = pick(rng, 1, 3);
    const int gqa = one_of(rng, {1, 2, 4, 4, 8});
    c.heads_q = c.heads_kv * gqa;
    c.seqlen_q = one_of(rng, {1, 1, 1, 2, 3, 4, 5});
    c.head_dim = large ? one_of(rng, {64, 128, 128, 128, 256, 40, 96}) : one_of(rng, {32, 64, 64, 80, 128, 256, 8});
    c.head_dim_v = chance(rng, 0.8) ? c.head_dim : one_of(rng, {32, 64, 128});
    const int cap_target = large ? pick(rng, 1, 3000) : pick(rng, 1, 500);
    c.paged = chance(rng, 0.6);
    if (c.paged) {
      c.page_size = large ? one_of(rng, {1, 16, 16, 64, 64, 256, 7}) : one_of(rng, {1, 3, 16, 16, 64, 256});
      c.max_pages = std::max(1, (cap_target + c.page_size - 1) / c.page_size);
      c.extra_pages = pick(rng, 0, 3);
    } else {
      c.seqlen_cache = cap_target;
      c.use_batch_idx = chance(rng, 0.5);
      c.extra_cache_rows = c.use_batch_idx ? pick(rng, 0, 3) : 0;
    }
    const int cap = c.capacity();
    c.seqlen_new = chance(rng, 0.5) ? 0 : std::min(cap, chance(rng, 0.6) ? c.seqlen_q : pick(rng, 1, 5));
    c.have_seqlens = c.seqlen_new > 0 || chance(rng, 0.9);
    for (int b = 0; b < c.batch; ++b) {
      const int room = cap - c.seqlen_new;
      const int r = pick(rng, 0, 9);
      c.cache_lens.push_back(r == 0 ? 0 : r == 1 ? room : pick(rng, 0, room));
    }
    if (c.seqlen_new > 0 && c.head_dim >= 16 && chance(rng, 0.5)) {
      c.rotary_dim = 16 * pick(rng, 1, c.head_dim / 16);
      c.rotary_interleaved = chance(rng, 0.5);
      c.seqlen_ro_extra = pick(rng, 0, 5);
    }
    const int m = pick(rng, 0, 9);
    if (m < 4) {
      c.causal = true;
      if (chance(rng, 0.3)) c.window_left = pick(rng, 0, 300);
    } else if (m < 6) {
      c.window_left = chance(rng, 0.8) ? pick(rng, 0, 400) : -1;
      c.window_right = chance(rng, 0.5) ? pick(rng, 0, 6) : -1;
    }
    if (chance(rng, 0.2)) c.softcap = float(pick(rng, 2, 30));
    if (chance(rng, 0.15)) c.softmax_scale = float(std::uniform_real_distribution<double>(0.02, 0.3)(rng));
    c.num_splits = chance(rng, 0.5) ? 0 : pick(rng, 1, large ? 40 : 12);
    c.with_lse = chance(rng, 0.8);
    c.q_magnitude = chance(rng, 0.15) ? 4.0 : 1.0;
    c.padded_layouts = chance(rng, 0.3);
    if (c.cost() <= (large ? 6e7 : 6e6)) return c;
  }
}

std::vector<KVCase> kv_edge_cases(DType dtype) {
  std::vector<KVCase> v;
  auto base = [&](const char* label) {
    KVCase c;
    c.label = label;
    c.dtype = dtype;
    c.batch = 3;
    c.heads_q = 8;
    c.heads_kv = 2;
    c.head_dim = c.head_dim_v = 64;
    c.seqlen_cache = 96;
    c.cache_lens = {17, 96, 40};
    return c;
  };
  {
    KVCase c = base("empty_cache");
    c.cache_lens = {0, 0, 0};
    v.push_back(c);
  }
  {
    KVCase c = base("full_without_seqlens");
    c.have_seqlens = false;
    v.push_back(c);
  }
  {
    KVCase c = base("causal_rows_see_nothing");
    c.seqlen_q = 5;
    c.cache_lens = {2, 0, 7};
    c.causal = true;
    v.push_back(c);
  }
  {
    KVCase c = base("window_0_0_append");
    c.seqlen_q = 3;
    c.seqlen_new = 3;
    c.cache_lens = {10, 93, 0};
    c.window_left = 0;
    c.window_right = 0;
    v.push_back(c);
  }
  {
    KVCase c = base("more_splits_than_tiles");
    c.num_splits = 64;
    v.push_back(c);
  }
  {
    KVCase c = base("page1_shuffled");
    c.paged = true;
    c.page_size = 1;
    c.max_pages = 150;
    c.extra_pages = 5;
    c.cache_lens = {149, 3, 77};
    c.seqlen_new = 1;
    v.push_back(c);
  }
  {
    KVCase c = base("page256");
    c.paged = true;
    c.page_size = 256;
    c.max_pages = 2;
    c.extra_pages = 1;
    c.cache_lens = {300, 255, 511};
    c.seqlen_new = 1;
    c.num_splits = 3;
    v.push_back(c);
  }
  {
    KVCase c = base("rotary_whole_head_interleaved");
    c.seqlen_q = 2;
    c.seqlen_new = 2;
    c.cache_lens = {17, 94, 0};
    c.rotary_dim = 64;
    c.rotary_interleaved = true;
    c.causal = true;
    v.push_back(c);
  }
  {
    KVCase c = base("rotary_half_neox_noncausal");
    c.seqlen_q = 3;
    c.seqlen_new = 3;
    c.cache_lens = {17, 93, 40};
    c.rotary_dim = 32;
    v.push_back(c);
  }
  {
    KVCase c = base("softcap_large_logits");
    c.softcap = 5.f;
    c.q_magnitude = 8.0;
    v.push_back(c);
  }
  {
    KVCase c = base("batch_idx_shuffled");
    c.use_batch_idx = true;
    c.extra_cache_rows = 3;
    c.seqlen_new = 2;
    c.seqlen_q = 2;
    c.cache_lens = {17, 94, 40};
    c.causal = true;
    v.push_back(c);
  }
  {
    KVCase c = base("mqa_32_rows");
    c.heads_q = 16;
    c.heads_kv = 1;
    c.seqlen_q = 2;
    c.causal = true;
    v.push_back(c);
  }
  {
    KVCase c = base("gqa_64_rows");
    c.heads_q = 32;
    c.heads_kv = 1;
    c.seqlen_q = 2;
    c.batch = 2;
    c.cache_lens = {80, 3};
    v.push_back(c);
  }
  {
    KVCase c = base("dv_wider");
    c.head_dim = 32;
    c.head_dim_v = 128;
    c.causal = true;
    c.seqlen_q = 2;
    v.push_back(c);
  }
  {
    KVCase c = base("d_wider_hdim256");
    c.head_dim = 256;
    c.head_dim_v = 64;
    c.paged = true;
    c.page_size = 16;
    c.max_pages = 8;
    c.cache_lens = {100, 127, 1};
    c.seqlen_new = 1;
    c.rotary_dim = 128;
    v.push_back(c);
  }
  {
    KVCase c = base("hdim8_padded");
    c.head_dim = c.head_dim_v = 8;
    c.padded_layouts = true;
    v.push_back(c);
  }
  return v;
}

std::vector<HostTensor*> KVTensors::all() {
  return {&q,           &k_cache,         &v_cache,     &k_new,      &v_new,      &cache_seqlens, &cache_batch_idx,
          &block_table, &rotary_cos,      &rotary_sin,  &out,        &lse,        &status};
}

std::string KVTensors::describe() const {
  const std::pair<const char*, const HostTensor*> named[] = {
      {"q", &q}, {"k_cache", &k_cache}, {"v_cache", &v_cache}, {"k_new", &k_new}, {"out", &out}, {"lse", &lse}};
  std::string s;
  for (const auto& [name, t] : named)
    if (t->ndim() > 0) s += std::string("  ") + name + ": " + t->describe() + "\n";
  return s;
}

KVTensors make_kv_tensors(const KVCase& c, std::mt19937_64& rng) {
  KVTensors t;
  const std::int64_t b = c.batch, hq = c.heads_q, hk = c.heads_kv, d = c.head_dim, dv = c.head_dim_v;
  t.q = HostTensor(c.dtype, V{b, c.seqlen_q, hq, d}, layout_of(c, 4, rng));
  t.q.fill_normal(rng, c.q_magnitude);
  V cache_shape;
  if (c.paged) {
    const int pool = c.batch * c.max_pages + c.extra_pages;
    cache_shape = {pool, c.page_size, hk};
    // A shuffled pool: sequence b's pages are scattered; columns past what a
    // sequence uses hold -1 and must never be read.
    std::vector<int> perm(static_cast<std::size_t>(pool));
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    t.block_table = HostTensor(DType::i32, V{b, c.max_pages});
    for (int s = 0; s < c.batch; ++s) {
      const int used = (c.seqlen_k(s) + c.page_size - 1) / c.page_size;
      for (int j = 0; j < c.max_pages; ++j)
        t.block_table.set(std::int64_t(s) * c.max_pages + j, j < used ? perm[std::size_t(s * c.max_pages + j)] : -1);
    }
  } else {
    const int rows = c.use_batch_idx ? c.batch + c.extra_cache_rows : c.batch;
    cache_shape = {rows, c.seqlen_cache, hk};
    if (c.use_batch_idx) {
      std::vector<int> perm(static_cast<std::size_t>(rows));
      std::iota(perm.begin(), perm.end(), 0);
      std::shuffle(perm.begin(), perm.end(), rng);
      t.cache_batch_idx = HostTensor(DType::i32, V{b});
      for (int s = 0; s < c.batch; ++s) t.cache_batch_idx.set(s, perm[std::size_t(s)]);
    }
  }
  V ks = cache_shape, vs = cache_shape;
  ks.push_back(d);
  vs.push_back(dv);
  t.k_cache = HostTensor(c.dtype, ks, layout_of(c, 4, rng));
  t.v_cache = HostTensor(c.dtype, vs, layout_of(c, 4, rng));
  t.k_cache.fill_normal(rng);
  t.v_cache.fill_normal(rng);
  t.k_cache0 = t.k_cache.to_dense();
  t.v_cache0 = t.v_cache.to_dense();
  if (c.have_seqlens) {
    t.cache_seqlens = HostTensor(DType::i32, V{b});
    for (int s = 0; s < c.batch; ++s) t.cache_seqlens.set(s, c.cache_lens[std::size_t(s)]);
  }
  if (c.seqlen_new > 0) {
    t.k_new = HostTensor(c.dtype, V{b, c.seqlen_new, hk, d}, layout_of(c, 4, rng));
    t.v_new = HostTensor(c.dtype, V{b, c.seqlen_new, hk, dv}, layout_of(c, 4, rng));
    t.k_new.fill_normal(rng);
    t.v_new.fill_normal(rng);
  }
  if (c.rotary_dim > 0) {
    const int ro = c.capacity() + c.seqlen_q + c.seqlen_ro_extra;
    const int half = c.rotary_dim / 2;
    t.rotary_cos = HostTensor(c.dtype, V{ro, half});
    t.rotary_sin = HostTensor(c.dtype, V{ro, half});
    // Real rotary tables: angle pos * base^(-2p / rotary_dim), with a random base.
    const double base = std::uniform_real_distribution<double>(100.0, 20000.0)(rng);
    for (int pos = 0; pos < ro; ++pos)
      for (int p = 0; p < half; ++p) {
        const double ang = pos * std::pow(base, -2.0 * p / c.rotary_dim);
        t.rotary_cos.set(std::int64_t(pos) * half + p, std::cos(ang));
        t.rotary_sin.set(std::int64_t(pos) * half + p, std::sin(ang));
      }
  }
  t.out = HostTensor(c.dtype, V{b, c.seqlen_q, hq, dv}, layout_of(c, 4, rng));
  if (c.with_lse) t.lse = HostTensor(DType::f32, V{b, hq, c.seqlen_q});
  t.status = HostTensor(DType::i32, V{4});
  return t;
}

KVCacheArgs kv_args(const KVCase& c, const KVTensors& t, const std::function<TensorView(const HostTensor&)>& view) {
  auto opt = [&](const HostTensor& x) { return x.ndim() > 0 ? view(x) : TensorView{}; };
  KVCacheArgs a;
  a.q = view(t.q);
  a.k_cache = view(t.k_cache);
  a.v_cache = view(t.v_cache);
  a.k_new = opt(t.k_new);
  a.v_new = opt(t.v_new);
  a.cache_seqlens = opt(t.cache_seqlens);
  a.cache_batch_idx = opt(t.cache_batch_idx);
  a.block_table = opt(t.block_table);
  a.rotary_cos = opt(t.rotary_cos);
  a.rotary_sin = opt(t.rotary_sin);
  a.out = view(t.out);
  a.lse = opt(t.lse);
  a.rotary_interleaved = c.rotary_interleaved;
  a.num_splits = c.num_splits;
  return a;
}

KVCacheArgs kv_host_args(const KVCase& c, const KVTensors& t) {
  return kv_args(c, t, [](const HostTensor& x) { return x.view(); });
}

KVExpected kv_reference(const KVCase& c, const KVTensors& t) {
  KVExpected e;
  const int B = c.batch, sq = c.seqlen_q, hq = c.heads_q, hk = c.heads_kv, d = c.head_dim, dv = c.head_dim_v;
  const int g = hq / hk;
  e.k_cache = t.k_cache0;
  e.v_cache = t.v_cache0;
  e.k_written.assign(e.k_cache.size(), 0);
  e.v_written.assign(e.v_cache.size(), 0);
  e.k_slack.assign(e.k_cache.size(), 0.0);
  std::vector<double> row, slack;
  for (int b = 0; b < B; ++b)
    for (int j = 0; j < c.seqlen_new; ++j) {
      const int pos = c.cache_len(b) + j;
      for (int h = 0; h < hk; ++h) {
        row.assign(std::size_t(d), 0.0);
        for (int x = 0; x < d; ++x) row[std::size_t(x)] = t.k_new.get(((std::int64_t(b) * c.seqlen_new + j) * hk + h) * d + x);
        if (c.rotary_dim > 0) rotate_reference(c, t, pos, row, &slack);
        for (int x = 0; x < d; ++x) {
          const std::int64_t i = cache_index(c, t, b, pos, h, x, d);
          e.k_cache[std::size_t(i)] = row[std::size_t(x)];
          e.k_written[std::size_t(i)] = 1;
          if (c.rotary_dim > 0) e.k_slack[std::size_t(i)] = slack[std::size_t(x)];
        }
        for (int x = 0; x < dv; ++x) {
          const std::int64_t i = cache_index(c, t, b, pos, h, x, dv);
          e.v_cache[std::size_t(i)] = t.v_new.get(((std::int64_t(b) * c.seqlen_new + j) * hk + h) * dv + x);
          e.v_written[std::size_t(i)] = 1;
        }
      }
    }

  // Varlen inputs for src/reference: rotated q, and the full K/V of each sequence.
  std::vector<int> lens_q(static_cast<std::size_t>(B), sq), lens_k(static_cast<std::size_t>(B));
  std::int64_t total_k = 0;
  int max_k = 0;
  for (int b = 0; b < B; ++b) {
    lens_k[std::size_t(b)] = c.seqlen_k(b);
    total_k += c.seqlen_k(b);
    max_k = std::max(max_k, c.seqlen_k(b));
  }
  const std::int64_t total_q = std::int64_t(B) * sq;
  HostTensor qr(c.dtype, V{total_q, hq, d}), kf(c.dtype, V{total_k, hk, d}), vf(c.dtype, V{total_k, hk, dv});
  for (int b = 0; b < B; ++b)
    for (int i = 0; i < sq; ++i)
      for (int h = 0; h < hq; ++h) {
        row.assign(std::size_t(d), 0.0);
        const std::int64_t base = ((std::int64_t(b) * sq + i) * hq + h) * d;
        for (int x = 0; x < d; ++x) row[std::size_t(x)] = t.q.get(base + x);
        if (c.rotary_dim > 0) rotate_reference(c, t, rotary_q_position(c.cache_len(b), i, q_per_row(c)), row);
        for (int x = 0; x < d; ++x) qr.set(base + x, row[std::size_t(x)]);
      }
  std::int64_t k0 = 0;
  for (int b = 0; b < B; ++b) {
    for (int j = 0; j < c.seqlen_k(b); ++j)
      for (int h = 0; h < hk; ++h) {
        for (int x = 0; x < d; ++x)
          kf.set(((k0 + j) * hk + h) * d + x, e.k_cache[std::size_t(cache_index(c, t, b, j, h, x, d))]);
        for (int x = 0; x < dv; ++x)
          vf.set(((k0 + j) * hk + h) * dv + x, e.v_cache[std::size_t(cache_index(c, t, b, j, h, x, dv))]);
      }
    k0 += c.seqlen_k(b);
  }
  HostTensor cu_q = make_cu_seqlens(lens_q), cu_k = make_cu_seqlens(lens_k);

  AttnParams p;
  p.q = qr.view().data;
  p.k = kf.view().data;
  p.v = vf.view().data;
  p.q_row_stride = std::int64_t(hq) * d;
  p.q_head_stride = d;
  p.k_row_stride = std::int64_t(hk) * d;
  p.k_head_stride = d;
  p.v_row_stride = std::int64_t(hk) * dv;
  p.v_head_stride = dv;
  p.batch = B;
  p.seqlen_q = sq;
  p.seqlen_k = max_k;
  p.heads_q = hq;
  p.heads_kv = hk;
  p.gqa_ratio = g;
  p.head_dim = d;
  p.head_dim_v = dv;
  p.total_q = total_q;
  p.total_k = total_k;
  p.cu_seqlens_q = static_cast<const std::int32_t*>(cu_q.view().data);
  p.cu_seqlens_k = static_cast<const std::int32_t*>(cu_k.view().data);
  p.scale = c.softmax_scale ? *c.softmax_scale : float(1.0 / std::sqrt(double(d)));
  p.scale_log2 = float(double(p.scale) * 1.4426950408889634);
  p.softcap = c.softcap;
  p.window_left = int(c.window_left);
  p.window_right = c.causal ? 0 : int(c.window_right);
  p.causal = c.causal;
  p.dtype = elem(c.dtype);

  std::vector<double> lse_f64, lse_naive;
  reference::forward(p, reference::Precision::f64, e.out_f64, lse_f64);
  reference::forward(p, reference::Precision::storage, e.out_naive, lse_naive);
  // (heads_q, total_q) -> (batch, heads_q, seqlen_q)
  auto reorder = [&](const std::vector<double>& l) {
    std::vector<double> r(std::size_t(total_q) * hq);
    for (int b = 0; b < B; ++b)
      for (int h = 0; h < hq; ++h)
        for (int i = 0; i < sq; ++i)
          r[(std::size_t(b) * hq + h) * sq + i] = l[std::size_t(h) * total_q + std::size_t(b) * sq + i];
    return r;
  };
  e.lse_f64 = reorder(lse_f64);
  e.lse_naive = reorder(lse_naive);
  return e;
}

KVCheck check_kv_results(const KVCase& c, const KVTensors& t, const KVExpected& e) {
  KVCheck r;
  const std::string desc = c.describe();
  const std::vector<double> out = t.out.to_dense();
  r.tolerance.push_back(check_tolerance("out", desc, c.dtype, out, e.out_f64, e.out_naive));
  if (c.with_lse)
    r.tolerance.push_back(check_tolerance("lse", desc, c.dtype, t.lse.to_dense(), e.lse_f64, e.lse_naive));

  // Rows that see no key: exactly zero.
  const int sq = c.seqlen_q, hq = c.heads_q, dv = c.head_dim_v;
  int zero_bad = 0;
  for (int b = 0; b < c.batch; ++b)
    for (int h = 0; h < hq; ++h)
      for (int i = 0; i < sq; ++i) {
        if (e.lse_f64[(std::size_t(b) * hq + h) * sq + i] != -std::numeric_limits<double>::infinity()) continue;
        for (int x = 0; x < dv; ++x)
          if (out[((std::size_t(b) * sq + i) * hq + h) * dv + x] != 0.0) {
            if (zero_bad++ < 4)
              r.problems.push_back("out (" + std::to_string(b) + ", " + std::to_string(i) + ", " + std::to_string(h) +
                                   ") sees no key but is not exactly 0");
            break;
          }
      }

  // Cache slots: appended ones within one rounding step (plus the fp32
  // rounding of the rotation's two products) of the fp64 result, every other
  // one bit-for-bit unchanged.
  auto check_cache = [&](const char* name, const HostTensor& cache, const std::vector<double>& want,
                         const std::vector<char>& written, const std::vector<double>* slack) {
    const std::vector<double> got = cache.to_dense();
    int bad = 0;
    for (std::size_t i = 0; i < got.size(); ++i) {
      const double bound = ulp(want[i], c.dtype) + (slack ? std::ldexp((*slack)[i], -22) : 0.0);
      const bool ok = written[i] ? std::abs(got[i] - want[i]) <= bound : got[i] == want[i];
      if (!ok && bad++ < 4)
        r.problems.push_back(std::string(name) + " element " + std::to_string(i) + (written[i] ? " (appended)" : " (not owned)") +
                             " is " + std::to_string(got[i]) + ", want " + std::to_string(want[i]));
    }
    if (bad > 4) r.problems.push_back(std::string(name) + ": " + std::to_string(bad) + " wrong elements in all");
  };
  check_cache("k_cache", t.k_cache, e.k_cache, e.k_written, &e.k_slack);
  check_cache("v_cache", t.v_cache, e.v_cache, e.v_written, nullptr);

  const std::pair<const char*, const HostTensor*> views[] = {
      {"q", &t.q}, {"k_cache", &t.k_cache}, {"v_cache", &t.v_cache}, {"k_new", &t.k_new},
      {"v_new", &t.v_new}, {"out", &t.out}, {"lse", &t.lse}};
  for (const auto& [name, x] : views)
    if (x->ndim() > 0 && !x->padding_is_poison())
      r.problems.push_back(std::string(name) + ": storage outside the view was written");
  return r;
}

double max_abs_diff(const std::vector<double>& a, const std::vector<double>& b) {
  double m = 0;
  for (std::size_t i = 0; i < a.size() && i < b.size(); ++i)
    if (std::isfinite(a[i]) && std::isfinite(b[i])) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}

}  // namespace flashpp::test::kv
