#include "api/kvcache_validate.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "api/validate.hpp"

namespace flashpp::detail {
namespace {

[[noreturn]] void fail(ErrorKind kind, const std::string& arg, const std::string& rule) {
  throw Error(kind, arg, rule);
}

constexpr std::int64_t kMax32 = std::numeric_limits<std::int32_t>::max();

std::string shape_str(const TensorView& t) {
  std::string s = "(";
  for (int i = 0; i < t.ndim; ++i) s += (i ? ", " : "") + std::to_string(t.shape[i]);
  return s + ")";
}

std::string device_str(const Device& d) {
  return d.kind == DeviceKind::cpu ? std::string("cpu") : "cuda:" + std::to_string(d.index);
}

std::string n(std::int64_t x) { return std::to_string(x); }

// Rank, sizes, strides, data pointer and device of one tensor argument.
// vector_aligned: the CUDA kernels move it in 16-byte vectors.
void check_tensor(const char* name, const TensorView& t, int ndim, const Device& dev, bool vector_aligned) {
  if (!t.defined()) fail(ErrorKind::value, name, "is required but was not given");
  if (t.ndim != ndim) fail(ErrorKind::value, name, "must have " + n(ndim) + " dims, got " + n(t.ndim) + " " + shape_str(t));
  for (int i = 0; i < t.ndim; ++i) {
    if (t.shape[i] < 0) fail(ErrorKind::value, name, "sizes must be non-negative, got " + shape_str(t));
    if (t.shape[i] > kMax32) fail(ErrorKind::value, name, "each size must fit in int32, got " + shape_str(t));
    if (t.stride[i] < 0) fail(ErrorKind::value, name, "strides must be non-negative (dim " + n(i) + ")");
  }
  if (t.shape[t.ndim - 1] > 1 && t.stride[t.ndim - 1] != 1)
    fail(ErrorKind::value, name, "last dim must be contiguous (stride 1), got stride " + n(t.stride[t.ndim - 1]));
  if (t.numel() > 0 && t.data == nullptr) fail(ErrorKind::value, name, "data pointer is null");
  if (t.device != dev)
    fail(ErrorKind::type, name, "must be on the same device as q (" + device_str(dev) + "), got " + device_str(t.device));
  if (vector_aligned && dev.kind == DeviceKind::cuda) {
    const std::int64_t es = std::int64_t(dtype_size(t.dtype));
    if (reinterpret_cast<std::uintptr_t>(t.data) % 16 != 0)
      fail(ErrorKind::value, name, "data pointer must be 16-byte aligned on CUDA");
    for (int i = 0; i + 1 < t.ndim; ++i)
      if (t.shape[i] > 1 && (t.stride[i] * es) % 16 != 0)
        fail(ErrorKind::value, name,
             "stride of dim " + n(i) + " must be a multiple of 16 bytes on CUDA, got " + n(t.stride[i]) + " elements");
  }
}

void check_dtype(const char* name, const TensorView& t, DType want, const char* like) {
  if (t.dtype != want)
    fail(ErrorKind::type, name, std::string("dtype must be ") + dtype_name(want) + like + ", got " + dtype_name(t.dtype));
}

void check_dims(const char* name, const TensorView& t, std::initializer_list<std::int64_t> want) {
  bool ok = t.ndim == int(want.size());
  int i = 0;
  for (auto w : want) ok = ok && t.shape[i++] == w;
  if (ok) return;
  std::string s = "(";
  i = 0;
  for (auto w : want) s += (i++ ? ", " : "") + n(w);
  fail(ErrorKind::value, name, "shape must be " + s + "), got " + shape_str(t));
}

// An optional int32 vector (batch,).
const std::int32_t* check_index_vector(const char* name, const TensorView& t, std::int64_t batch, const Device& dev) {
  check_tensor(name, t, 1, dev, false);
  check_dtype(name, t, DType::i32, "");
  check_dims(name, t, {batch});
  if (batch > 1 && t.stride[0] != 1) fail(ErrorKind::value, name, "must be contiguous");
  return static_cast<const std::int32_t*>(t.data);
}

void fill3(const TensorView& t, std::int64_t& bs, std::int64_t& rs, std::int64_t& hs) {
  bs = t.stride[0];
  rs = t.stride[1];
  hs = t.stride[2];
}

// Checks of the tables' contents, possible only when they are in host memory.
void check_host_contents(const KVCacheParams& p) {
  const AttnParams& a = p.attn;
  std::vector<char> row_used(std::size_t(p.batch_cache), 0);
  for (int b = 0; b < a.batch; ++b) {
    const std::int64_t len = p.cache_seqlens ? p.cache_seqlens[b] : p.capacity;
    if (len < 0 || len + p.seqlen_new > p.capacity)
      fail(ErrorKind::value, "cache_seqlens",
           "sequence " + n(b) + " holds " + n(len) + " tokens" +
               (p.seqlen_new ? " + " + n(p.seqlen_new) + " new" : std::string()) + ", outside the cache capacity [0, " +
               n(p.capacity) + "]");
    if (p.cache_batch_idx) {
      const std::int32_t r = p.cache_batch_idx[b];
      if (r < 0 || r >= p.batch_cache)
        fail(ErrorKind::value, "cache_batch_idx",
             "entry " + n(b) + " is " + n(r) + ", outside the cache's batch [0, " + n(p.batch_cache) + ")");
      if (p.seqlen_new > 0) {
        if (row_used[std::size_t(r)])
          fail(ErrorKind::value, "cache_batch_idx",
               "cache row " + n(r) + " is used by two sequences while appending k_new; rows must be distinct");
        row_used[std::size_t(r)] = 1;
      }
    }
    const std::int64_t seqlen_k = len + p.seqlen_new;
    if (p.block_table) {
      const std::int64_t pages = (seqlen_k + p.page_size - 1) / p.page_size;
      for (std::int64_t j = 0; j < pages; ++j) {
        const std::int32_t page = p.block_table[b * p.block_table_stride + j];
        if (page < 0 || page >= p.num_pages)
          fail(ErrorKind::value, "block_table",
               "entry (" + n(b) + ", " + n(j) + ") is " + n(page) + ", outside the page pool [0, " + n(p.num_pages) + ")");
      }
    }
    if (p.rotary_cos) {
      const std::int64_t q_last = p.rotary_q_per_row ? len + std::max(a.seqlen_q - 1, 0) : len;
      const std::int64_t need = std::max(seqlen_k, q_last + 1);
      if (need > p.seqlen_ro)
        fail(ErrorKind::value, "rotary_cos",
             "has " + n(p.seqlen_ro) + " positions but sequence " + n(b) + " needs " + n(need));
    }
  }
}

}  // namespace

KVCacheParams make_kvcache_params(const KVCacheArgs& args, const AttentionOptions& opts, bool need_outputs) {
  const TensorView& q = args.q;
  const Device dev = q.device;
  check_tensor("q", q, 4, dev, true);
  if (q.dtype != DType::f16 && q.dtype != DType::bf16 && q.dtype != DType::f32)
    fail(ErrorKind::type, "q", std::string("dtype must be float16, bfloat16 or float32, got ") + dtype_name(q.dtype));
  if (q.dtype == DType::f32 && dev.kind == DeviceKind::cuda)
    fail(ErrorKind::type, "q", "float32 inputs are supported on the CPU only; use float16 or bfloat16 on CUDA");
  if (opts.cu_seqlens_q.defined() || opts.cu_seqlens_k.defined())
    fail(ErrorKind::value, opts.cu_seqlens_q.defined() ? "cu_seqlens_q" : "cu_seqlens_k",
         "varlen options do not apply to attention_with_kvcache (sequence lengths come from cache_seqlens)");

  const bool paged = args.block_table.defined();
  check_tensor("k_cache", args.k_cache, 4, dev, true);
  check_tensor("v_cache", args.v_cache, 4, dev, true);
  check_dtype("k_cache", args.k_cache, q.dtype, " (as q)");
  check_dtype("v_cache", args.v_cache, q.dtype, " (as q)");
  const TensorView& kc = args.k_cache;
  const TensorView& vc = args.v_cache;

  const std::int64_t batch = q.shape[0], sq = q.shape[1], hq = q.shape[2], d = q.shape[3];
  const std::int64_t hk = kc.shape[2], dv = vc.shape[3];
  if (kc.shape[3] != d) fail(ErrorKind::value, "k_cache", "head dim must equal q's (" + n(d) + "), got " + n(kc.shape[3]));
  for (int i = 0; i < 3; ++i)
    if (vc.shape[i] != kc.shape[i])
      fail(ErrorKind::value, "v_cache", "leading dims must equal k_cache's " + shape_str(kc) + ", got " + shape_str(vc));
  auto check_hdim = [](const char* name, std::int64_t x) {
    if (x < 8 || x > 256 || x % 8 != 0)
      fail(ErrorKind::not_supported, name, "head dim must be a multiple of 8 in [8, 256], got " + n(x));
  };
  check_hdim("q", d);
  check_hdim("v_cache", dv);
  if (hq == 0 || hk == 0) fail(ErrorKind::value, hq == 0 ? "q" : "k_cache", "number of heads must be positive");
  if (hq % hk != 0)
    fail(ErrorKind::value, "k_cache",
         "GQA/MQA needs heads_q (" + n(hq) + ") to be a multiple of heads_kv (" + n(hk) + ")");

  KVCacheParams p;
  AttnParams& a = p.attn;
  a.q = q.data;
  a.k = kc.data;
  a.v = vc.data;
  a.dtype = to_elem_type(q.dtype);
  a.batch = int(batch);
  a.seqlen_q = int(sq);
  a.heads_q = int(hq);
  a.heads_kv = int(hk);
  a.gqa_ratio = int(hq / hk);
  a.head_dim = int(d);
  a.head_dim_v = int(dv);
  fill3(q, a.q_batch_stride, a.q_row_stride, a.q_head_stride);
  fill3(kc, a.k_batch_stride, a.k_row_stride, a.k_head_stride);
  fill3(vc, a.v_batch_stride, a.v_row_stride, a.v_head_stride);

  if (paged) {
    const TensorView& bt = args.block_table;
    check_tensor("block_table", bt, 2, dev, false);
    check_dtype("block_table", bt, DType::i32, "");
    if (bt.shape[0] != batch) fail(ErrorKind::value, "block_table", "must have batch (" + n(batch) + ") rows, got " + shape_str(bt));
    if (args.cache_batch_idx.defined())
      fail(ErrorKind::value, "cache_batch_idx", "applies to a contiguous cache only; a paged cache maps sequences through block_table");
    p.num_pages = int(kc.shape[0]);
    p.page_size = int(kc.shape[1]);
    if (p.page_size < 1) fail(ErrorKind::value, "k_cache", "page size (dim 1 of a paged cache) must be >= 1");
    p.max_pages = int(bt.shape[1]);
    const std::int64_t cap = std::int64_t(p.max_pages) * p.page_size;
    if (cap > kMax32) fail(ErrorKind::value, "block_table", "max_pages_per_seq * page_size must fit in int32, got " + n(cap));
    p.capacity = int(cap);
    p.block_table = static_cast<const std::int32_t*>(bt.data);
    p.block_table_stride = bt.stride[0];
    if ((p.page_size & (p.page_size - 1)) == 0) {
      p.page_shift = 0;
      while ((1 << p.page_shift) < p.page_size) ++p.page_shift;
    }
  } else {
    p.batch_cache = int(kc.shape[0]);
    p.capacity = int(kc.shape[1]);
    if (args.cache_batch_idx.defined()) {
      p.cache_batch_idx = check_index_vector("cache_batch_idx", args.cache_batch_idx, batch, dev);
    } else if (p.batch_cache != batch) {
      fail(ErrorKind::value, "k_cache",
           "batch (" + n(p.batch_cache) + ") must equal q's (" + n(batch) + ") unless cache_batch_idx maps sequences to cache rows");
    }
  }
  a.seqlen_k = p.capacity;

  if (args.cache_seqlens.defined())
    p.cache_seqlens = check_index_vector("cache_seqlens", args.cache_seqlens, batch, dev);

  // ---- appended tokens ----
  if (args.k_new.defined() != args.v_new.defined())
    fail(ErrorKind::value, args.k_new.defined() ? "v_new" : "k_new", "k_new and v_new must be given together");
  if (args.k_new.defined()) {
    const TensorView& kn = args.k_new;
    const TensorView& vn = args.v_new;
    check_tensor("k_new", kn, 4, dev, true);
    check_tensor("v_new", vn, 4, dev, true);
    check_dtype("k_new", kn, q.dtype, " (as q)");
    check_dtype("v_new", vn, q.dtype, " (as q)");
    check_dims("k_new", kn, {batch, kn.shape[1], hk, d});
    check_dims("v_new", vn, {batch, kn.shape[1], hk, dv});
    if (!args.cache_seqlens.defined())
      fail(ErrorKind::value, "cache_seqlens", "is required with k_new (it says where the new tokens go)");
    p.seqlen_new = int(kn.shape[1]);
    if (p.seqlen_new > p.capacity)
      fail(ErrorKind::value, "k_new", "seqlen_new (" + n(p.seqlen_new) + ") exceeds the cache capacity (" + n(p.capacity) + ")");
    p.k_new = kn.data;
    p.v_new = vn.data;
    fill3(kn, p.kn_batch_stride, p.kn_row_stride, p.kn_head_stride);
    fill3(vn, p.vn_batch_stride, p.vn_row_stride, p.vn_head_stride);
  }

  // ---- options (the rules of forward()) ----
  if (opts.window_left < -1 || opts.window_right < -1)
    fail(ErrorKind::value, "window",
         "bounds must be >= 0, or -1 for unbounded; got (" + n(opts.window_left) + ", " + n(opts.window_right) + ")");
  if (opts.window_left > kMax32 || opts.window_right > kMax32) fail(ErrorKind::value, "window", "bounds must fit in int32");
  if (opts.causal && opts.window_right > 0)
    fail(ErrorKind::value, "window", "causal attention needs window_right of 0 or -1, got " + n(opts.window_right));
  if (!std::isfinite(opts.softcap) || opts.softcap < 0.f)
    fail(ErrorKind::value, "softcap", "must be finite and >= 0 (0 disables it)");
  if (opts.softmax_scale && !std::isfinite(*opts.softmax_scale)) fail(ErrorKind::value, "softmax_scale", "must be finite");
  a.scale = opts.softmax_scale ? *opts.softmax_scale : float(1.0 / std::sqrt(double(d)));
  a.scale_log2 = float(double(a.scale) * 1.4426950408889634);
  a.softcap = opts.softcap;
  a.causal = opts.causal;
  a.window_left = int(opts.window_left);
  a.window_right = opts.causal ? 0 : int(opts.window_right);

  // ---- rotary ----
  if (args.rotary_cos.defined() != args.rotary_sin.defined())
    fail(ErrorKind::value, args.rotary_cos.defined() ? "rotary_sin" : "rotary_cos",
         "rotary_cos and rotary_sin must be given together");
  if (args.rotary_cos.defined()) {
    if (!args.k_new.defined())
      fail(ErrorKind::value, "rotary_cos", "rotary embedding applies to q and k_new; it needs k_new");
    const TensorView& rc = args.rotary_cos;
    const TensorView& rs = args.rotary_sin;
    check_tensor("rotary_cos", rc, 2, dev, false);
    check_tensor("rotary_sin", rs, 2, dev, false);
    check_dtype("rotary_cos", rc, q.dtype, " (as q)");
    check_dtype("rotary_sin", rs, q.dtype, " (as q)");
    check_dims("rotary_sin", rs, {rc.shape[0], rc.shape[1]});
    const std::int64_t rd = 2 * rc.shape[1];
    if (rd < 16 || rd % 16 != 0 || rd > d)
      fail(ErrorKind::value, "rotary_cos",
           "rotary_dim (2 * dim 1 = " + n(rd) + ") must be a multiple of 16 in [16, head_dim = " + n(d) + "]");
    p.rotary_cos = rc.data;
    p.rotary_sin = rs.data;
    p.rotary_cos_stride = rc.stride[0];
    p.rotary_sin_stride = rs.stride[0];
    p.rotary_dim = int(rd);
    p.seqlen_ro = int(rc.shape[0]);
    p.rotary_interleaved = args.rotary_interleaved;
    p.rotary_q_per_row = a.window_left >= 0 || a.window_right >= 0;
  }

  // ---- execution ----
  if (args.num_splits < 0 || args.num_splits > kMaxKVSplits)
    fail(ErrorKind::value, "num_splits", "must be 0 (auto) or in [1, " + n(kMaxKVSplits) + "], got " + n(args.num_splits));
  p.num_splits = args.num_splits;
  p.validate_on_device = args.validate_on_device;
  if (args.validate_on_device || args.validation_status.defined()) {
    const TensorView& st = args.validation_status;
    if (!st.defined()) fail(ErrorKind::value, "validation_status", "is required with validate_on_device (int32 (4,))");
    check_tensor("validation_status", st, 1, dev, false);
    check_dtype("validation_status", st, DType::i32, "");
    check_dims("validation_status", st, {4});
    if (st.stride[0] != 1) fail(ErrorKind::value, "validation_status", "must be contiguous");
    p.validation_status = static_cast<std::int32_t*>(st.data);
  }
  if (args.split_counters.defined()) {
    const TensorView& sc = args.split_counters;
    check_tensor("split_counters", sc, 1, dev, false);
    check_dtype("split_counters", sc, DType::i32, "");
    if (sc.shape[0] > 1 && sc.stride[0] != 1) fail(ErrorKind::value, "split_counters", "must be contiguous");
    const std::int64_t need = std::int64_t(batch) * hq * sq;
    if (sc.shape[0] < need)
      fail(ErrorKind::value, "split_counters",
           "needs at least batch * heads_q * seqlen_q = " + n(need) + " entries, got " + n(sc.shape[0]));
    p.split_counters = static_cast<std::int32_t*>(sc.data);
  }

  // ---- outputs ----
  if (need_outputs) {
    const TensorView& out = args.out;
    check_tensor("out", out, 4, dev, true);
    check_dtype("out", out, q.dtype, " (as q)");
    check_dims("out", out, {batch, sq, hq, dv});
    fill3(out, a.o_batch_stride, a.o_row_stride, a.o_head_stride);
    a.o = out.data;
    if (args.lse.defined()) {
      const TensorView& lse = args.lse;
      check_tensor("lse", lse, 3, dev, false);
      check_dtype("lse", lse, DType::f32, "");
      check_dims("lse", lse, {batch, hq, sq});
      if (sq > 1 && lse.stride[2] != 1) fail(ErrorKind::value, "lse", "last dim must be contiguous");
      a.lse_batch_stride = lse.stride[0];
      a.lse_head_stride = lse.stride[1];
      a.lse = static_cast<float*>(lse.data);
    }
  }

  if (dev.kind == DeviceKind::cpu) check_host_contents(p);
  return p;
}

const char* kvcache_fault_argument(std::int32_t code) {
  switch (static_cast<KVCacheFault>(code)) {
    case KVCacheFault::cache_seqlen_out_of_range: return "cache_seqlens";
    case KVCacheFault::batch_idx_out_of_range: return "cache_batch_idx";
    case KVCacheFault::page_out_of_range: return "block_table";
    case KVCacheFault::rotary_out_of_range: return "rotary_cos";
    case KVCacheFault::none: break;
  }
  return "validation_status";
}

std::string kvcache_fault_message(const std::int32_t s[4]) {
  const std::string b = n(s[1]), i = n(s[2]), v = n(s[3]);
  switch (static_cast<KVCacheFault>(s[0])) {
    case KVCacheFault::none: return "";
    case KVCacheFault::cache_seqlen_out_of_range:
      return "sequence " + b + " holds " + v + " tokens, which with the new ones is outside the cache capacity (found on the device)";
    case KVCacheFault::batch_idx_out_of_range:
      return "entry " + b + " is " + v + ", outside the cache's batch (found on the device)";
    case KVCacheFault::page_out_of_range:
      return "entry (" + b + ", " + i + ") is " + v + ", outside the page pool (found on the device)";
    case KVCacheFault::rotary_out_of_range:
      return "sequence " + b + " needs rotary position " + v + ", past the table's positions (found on the device)";
  }
  return "unknown fault code " + n(s[0]) + " (sequence " + b + ")";
}

}  // namespace flashpp::detail
