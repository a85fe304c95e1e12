#include "api/validate.hpp"

#include <cmath>
#include <limits>
#include <string>
#include <vector>

namespace flashpp {

const char* dtype_name(DType t) noexcept {
  switch (t) {
    case DType::f32: return "float32";
    case DType::f16: return "float16";
    case DType::bf16: return "bfloat16";
    case DType::f64: return "float64";
    case DType::i32: return "int32";
    case DType::e4m3: return "float8_e4m3fn";
  }
  return "unknown";
}

std::size_t dtype_size(DType t) noexcept {
  switch (t) {
    case DType::f64: return 8;
    case DType::f32:
    case DType::i32: return 4;
    case DType::f16:
    case DType::bf16: return 2;
    case DType::e4m3: return 1;
  }
  return 0;
}

namespace detail {
namespace {

[[noreturn]] void fail(ErrorKind kind, const std::string& arg, const std::string& rule) {
  throw Error(kind, arg, rule);
}

std::string shape_str(const TensorView& t) {
  std::string s = "(";
  for (int i = 0; i < t.ndim; ++i) {
    if (i) s += ", ";
    s += std::to_string(t.shape[i]);
  }
  return s + ")";
}

std::string device_str(const Device& d) {
  return d.kind == DeviceKind::cpu ? std::string("cpu") : "cuda:" + std::to_string(d.index);
}

constexpr std::int64_t kMaxDim32 = std::numeric_limits<std::int32_t>::max();

// Checks that hold for every tensor argument: defined, rank, sizes, strides,
// data pointer, device.
void check_tensor(const char* name, const TensorView& t, int ndim, const Device& device) {
  if (!t.defined()) fail(ErrorKind::value, name, "is required but was not given");
  if (t.ndim != ndim)
    fail(ErrorKind::value, name,
         "must have " + std::to_string(ndim) + " dims, got " + std::to_string(t.ndim) + " " + shape_str(t));
  for (int i = 0; i < t.ndim; ++i) {
    if (t.shape[i] < 0) fail(ErrorKind::value, name, "sizes must be non-negative, got " + shape_str(t));
    if (t.shape[i] > kMaxDim32)
      fail(ErrorKind::value, name, "each size must fit in int32, got " + shape_str(t));
    if (t.stride[i] < 0)
      fail(ErrorKind::value, name, "strides must be non-negative (dim " + std::to_string(i) + ")");
  }
  {
    std::int64_t n = 1;
    bool zero = false, overflow = false;
    for (int i = 0; i < t.ndim; ++i) {
      zero = zero || t.shape[i] == 0;
      overflow = overflow || __builtin_mul_overflow(n, t.shape[i], &n);
    }
    if (overflow && !zero) fail(ErrorKind::value, name, "total number of elements must fit in int64, got " + shape_str(t));
    // The furthest element addressed must be reachable with int64 offsets.
    std::int64_t extent = 0, term = 0;
    for (int i = 0; i < t.ndim && !zero; ++i)
      if (__builtin_mul_overflow(t.shape[i] - 1, t.stride[i], &term) || __builtin_add_overflow(extent, term, &extent))
        fail(ErrorKind::value, name, "strides address beyond int64 offsets");
  }
  // An empty tensor addresses nothing, so its strides carry no meaning (NumPy
  // reports 0 for them).
  if (t.numel() == 0) {
    if (t.device != device)
      fail(ErrorKind::type, name,
           "must be on the same device as q (" + device_str(device) + "), got " + device_str(t.device));
    return;
  }
  if (t.shape[t.ndim - 1] > 1 && t.stride[t.ndim - 1] != 1)
    fail(ErrorKind::value, name,
         "last dim must be contiguous (stride 1), got stride " + std::to_string(t.stride[t.ndim - 1]));
  if (t.numel() > 0 && t.data == nullptr) fail(ErrorKind::value, name, "data pointer is null");
  if (t.device != device)
    fail(ErrorKind::type, name,
         "must be on the same device as q (" + device_str(device) + "), got " + device_str(t.device));
  if (device.kind == DeviceKind::cuda && t.dtype != DType::i32 && t.dtype != DType::f32) {
    // CUDA kernels move 16-byte vectors: base pointer and every row start must be 16-byte aligned.
    const std::size_t es = dtype_size(t.dtype);
    if (reinterpret_cast<std::uintptr_t>(t.data) % 16 != 0)
      fail(ErrorKind::value, name, "data pointer must be 16-byte aligned on CUDA");
    for (int i = 0; i + 1 < t.ndim; ++i)
      if (t.shape[i] > 1 && (t.stride[i] * std::int64_t(es)) % 16 != 0)
        fail(ErrorKind::value, name,
             "stride of dim " + std::to_string(i) + " must be a multiple of 16 bytes on CUDA, got " +
                 std::to_string(t.stride[i]) + " elements");
  }
}

void check_same_dtype(const char* name, const TensorView& t, DType want) {
  if (t.dtype != want)
    fail(ErrorKind::type, name,
         std::string("dtype must match q (") + dtype_name(want) + "), got " + dtype_name(t.dtype));
}

void check_shape(const char* name, const TensorView& t, std::initializer_list<std::int64_t> want) {
  int i = 0;
  bool ok = t.ndim == int(want.size());
  for (auto w : want) {
    if (!ok) break;
    ok = t.shape[i++] == w;
  }
  if (!ok) {
    std::string s = "(";
    i = 0;
    for (auto w : want) s += (i++ ? ", " : "") + std::to_string(w);
    fail(ErrorKind::value, name, "shape must be " + s + "), got " + shape_str(t));
  }
}

// Host-side content checks of a cu_seqlens array (only possible on the CPU).
void check_cu_seqlens_content(const char* name, const TensorView& cu, std::int64_t total, std::int64_t max_len,
                              const char* max_name) {
  const auto* c = static_cast<const std::int32_t*>(cu.data);
  const std::int64_t n = cu.shape[0];
  auto at = [&](std::int64_t i) { return c[i * cu.stride[0]]; };
  if (at(0) != 0) fail(ErrorKind::value, name, "must start at 0, got " + std::to_string(at(0)));
  for (std::int64_t i = 1; i < n; ++i) {
    const std::int64_t len = std::int64_t(at(i)) - at(i - 1);
    if (len < 0)
      fail(ErrorKind::value, name, "must be non-decreasing (entry " + std::to_string(i) + " < entry " +
                                       std::to_string(i - 1) + ")");
    if (len > max_len)
      fail(ErrorKind::value, name,
           "sequence " + std::to_string(i - 1) + " has length " + std::to_string(len) + " > " + max_name + " (" +
               std::to_string(max_len) + ")");
  }
  if (at(n - 1) != total)
    fail(ErrorKind::value, name,
         "last entry (" + std::to_string(at(n - 1)) + ") must equal the number of tokens (" +
             std::to_string(total) + ")");
}

void fill_strides(const TensorView& t, bool varlen, std::int64_t& bs, std::int64_t& rs, std::int64_t& hs) {
  if (varlen) {
    bs = 0;
    rs = t.stride[0];
    hs = t.stride[1];
  } else {
    bs = t.stride[0];
    rs = t.stride[1];
    hs = t.stride[2];
  }
}

}  // namespace

ElemType to_elem_type(DType t) {
  switch (t) {
    case DType::f32: return ElemType::f32;
    case DType::f16: return ElemType::f16;
    case DType::bf16: return ElemType::bf16;
    case DType::e4m3: return ElemType::e4m3;
    default: break;
  }
  fail(ErrorKind::type, "q", std::string("dtype must be float16, bfloat16 or float32, got ") + dtype_name(t));
}

AttnParams make_shape_params(const TensorView& q, const TensorView& k, const TensorView& v,
                             const AttentionOptions& opts) {
  const Device dev = q.device;
  const bool varlen = opts.cu_seqlens_q.defined() || opts.cu_seqlens_k.defined();
  if (varlen && !(opts.cu_seqlens_q.defined() && opts.cu_seqlens_k.defined()))
    fail(ErrorKind::value, opts.cu_seqlens_q.defined() ? "cu_seqlens_k" : "cu_seqlens_q",
         "varlen needs both cu_seqlens_q and cu_seqlens_k");
  const int nd = varlen ? 3 : 4;
  check_tensor("q", q, nd, dev);
  check_tensor("k", k, nd, dev);
  check_tensor("v", v, nd, dev);

  if (q.dtype != DType::f16 && q.dtype != DType::bf16 && q.dtype != DType::f32)
    fail(ErrorKind::type, "q", std::string("dtype must be float16, bfloat16 or float32, got ") + dtype_name(q.dtype));
  if (q.dtype == DType::f32 && dev.kind == DeviceKind::cuda)
    fail(ErrorKind::type, "q", "float32 inputs are supported on the CPU only; use float16 or bfloat16 on CUDA");
  check_same_dtype("k", k, q.dtype);
  check_same_dtype("v", v, q.dtype);

  const int hd = nd - 1;  // head-dim axis
  const int ha = nd - 2;  // heads axis
  const std::int64_t d = q.shape[hd];
  const std::int64_t dv = v.shape[hd];
  if (k.shape[hd] != d)
    fail(ErrorKind::value, "k", "head dim must equal q's (" + std::to_string(d) + "), got " + std::to_string(k.shape[hd]));
  auto check_hdim = [&](const char* name, std::int64_t x) {
    if (x < 8 || x > 256 || x % 8 != 0)
      fail(ErrorKind::not_supported, name,
           "head dim must be a multiple of 8 in [8, 256], got " + std::to_string(x));
  };
  check_hdim("q", d);
  check_hdim("v", dv);

  const std::int64_t hq = q.shape[ha], hk = k.shape[ha];
  if (v.shape[ha] != hk)
    fail(ErrorKind::value, "v", "heads must equal k's (" + std::to_string(hk) + "), got " + std::to_string(v.shape[ha]));
  if (hq == 0 || hk == 0) fail(ErrorKind::value, hq == 0 ? "q" : "k", "number of heads must be positive");
  if (hq % hk != 0)
    fail(ErrorKind::value, "k",
         "GQA/MQA needs heads_q (" + std::to_string(hq) + ") to be a multiple of heads_kv (" + std::to_string(hk) + ")");

  if (opts.window_left < -1 || opts.window_right < -1)
    fail(ErrorKind::value, "window", "bounds must be >= 0, or -1 for unbounded; got (" +
                                         std::to_string(opts.window_left) + ", " + std::to_string(opts.window_right) + ")");
  if (opts.window_left > kMaxDim32 || opts.window_right > kMaxDim32)
    fail(ErrorKind::value, "window", "bounds must fit in int32");
  if (opts.causal && opts.window_right > 0)
    fail(ErrorKind::value, "window",
         "causal attention needs window_right of 0 or -1, got " + std::to_string(opts.window_right));
  if (!std::isfinite(opts.softcap) || opts.softcap < 0.f)
    fail(ErrorKind::value, "softcap", "must be finite and >= 0 (0 disables it)");
  if (opts.softmax_scale && !std::isfinite(*opts.softmax_scale))
    fail(ErrorKind::value, "softmax_scale", "must be finite");

  AttnParams p;
  p.q = q.data;
  p.k = k.data;
  p.v = v.data;
  p.dtype = to_elem_type(q.dtype);
  p.heads_q = int(hq);
  p.heads_kv = int(hk);
  p.gqa_ratio = int(hq / hk);
  p.head_dim = int(d);
  p.head_dim_v = int(dv);
  fill_strides(q, varlen, p.q_batch_stride, p.q_row_stride, p.q_head_stride);
  fill_strides(k, varlen, p.k_batch_stride, p.k_row_stride, p.k_head_stride);
  fill_strides(v, varlen, p.v_batch_stride, p.v_row_stride, p.v_head_stride);

  if (varlen) {
    const TensorView& cq = opts.cu_seqlens_q;
    const TensorView& ck = opts.cu_seqlens_k;
    check_tensor("cu_seqlens_q", cq, 1, dev);
    check_tensor("cu_seqlens_k", ck, 1, dev);
    if (cq.dtype != DType::i32) fail(ErrorKind::type, "cu_seqlens_q", std::string("dtype must be int32, got ") + dtype_name(cq.dtype));
    if (ck.dtype != DType::i32) fail(ErrorKind::type, "cu_seqlens_k", std::string("dtype must be int32, got ") + dtype_name(ck.dtype));
    if (cq.shape[0] < 1) fail(ErrorKind::value, "cu_seqlens_q", "must have batch + 1 >= 1 entries");
    if (ck.shape[0] != cq.shape[0])
      fail(ErrorKind::value, "cu_seqlens_k", "must have as many entries as cu_seqlens_q (" + std::to_string(cq.shape[0]) +
                                                 "), got " + std::to_string(ck.shape[0]));
    if (cq.shape[0] > 1 && (cq.stride[0] != 1 || ck.stride[0] != 1))
      fail(ErrorKind::value, cq.stride[0] != 1 ? "cu_seqlens_q" : "cu_seqlens_k", "must be contiguous");
    if (opts.max_seqlen_q < 0 || opts.max_seqlen_q > kMaxDim32)
      fail(ErrorKind::value, "max_seqlen_q", "must be in [0, 2^31), got " + std::to_string(opts.max_seqlen_q));
    if (opts.max_seqlen_k < 0 || opts.max_seqlen_k > kMaxDim32)
      fail(ErrorKind::value, "max_seqlen_k", "must be in [0, 2^31), got " + std::to_string(opts.max_seqlen_k));
    if (k.shape[0] != v.shape[0])
      fail(ErrorKind::value, "v", "total tokens must equal k's (" + std::to_string(k.shape[0]) + "), got " + std::to_string(v.shape[0]));
    if (dev.kind == DeviceKind::cpu) {
      check_cu_seqlens_content("cu_seqlens_q", cq, q.shape[0], opts.max_seqlen_q, "max_seqlen_q");
      check_cu_seqlens_content("cu_seqlens_k", ck, k.shape[0], opts.max_seqlen_k, "max_seqlen_k");
    }
    p.batch = int(cq.shape[0] - 1);
    p.seqlen_q = int(opts.max_seqlen_q);
    p.seqlen_k = int(opts.max_seqlen_k);
    p.total_q = q.shape[0];
    p.total_k = k.shape[0];
    p.cu_seqlens_q = static_cast<const std::int32_t*>(cq.data);
    p.cu_seqlens_k = static_cast<const std::int32_t*>(ck.data);
  } else {
    if (k.shape[0] != q.shape[0])
      fail(ErrorKind::value, "k", "batch must equal q's (" + std::to_string(q.shape[0]) + "), got " + std::to_string(k.shape[0]));
    if (v.shape[0] != q.shape[0])
      fail(ErrorKind::value, "v", "batch must equal q's (" + std::to_string(q.shape[0]) + "), got " + std::to_string(v.shape[0]));
    if (v.shape[1] != k.shape[1])
      fail(ErrorKind::value, "v", "seqlen must equal k's (" + std::to_string(k.shape[1]) + "), got " + std::to_string(v.shape[1]));
    p.batch = int(q.shape[0]);
    p.seqlen_q = int(q.shape[1]);
    p.seqlen_k = int(k.shape[1]);
    p.total_q = std::int64_t(p.batch) * p.seqlen_q;
    p.total_k = std::int64_t(p.batch) * p.seqlen_k;
  }

  p.scale = opts.softmax_scale ? *opts.softmax_scale : float(1.0 / std::sqrt(double(d)));
  p.scale_log2 = float(double(p.scale) * 1.4426950408889634);
  p.softcap = opts.softcap;
  p.causal = opts.causal;
  p.window_left = int(opts.window_left);
  p.window_right = opts.causal ? 0 : int(opts.window_right);
  p.deterministic = opts.deterministic;
  p.partial_keys = opts.partial_keys;
  return p;
}

namespace {

void check_out(const char* name, const TensorView& t, const TensorView& q, const AttnParams& p, bool varlen) {
  check_tensor(name, t, varlen ? 3 : 4, q.device);
  check_same_dtype(name, t, q.dtype);
  if (varlen)
    check_shape(name, t, {p.total_q, p.heads_q, p.head_dim_v});
  else
    check_shape(name, t, {p.batch, p.seqlen_q, p.heads_q, p.head_dim_v});
}

void check_lse(const TensorView& lse, const TensorView& q, AttnParams& p, bool varlen) {
  if (lse.dtype != DType::f32) fail(ErrorKind::type, "lse", std::string("dtype must be float32, got ") + dtype_name(lse.dtype));
  if (varlen) {
    check_tensor("lse", lse, 2, q.device);
    check_shape("lse", lse, {p.heads_q, p.total_q});
    p.lse_batch_stride = 0;
    p.lse_head_stride = lse.stride[0];
  } else {
    check_tensor("lse", lse, 3, q.device);
    check_shape("lse", lse, {p.batch, p.heads_q, p.seqlen_q});
    p.lse_batch_stride = lse.stride[0];
    p.lse_head_stride = lse.stride[1];
  }
  p.lse = static_cast<float*>(lse.data);
}

}  // namespace

AttnParams make_forward_params(const TensorView& q, const TensorView& k, const TensorView& v,
                               const TensorView& out, const TensorView& lse, const AttentionOptions& opts) {
  AttnParams p = make_shape_params(q, k, v, opts);
  const bool varlen = p.cu_seqlens_q != nullptr || opts.cu_seqlens_q.defined();
  check_out("out", out, q, p, varlen);
  fill_strides(out, varlen, p.o_batch_stride, p.o_row_stride, p.o_head_stride);
  p.o = out.data;
  if (lse.defined()) check_lse(lse, q, p, varlen);
  return p;
}

AttnParams make_backward_params(const TensorView& dout, const TensorView& q, const TensorView& k,
                                const TensorView& v, const TensorView& out, const TensorView& lse,
                                const TensorView& dq, const TensorView& dk, const TensorView& dv,
                                const AttentionOptions& opts) {
  if (!lse.defined()) fail(ErrorKind::value, "lse", "is required by backward (the forward's log-sum-exp)");
  AttnParams p = make_forward_params(q, k, v, out, lse, opts);
  const bool varlen = opts.cu_seqlens_q.defined();
  check_out("dout", dout, q, p, varlen);
  fill_strides(dout, varlen, p.do_batch_stride, p.do_row_stride, p.do_head_stride);
  p.dout = dout.data;
  auto check_grad = [&](const char* name, const TensorView& g, const TensorView& like) {
    check_tensor(name, g, like.ndim, q.device);
    check_same_dtype(name, g, q.dtype);
    bool same = true;
    for (int i = 0; i < like.ndim; ++i) same = same && g.shape[i] == like.shape[i];
    if (!same) fail(ErrorKind::value, name, "shape must match its input's " + shape_str(like) + ", got " + shape_str(g));
  };
  check_grad("dq", dq, q);
  check_grad("dk", dk, k);
  check_grad("dv", dv, v);
  fill_strides(dq, varlen, p.dq_batch_stride, p.dq_row_stride, p.dq_head_stride);
  fill_strides(dk, varlen, p.dk_batch_stride, p.dk_row_stride, p.dk_head_stride);
  fill_strides(dv, varlen, p.dv_batch_stride, p.dv_row_stride, p.dv_head_stride);
  p.dq = dq.data;
  p.dk = dk.data;
  p.dv = dv.data;
  return p;
}

}  // namespace detail
}  // namespace flashpp
