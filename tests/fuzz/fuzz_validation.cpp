// libFuzzer target for argument validation and the CPU backend behind it.
//
// The input bytes decode into the arguments of one forward/backward call:
// shapes, strides, dtypes, devices, options and cu_seqlens contents, mostly
// near a valid problem and sometimes broken in one or more ways. Every CPU
// tensor gets a heap buffer of exactly the bytes its view addresses, so
// AddressSanitizer reports any access outside the views, by validation or by
// the CPU backend. CUDA views carry fake pointers that must never be touched:
// with any CUDA view present only validation and select_*() run, never a
// kernel. flashpp::Error is the one expected exception; anything else, a
// crash, a sanitizer report or a broken invariant (checked with trap()) is a
// finding.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "api/validate.hpp"
#include "common/half.hpp"
#include "flashpp/attention.hpp"

namespace {

using namespace flashpp;

// Reads the fuzz input front to back; zeros once it runs out.
class Bytes {
 public:
  Bytes(const std::uint8_t* p, std::size_t n) : p_(p), n_(n) {}
  std::uint8_t u8() { return i_ < n_ ? p_[i_++] : 0; }
  std::uint32_t u32() {
    std::uint32_t x = 0;
    for (int k = 0; k < 4; ++k) x = x << 8 | u8();
    return x;
  }
  // Index in [0, n).
  int pick(int n) { return int(u8() % unsigned(n)); }
  // True with probability about 1 / n.
  bool rarely(int n) { return pick(n) == 0; }

 private:
  const std::uint8_t* p_;
  std::size_t n_, i_ = 0;
};

// Deterministic fill values (libFuzzer replays must behave identically).
class Prng {
 public:
  explicit Prng(std::uint32_t seed) : s_(seed * 2654435761u + 1) {}
  std::uint32_t next() {
    s_ ^= s_ << 13;
    s_ ^= s_ >> 17;
    s_ ^= s_ << 5;
    return s_;
  }
  float uniform(float lo, float hi) { return lo + (hi - lo) * float(next() >> 8) * (1.0f / 16777216.0f); }

 private:
  std::uint32_t s_;
};

[[noreturn]] void trap() { __builtin_trap(); }

// ---- tensors with exactly sized buffers ----

struct Arg {
  TensorView view;
  std::unique_ptr<std::byte[]> buffer;  // exactly the addressed bytes (CPU views)
};

// Sanity limit on one tensor's addressed elements (keeps runs fast; views
// beyond it get no buffer and a null pointer, which validation must reject).
constexpr std::int64_t kMaxElems = std::int64_t(1) << 20;

constexpr std::int64_t kNotABox = -1;  // a negative size or stride
constexpr std::int64_t kTooLarge = -2;  // addresses more than kMaxElems

// Elements from element 0 to the last addressed element (0 when empty).
std::int64_t addressed_span(const TensorView& t) {
  bool empty = t.ndim == 0;
  for (int i = 0; i < t.ndim; ++i) {
    if (t.shape[i] < 0 || t.stride[i] < 0) return kNotABox;
    empty = empty || t.shape[i] == 0;
  }
  if (empty) return 0;  // (not numel(): the product of huge sizes overflows)
  std::int64_t span = 1;
  for (int i = 0; i < t.ndim; ++i) {
    const std::int64_t ext = t.shape[i] - 1;
    if (ext > 0 && (t.shape[i] > kMaxElems || t.stride[i] > (kMaxElems - span) / ext)) return kTooLarge;
    span += ext * t.stride[i];
  }
  return span;
}

void fill(Arg& a, Bytes& in, Prng& rng, float magnitude) {
  const std::int64_t span = addressed_span(a.view);
  if (span <= 0 || !a.buffer) return;
  const std::size_t es = dtype_size(a.view.dtype);
  const bool raw_bits = in.rarely(24);  // NaN, Inf, denormals, anything
  for (std::int64_t i = 0; i < span; ++i) {
    std::byte* dst = a.buffer.get() + std::size_t(i) * es;
    const float x = rng.uniform(-magnitude, magnitude);
    switch (a.view.dtype) {
      case DType::f32: {
        const std::uint32_t bits = raw_bits ? rng.next() : float_to_bits(x);
        std::memcpy(dst, &bits, 4);
        break;
      }
      case DType::f16: {
        const std::uint16_t h = raw_bits ? std::uint16_t(rng.next()) : float_to_fp16(x);
        std::memcpy(dst, &h, 2);
        break;
      }
      case DType::bf16: {
        const std::uint16_t h = raw_bits ? std::uint16_t(rng.next()) : float_to_bf16(x);
        std::memcpy(dst, &h, 2);
        break;
      }
      default:
        for (std::size_t b = 0; b < es; ++b) dst[b] = std::byte(rng.next());
        break;
    }
  }
}

// Poisons every addressed element of a float output with NaN bits.
void poison(Arg& a) {
  const std::int64_t span = addressed_span(a.view);
  if (span <= 0 || !a.buffer) return;
  std::memset(a.buffer.get(), 0xff, std::size_t(span) * dtype_size(a.view.dtype));
}

// True when some element inside the view still holds the poison pattern.
bool has_poison(const Arg& a) {
  const TensorView& t = a.view;
  if (!a.buffer || t.numel() == 0) return false;
  const std::size_t es = dtype_size(t.dtype);
  std::int64_t idx[kMaxDims] = {};
  for (std::int64_t n = 0; n < t.numel(); ++n) {
    std::int64_t off = 0;
    for (int d = 0; d < t.ndim; ++d) off += idx[d] * t.stride[d];
    bool all_ff = true;
    for (std::size_t b = 0; b < es; ++b) all_ff = all_ff && a.buffer[std::size_t(off) * es + b] == std::byte{0xff};
    if (all_ff) return true;
    for (int d = t.ndim - 1; d >= 0; --d) {
      if (++idx[d] < t.shape[d]) break;
      idx[d] = 0;
    }
  }
  return false;
}

// True when every addressed element of a float view is finite.
bool all_finite(const Arg& a) {
  if (!a.buffer) return true;
  const std::int64_t span = addressed_span(a.view);
  const std::size_t es = dtype_size(a.view.dtype);
  for (std::int64_t i = 0; i < span; ++i) {
    float x = 0;
    const std::byte* src = a.buffer.get() + std::size_t(i) * es;
    if (a.view.dtype == DType::f32) {
      std::memcpy(&x, src, 4);
    } else {
      std::uint16_t h;
      std::memcpy(&h, src, 2);
      x = a.view.dtype == DType::f16 ? fp16_to_float(h) : bf16_to_float(h);
    }
    if (!std::isfinite(x)) return false;
  }
  return true;
}

struct Decoder {
  Bytes& in;
  Prng& rng;
  bool any_cuda = false;
  std::uintptr_t next_fake = 1;

  std::int64_t mutate_size(std::int64_t want) {
    switch (in.pick(8)) {
      case 0: return -1;
      case 1: return 0;
      case 2: return want + 1;
      case 3: return want > 0 ? want - 1 : 1;
      case 4: return in.rarely(2) ? std::int64_t(0x7fffffff) : std::int64_t(1) << (31 + in.pick(3));
      case 5: return in.pick(300);
      default: return in.pick(40);
    }
  }
  DType dtype(DType want) {
    if (!in.rarely(20)) return want;
    return DType(in.pick(7));  // includes one value past the last enumerator
  }

  // A view of `want` shape (ndim = want.size()) with dtype `dt`, usually
  // valid; strides from a padded (sometimes permuted) box, sometimes raw.
  Arg tensor(const std::vector<std::int64_t>& want, DType dt, bool required = true) {
    Arg a;
    TensorView& t = a.view;
    if (!required && in.rarely(2)) return a;  // optional and not given
    if (in.rarely(48)) return a;              // missing
    t.ndim = in.rarely(24) ? in.pick(kMaxDims + 1) : int(want.size());
    if (t.ndim == 0) return a;
    for (int i = 0; i < t.ndim; ++i) {
      const std::int64_t w = i < int(want.size()) ? want[std::size_t(i)] : 1;
      t.shape[i] = in.rarely(24) ? mutate_size(w) : w;
    }
    t.dtype = dtype(dt);
    // Storage order: logical, or a rotation of the leading dims.
    int order[kMaxDims];
    const int rot = t.ndim > 2 && in.rarely(3) ? 1 + in.pick(t.ndim - 1) : 0;
    for (int i = 0; i < t.ndim - 1; ++i) order[i] = (i + rot) % (t.ndim - 1);
    order[t.ndim - 1] = t.ndim - 1;
    std::int64_t st = 1;
    for (int k = t.ndim - 1; k >= 0; --k) {
      const int d = order[k];
      t.stride[d] = st;
      const std::int64_t ext = t.shape[d] > 0 ? t.shape[d] : 1;
      const std::int64_t pad = in.rarely(4) ? in.pick(9) : 0;
      if (ext < kMaxElems && st < kMaxElems) st *= ext + pad;
    }
    if (in.rarely(16)) {
      const std::int64_t raw[] = {0, 1, 2, 3, -1, -8, 7, std::int64_t(1) << 40};
      t.stride[in.pick(t.ndim)] = raw[in.pick(8)];
    }
    t.device = in.rarely(40) ? Device::cuda(in.pick(2)) : Device::cpu();
    if (t.device.kind == DeviceKind::cuda) {
      any_cuda = true;
      // Fake, 256-byte aligned, occasionally misaligned; never dereferenced.
      std::uintptr_t addr = (next_fake++) << 24;
      if (in.rarely(4)) addr += std::uintptr_t(in.pick(16));
      t.data = reinterpret_cast<void*>(addr);
      return a;
    }
    const std::int64_t span = addressed_span(t);
    const std::size_t es = dtype_size(t.dtype);
    if (span > 0 && es > 0) {
      a.buffer.reset(new std::byte[std::size_t(span) * es]);
      t.data = a.buffer.get();
    } else if (span == 0) {
      // Empty: null or a dangling-but-unused pointer are both legal.
      t.data = in.rarely(2) ? nullptr : reinterpret_cast<void*>(std::uintptr_t(64));
    } else if (span == kTooLarge || es == 0) {
      // Possibly valid but too big to allocate here (or a dtype of no size):
      // a null pointer, which validation rejects for non-empty views.
      t.data = nullptr;
    } else {
      // Negative sizes or strides: a 1-byte buffer; validation must reject
      // the view before anything reads through it (ASan reports it otherwise).
      a.buffer.reset(new std::byte[1]);
      t.data = a.buffer.get();
    }
    if (in.rarely(48)) t.data = nullptr;
    return a;
  }
};

std::int64_t pick_window(Bytes& in) {
  const std::int64_t w[] = {-1, -1, -1, 0, 1, 2, 5, 17, -2, -100, std::int64_t(1) << 31, std::int64_t(1) << 40};
  return w[in.pick(12)];
}

float pick_float(Bytes& in, const std::vector<float>& xs) { return xs[std::size_t(in.pick(int(xs.size())))]; }

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// Exactly sized, 64-byte aligned (the CPU contract) workspace.
struct FuzzWorkspace {
  void* data = nullptr;
  std::size_t bytes = 0;
  explicit FuzzWorkspace(std::size_t n) : bytes(n) {
    if (n > 0) data = ::operator new(n, std::align_val_t(64));
  }
  ~FuzzWorkspace() {
    if (data) ::operator delete(data, std::align_val_t(64));
  }
};

// Runs call(workspace) with exactly the requested workspace, and checks that
// a too-small one is refused with an Error naming "workspace".
template <class Size, class Call>
bool run_with_workspace(Bytes& in, Size&& size, Call&& call) {
  const std::size_t need = size();
  if (need > (std::size_t(1) << 28)) trap();  // absurd scratch for tiny problems
  if (need > 0 && in.rarely(6)) {
    FuzzWorkspace small(need - 1);
    try {
      call(Workspace{small.data, small.bytes});
      trap();  // accepted less than it asked for
    } catch (const Error& e) {
      if (e.argument() != "workspace") throw;
    }
  }
  FuzzWorkspace ws(need);
  call(Workspace{ws.data, ws.bytes});
  return true;
}

void check_error(const Error& e) {
  const std::string what = e.what();
  if (e.argument().empty() || what.rfind("flashpp: " + e.argument() + ": ", 0) != 0) trap();
}

void one_input(Bytes& in) {
  Prng rng(in.u32());
  Decoder dec{in, rng};

  const bool varlen = in.rarely(3);
  const DType dt = DType(in.pick(3));  // f32, f16, bf16
  const std::int64_t hk = 1 + in.pick(3);
  std::int64_t hq = hk * (1 + in.pick(2));
  if (in.rarely(16)) hq = 1 + in.pick(6);
  const std::int64_t dims[] = {8, 16, 24, 32, 40, 64, 128, 256};
  const std::int64_t d = in.rarely(16) ? in.pick(300) : dims[in.pick(6)];
  const std::int64_t dv = in.rarely(3) ? dims[in.pick(8)] : d;

  AttentionOptions opts;
  opts.causal = in.rarely(2);
  if (in.rarely(2)) opts.window_left = pick_window(in);
  if (in.rarely(2)) opts.window_right = pick_window(in);
  if (in.rarely(3)) opts.softcap = pick_float(in, {0.5f, 5.f, 30.f, -1.f, kNaN, kInf, 1e-30f, 1e30f});
  if (in.rarely(3)) opts.softmax_scale = pick_float(in, {0.1f, 1.f, 0.f, -1.f, 1e-30f, 1e30f, kNaN, kInf});
  opts.deterministic = in.rarely(2);
  const bool sane = std::isfinite(opts.softcap) && opts.softcap < 1e3f &&
                    (!opts.softmax_scale || std::abs(*opts.softmax_scale) < 1e3f);

  // Sequence structure.
  std::int64_t b = in.pick(4), sq = in.pick(21), sk = in.pick(21);
  Arg cu_q, cu_k;
  std::int64_t tq = 0, tk = 0;
  if (varlen) {
    const int nb = in.pick(5);
    std::vector<std::int32_t> lq(std::size_t(nb) + 1, 0), lk(std::size_t(nb) + 1, 0);
    std::int64_t mq = 0, mk = 0;
    for (int i = 0; i < nb; ++i) {
      const int a = in.rarely(3) ? 0 : in.pick(16), c = in.rarely(3) ? 0 : in.pick(16);
      lq[std::size_t(i) + 1] = lq[std::size_t(i)] + a;
      lk[std::size_t(i) + 1] = lk[std::size_t(i)] + c;
      mq = std::max<std::int64_t>(mq, a);
      mk = std::max<std::int64_t>(mk, c);
    }
    tq = lq.back();
    tk = lk.back();
    if (in.rarely(12)) lq[std::size_t(in.pick(nb + 1))] += in.pick(5) - 2;  // break the prefix sums
    if (in.rarely(12)) lk[std::size_t(in.pick(nb + 1))] = std::int32_t(in.u32());
    opts.max_seqlen_q = in.rarely(12) ? dec.mutate_size(mq) : mq + in.pick(3);
    opts.max_seqlen_k = in.rarely(12) ? dec.mutate_size(mk) : mk + in.pick(3);
    cu_q = dec.tensor({nb + 1}, DType::i32, !in.rarely(24));
    cu_k = dec.tensor({in.rarely(24) ? nb : nb + 1}, DType::i32, !in.rarely(24));
    for (Arg* c : {&cu_q, &cu_k}) {
      // Random bytes everywhere, then the prefix sums at the positions the
      // view addresses (entry i lives at i * stride).
      fill(*c, in, rng, 1.f);
      const auto& src = c == &cu_q ? lq : lk;
      if (!c->buffer || addressed_span(c->view) <= 0 || c->view.dtype != DType::i32 || c->view.ndim != 1) continue;
      for (std::int64_t i = 0; i < c->view.shape[0] && std::size_t(i) < src.size(); ++i)
        std::memcpy(c->buffer.get() + std::size_t(i * c->view.stride[0]) * 4, &src[std::size_t(i)], 4);
    }
    opts.cu_seqlens_q = cu_q.view;
    opts.cu_seqlens_k = cu_k.view;
  }

  using V = std::vector<std::int64_t>;
  const V qs = varlen ? V{tq, hq, d} : V{b, sq, hq, d};
  const V ks = varlen ? V{tk, hk, d} : V{b, sk, hk, d};
  const V vs = varlen ? V{tk, hk, dv} : V{b, sk, hk, dv};
  const V os = varlen ? V{tq, hq, dv} : V{b, sq, hq, dv};
  const V ls = varlen ? V{hq, tq} : V{b, hq, sq};
  Arg q = dec.tensor(qs, dt), k = dec.tensor(ks, dt), v = dec.tensor(vs, dt);
  Arg out = dec.tensor(os, dt), lse = dec.tensor(ls, DType::f32, /*required=*/false);
  const float magnitude = in.rarely(8) ? 100.f : 2.f;
  for (Arg* a : {&q, &k, &v}) fill(*a, in, rng, magnitude);

  const int mode = in.pick(4);  // 0: forward, 1: forward + backward, 2: sizes, 3: backward on given lse
  Arg dout, dq, dk, dvv;
  if (mode == 1 || mode == 3) {
    dout = dec.tensor(os, dt);
    dq = dec.tensor(qs, dt);
    dk = dec.tensor(ks, dt);
    dvv = dec.tensor(vs, dt);
    fill(dout, in, rng, 2.f);
  }

  try {
    if (dec.any_cuda) {
      // Validation only: these views have fake pointers.
      (void)select_forward(q.view, k.view, v.view, opts);
      (void)select_backward(q.view, k.view, v.view, opts);
      (void)detail::make_forward_params(q.view, k.view, v.view, out.view, lse.view, opts);
      (void)detail::make_backward_params(dout.view, q.view, k.view, v.view, out.view, lse.view, dq.view, dk.view,
                                         dvv.view, opts);
      return;
    }
    if (mode == 2) {
      (void)forward_workspace_bytes(q.view, k.view, v.view, opts);
      (void)backward_workspace_bytes(q.view, k.view, v.view, opts);
      const Selection s = select_forward(q.view, k.view, v.view, opts);
      if (!s.ok || s.backend != "cpu") trap();
      return;
    }
    if (mode == 3) fill(lse, in, rng, 8.f);  // arbitrary LSE values
    poison(out);
    if (mode != 3) {
      run_with_workspace(
          in, [&] { return forward_workspace_bytes(q.view, k.view, v.view, opts); },
          [&](Workspace ws) { forward(q.view, k.view, v.view, out.view, lse.view, opts, ws); });
      // With finite inputs and moderate options every output element is
      // written with a number: poison left in the view means a skipped write.
      if (sane && magnitude < 10.f && all_finite(q) && all_finite(k) && all_finite(v) && has_poison(out)) trap();
    }
    if (mode == 1 || mode == 3) {
      for (Arg* g : {&dq, &dk, &dvv}) poison(*g);
      run_with_workspace(
          in, [&] { return backward_workspace_bytes(q.view, k.view, v.view, opts); },
          [&](Workspace ws) {
            backward(dout.view, q.view, k.view, v.view, out.view, lse.view, dq.view, dk.view, dvv.view, opts, ws);
          });
    }
  } catch (const Error& e) {
    check_error(e);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Bytes in(data, size);
  one_input(in);
  return 0;
}
