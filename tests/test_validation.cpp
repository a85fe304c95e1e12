// One test per rule of src/api/validate.cpp: the bad input raises
// flashpp::Error of the right kind, argument() names the argument, and the
// message "flashpp: <argument>: <rule>" carries the rule's key words.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <string>

#include "api/validate.hpp"
#include "flashpp/attention.hpp"
#include "support/attention_tensors.hpp"
#include "support/host_tensor.hpp"
#include "support/seed.hpp"

namespace flashpp::test {
namespace {

template <class F>
void expect_error(F&& call, ErrorKind kind, const std::string& argument, std::initializer_list<const char*> words) {
  try {
    call();
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_EQ(e.argument(), argument) << msg;
    EXPECT_EQ(int(e.kind()), int(kind)) << msg;
    EXPECT_EQ(msg.rfind("flashpp: " + argument + ": ", 0), 0u) << msg;
    for (const char* w : words) EXPECT_NE(msg.find(w), std::string::npos) << "no '" << w << "' in: " << msg;
    return;
  }
  ADD_FAILURE() << "expected flashpp::Error about '" << argument << "'";
}

// Invalid arguments are rejected before the workspace is looked at (where
// asking for its size throws, the call gets an empty one); valid ones get
// exactly the workspace the API asks for. Shared by the fixed and varlen problems.
void forward_in_asked_workspace(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& out,
                                const TensorView& lse, const AttentionOptions& opts) {
  std::size_t bytes = 0;
  try {
    bytes = forward_workspace_bytes(q, k, v, opts);
  } catch (const Error&) {
  }
  const HostWorkspace ws(bytes);
  forward(q, k, v, out, lse, opts, ws.get());
}

// A valid fixed-length fp16 problem on the CPU (GQA 4/2, head dims 16/24);
// each test breaks one thing about it.
struct Fixed {
  static constexpr std::int64_t B = 2, SQ = 5, SK = 7, HQ = 4, HK = 2, D = 16, DV = 24;
  HostTensor hq{DType::f16, {B, SQ, HQ, D}}, hk{DType::f16, {B, SK, HK, D}}, hv{DType::f16, {B, SK, HK, DV}},
      hout{DType::f16, {B, SQ, HQ, DV}}, hlse{DType::f32, {B, HQ, SQ}}, hdout{DType::f16, {B, SQ, HQ, DV}},
      hdq{DType::f16, {B, SQ, HQ, D}}, hdk{DType::f16, {B, SK, HK, D}}, hdv{DType::f16, {B, SK, HK, DV}};
  TensorView q, k, v, out, lse, dout, dq, dk, dv;
  AttentionOptions opts;

  Fixed() {
    auto rng = make_rng("Validation.Fixed");
    for (HostTensor* t : {&hq, &hk, &hv, &hdout}) t->fill_normal(rng);
    q = hq.view(), k = hk.view(), v = hv.view(), out = hout.view(), lse = hlse.view(), dout = hdout.view();
    dq = hdq.view(), dk = hdk.view(), dv = hdv.view();
  }
  void fwd() const { forward_in_asked_workspace(q, k, v, out, lse, opts); }
  // As forward_in_asked_workspace, for backward.
  void bwd() const {
    std::size_t bytes = 0;
    try {
      bytes = backward_workspace_bytes(q, k, v, opts);
    } catch (const Error&) {
    }
    const HostWorkspace ws(bytes);
    backward(dout, q, k, v, out, lse, dq, dk, dv, opts, ws.get());
  }
};

// A valid varlen fp16 problem: sequences of lengths (q, k) = (3, 4), (0, 2), (5, 5).
struct Varlen {
  static constexpr std::int64_t TQ = 8, TK = 11, HQ = 2, HK = 1, D = 32;
  HostTensor hq{DType::f16, {TQ, HQ, D}}, hk{DType::f16, {TK, HK, D}}, hv{DType::f16, {TK, HK, D}},
      hout{DType::f16, {TQ, HQ, D}}, hlse{DType::f32, {HQ, TQ}};
  HostTensor hcq = make_cu_seqlens({3, 0, 5}), hck = make_cu_seqlens({4, 2, 5});
  TensorView q, k, v, out, lse;
  AttentionOptions opts;

  Varlen() {
    auto rng = make_rng("Validation.Varlen");
    for (HostTensor* t : {&hq, &hk, &hv}) t->fill_normal(rng);
    q = hq.view(), k = hk.view(), v = hv.view(), out = hout.view(), lse = hlse.view();
    opts.cu_seqlens_q = hcq.view();
    opts.cu_seqlens_k = hck.view();
    opts.max_seqlen_q = 5;
    opts.max_seqlen_k = 5;
  }
  void fwd() const { forward_in_asked_workspace(q, k, v, out, lse, opts); }
  int32_t* cu_q() { return static_cast<int32_t*>(hcq.storage()); }
};

// Views on a CUDA device with fake (never dereferenced) 256-byte aligned
// pointers: validation must reject bad ones before touching any memory.
struct OnCuda {
  static constexpr std::int64_t B = 1, S = 16, H = 2, D = 64;
  TensorView q, k, v, out, lse;
  AttentionOptions opts;
  static void* fake(std::uintptr_t slot) { return reinterpret_cast<void*>((slot + 1) << 20); }
  explicit OnCuda(DType dt = DType::f16) {
    const Device dev = Device::cuda(0);
    q = TensorView::contiguous(fake(0), dt, {B, S, H, D}, dev);
    k = TensorView::contiguous(fake(1), dt, {B, S, H, D}, dev);
    v = TensorView::contiguous(fake(2), dt, {B, S, H, D}, dev);
    out = TensorView::contiguous(fake(3), dt, {B, S, H, D}, dev);
    lse = TensorView::contiguous(fake(4), DType::f32, {B, H, S}, dev);
  }
  AttnParams params() const { return detail::make_forward_params(q, k, v, out, lse, opts); }
};

// ---- a valid problem really runs ----

TEST(Validation, ValidProblemsRun) {
  Fixed f;
  EXPECT_NO_THROW(f.fwd());
  EXPECT_NO_THROW(f.bwd());
  Varlen vl;
  EXPECT_NO_THROW(vl.fwd());
  // Empty tensors may have null data.
  Fixed e;
  for (TensorView* t : {&e.q, &e.k, &e.v, &e.out, &e.lse, &e.dout, &e.dq, &e.dk, &e.dv}) {
    t->shape[0] = 0;
    t->data = nullptr;
  }
  EXPECT_NO_THROW(e.fwd());
  EXPECT_NO_THROW(e.bwd());
}

// ---- per-tensor rules (check_tensor) ----

TEST(Validation, MissingTensor) {
  Fixed f;
  f.q = TensorView{};
  expect_error([&] { f.fwd(); }, ErrorKind::value, "q", {"required"});
  Fixed g;
  g.out = TensorView{};
  expect_error([&] { g.fwd(); }, ErrorKind::value, "out", {"required"});
  Fixed h;
  h.dv = TensorView{};
  expect_error([&] { h.bwd(); }, ErrorKind::value, "dv", {"required"});
}

TEST(Validation, WrongRank) {
  Fixed f;
  f.k.ndim = 3;
  expect_error([&] { f.fwd(); }, ErrorKind::value, "k", {"must have 4 dims", "got 3"});
  Fixed g;
  g.q.ndim = 2;
  expect_error([&] { g.fwd(); }, ErrorKind::value, "q", {"must have 4 dims"});
}

TEST(Validation, NegativeSize) {
  Fixed f;
  f.v.shape[1] = -1;
  expect_error([&] { f.fwd(); }, ErrorKind::value, "v", {"non-negative"});
}

TEST(Validation, SizeBeyondInt32) {
  Fixed f;
  f.q.shape[1] = std::int64_t(1) << 31;
  expect_error([&] { f.fwd(); }, ErrorKind::value, "q", {"int32"});
}

// numel() must neither overflow nor depend on the order of the sizes: an
// empty view stays empty even when its other sizes multiply past int64.
TEST(Validation, NumelOfHugeAndEmptyViews) {
  const std::int64_t big = (std::int64_t(1) << 31) - 1;
  TensorView empty = TensorView::contiguous(nullptr, DType::f16, {big, big, big, 0});
  EXPECT_EQ(empty.numel(), 0);
  TensorView huge;
  huge.ndim = 4;
  huge.shape = {big, big, big, 3};
  EXPECT_EQ(huge.numel(), std::numeric_limits<std::int64_t>::max());
  EXPECT_EQ(TensorView::contiguous(nullptr, DType::f16, {2, 3, 4, 5}).numel(), 120);
}

TEST(Validation, NegativeStride) {
  Fixed f;
  f.k.stride[1] = -f.k.stride[1];
  expect_error([&] { f.fwd(); }, ErrorKind::value, "k", {"strides", "non-negative", "dim 1"});
}

TEST(Validation, LastDimNotContiguous) {
  Fixed f;
  f.q.stride[3] = 2;
  expect_error([&] { f.fwd(); }, ErrorKind::value, "q", {"last dim", "contiguous", "stride 2"});
  Fixed g;
  g.dq.stride[3] = 0;
  expect_error([&] { g.bwd(); }, ErrorKind::value, "dq", {"last dim", "contiguous"});
}

TEST(Validation, NullData) {
  Fixed f;
  f.v.data = nullptr;
  expect_error([&] { f.fwd(); }, ErrorKind::value, "v", {"null"});
  Fixed g;
  g.lse.data = nullptr;
  expect_error([&] { g.fwd(); }, ErrorKind::value, "lse", {"null"});
}

TEST(Validation, DeviceMismatch) {
  Fixed f;
  f.k.device = Device::cuda(0);
  expect_error([&] { f.fwd(); }, ErrorKind::type, "k", {"same device as q", "cpu", "cuda:0"});
  Fixed g;
  g.out.device = Device::cuda(1);
  expect_error([&] { g.fwd(); }, ErrorKind::type, "out", {"same device", "cuda:1"});
  Fixed h;
  h.dk.device = Device::cuda(0);
  expect_error([&] { h.bwd(); }, ErrorKind::type, "dk", {"same device"});
}

// ---- dtypes ----

TEST(Validation, DtypeMismatch) {
  Fixed f;
  f.v.dtype = DType::bf16;
  expect_error([&] { f.fwd(); }, ErrorKind::type, "v", {"dtype must match q", "float16", "bfloat16"});
  Fixed g;
  g.k.dtype = DType::f32;
  expect_error([&] { g.fwd(); }, ErrorKind::type, "k", {"dtype must match q"});
}

TEST(Validation, UnsupportedInputDtype) {
  for (DType dt : {DType::i32, DType::f64, DType::e4m3}) {
    Fixed f;
    f.q.dtype = f.k.dtype = f.v.dtype = f.out.dtype = dt;
    expect_error([&] { f.fwd(); }, ErrorKind::type, "q", {"float16, bfloat16 or float32", dtype_name(dt)});
  }
}

TEST(Validation, Float32OnCuda) {
  OnCuda c(DType::f32);
  expect_error([&] { forward(c.q, c.k, c.v, c.out, c.lse, c.opts); }, ErrorKind::type, "q", {"float32", "CPU only"});
}

// ---- head dims and heads ----

TEST(Validation, HeadDimNotMultipleOf8) {
  HostTensor q(DType::f16, {1, 3, 1, 12}), k(DType::f16, {1, 3, 1, 12}), v(DType::f16, {1, 3, 1, 16}),
      out(DType::f16, {1, 3, 1, 16});
  expect_error([&] { forward(q.view(), k.view(), v.view(), out.view(), TensorView{}); }, ErrorKind::not_supported, "q",
               {"multiple of 8", "[8, 256]", "got 12"});
}

TEST(Validation, HeadDimTooLarge) {
  HostTensor q(DType::f16, {1, 2, 1, 264}), k(DType::f16, {1, 2, 1, 264}), v(DType::f16, {1, 2, 1, 16}),
      out(DType::f16, {1, 2, 1, 16});
  expect_error([&] { forward(q.view(), k.view(), v.view(), out.view(), TensorView{}); }, ErrorKind::not_supported, "q",
               {"[8, 256]", "got 264"});
}

TEST(Validation, HeadDimZero) {
  Fixed f;
  f.q.shape[3] = f.k.shape[3] = 0;
  expect_error([&] { f.fwd(); }, ErrorKind::not_supported, "q", {"[8, 256]", "got 0"});
}

TEST(Validation, ValueHeadDimUnsupported) {
  Fixed f;
  f.v.shape[3] = f.out.shape[3] = 20;
  expect_error([&] { f.fwd(); }, ErrorKind::not_supported, "v", {"multiple of 8", "got 20"});
}

TEST(Validation, KeyHeadDimMismatch) {
  Fixed f;
  f.k.shape[3] = 8;
  expect_error([&] { f.fwd(); }, ErrorKind::value, "k", {"head dim must equal q's", "16", "got 8"});
}

TEST(Validation, ValueHeadsMismatch) {
  Fixed f;
  f.v.shape[2] = 1;
  expect_error([&] { f.fwd(); }, ErrorKind::value, "v", {"heads must equal k's", "got 1"});
}

TEST(Validation, ZeroHeads) {
  Fixed f;
  f.q.shape[2] = f.out.shape[2] = 0;
  expect_error([&] { f.fwd(); }, ErrorKind::value, "q", {"heads must be positive"});
  Fixed g;
  g.k.shape[2] = g.v.shape[2] = 0;
  expect_error([&] { g.fwd(); }, ErrorKind::value, "k", {"heads must be positive"});
}

TEST(Validation, GqaRatioNotInteger) {
  Fixed f;
  f.k.shape[2] = f.v.shape[2] = 3;  // 4 query heads over 3 kv heads
  expect_error([&] { f.fwd(); }, ErrorKind::value, "k", {"GQA", "multiple of heads_kv", "(3)"});
}

TEST(Validation, BatchMismatch) {
  Fixed f;
  f.k.shape[0] = 1;
  expect_error([&] { f.fwd(); }, ErrorKind::value, "k", {"batch must equal q's"});
  Fixed g;
  g.v.shape[0] = 1;
  expect_error([&] { g.fwd(); }, ErrorKind::value, "v", {"batch must equal q's"});
}

TEST(Validation, ValueSeqlenMismatch) {
  Fixed f;
  f.v.shape[1] = 6;
  expect_error([&] { f.fwd(); }, ErrorKind::value, "v", {"seqlen must equal k's", "got 6"});
}

// ---- options ----

TEST(Validation, WindowBelowMinusOne) {
  Fixed f;
  f.opts.window_left = -2;
  expect_error([&] { f.fwd(); }, ErrorKind::value, "window", {">= 0", "-1 for unbounded", "(-2, -1)"});
  Fixed g;
  g.opts.window_right = -5;
  expect_error([&] { g.fwd(); }, ErrorKind::value, "window", {">= 0", "(-1, -5)"});
}

TEST(Validation, WindowBeyondInt32) {
  Fixed f;
  f.opts.window_left = std::int64_t(1) << 32;
  expect_error([&] { f.fwd(); }, ErrorKind::value, "window", {"int32"});
}

TEST(Validation, CausalWithPositiveWindowRight) {
  Fixed f;
  f.opts.causal = true;
  f.opts.window_right = 3;
  expect_error([&] { f.fwd(); }, ErrorKind::value, "window", {"causal", "window_right", "got 3"});
  Fixed ok;  // 0 and -1 are both fine with causal
  ok.opts.causal = true;
  ok.opts.window_right = 0;
  EXPECT_NO_THROW(ok.fwd());
}

TEST(Validation, SoftcapNegativeOrNotFinite) {
  for (float cap : {-1.0f, std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    Fixed f;
    f.opts.softcap = cap;
    expect_error([&] { f.fwd(); }, ErrorKind::value, "softcap", {"finite", ">= 0"});
  }
}

TEST(Validation, SoftmaxScaleNotFinite) {
  for (float s : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                  -std::numeric_limits<float>::infinity()}) {
    Fixed f;
    f.opts.softmax_scale = s;
    expect_error([&] { f.fwd(); }, ErrorKind::value, "softmax_scale", {"finite"});
  }
}

// ---- varlen ----

TEST(Validation, VarlenNeedsBothCuSeqlens) {
  Varlen a;
  a.opts.cu_seqlens_k = TensorView{};
  expect_error([&] { a.fwd(); }, ErrorKind::value, "cu_seqlens_k", {"both cu_seqlens_q and cu_seqlens_k"});
  Varlen b;
  b.opts.cu_seqlens_q = TensorView{};
  expect_error([&] { b.fwd(); }, ErrorKind::value, "cu_seqlens_q", {"both"});
}

TEST(Validation, VarlenInputsAreThreeDimensional) {
  Fixed f;  // 4-d tensors with cu_seqlens given
  Varlen vl;
  f.opts.cu_seqlens_q = vl.opts.cu_seqlens_q;
  f.opts.cu_seqlens_k = vl.opts.cu_seqlens_k;
  expect_error([&] { f.fwd(); }, ErrorKind::value, "q", {"must have 3 dims", "got 4"});
}

TEST(Validation, CuSeqlensWrongDtype) {
  Varlen vl;
  HostTensor bad(DType::f32, {4});
  vl.opts.cu_seqlens_q = bad.view();
  expect_error([&] { vl.fwd(); }, ErrorKind::type, "cu_seqlens_q", {"int32", "float32"});
  Varlen v2;
  HostTensor bad64(DType::f64, {4});
  v2.opts.cu_seqlens_k = bad64.view();
  expect_error([&] { v2.fwd(); }, ErrorKind::type, "cu_seqlens_k", {"int32", "float64"});
}

TEST(Validation, CuSeqlensWrongRank) {
  Varlen vl;
  vl.opts.cu_seqlens_q.ndim = 2;
  vl.opts.cu_seqlens_q.shape[1] = 1;
  vl.opts.cu_seqlens_q.stride[1] = 1;
  expect_error([&] { vl.fwd(); }, ErrorKind::value, "cu_seqlens_q", {"must have 1 dims"});
}

TEST(Validation, CuSeqlensEmpty) {
  Varlen vl;
  vl.opts.cu_seqlens_q.shape[0] = 0;
  expect_error([&] { vl.fwd(); }, ErrorKind::value, "cu_seqlens_q", {"batch + 1 >= 1"});
}

TEST(Validation, CuSeqlensSizeMismatch) {
  Varlen vl;
  HostTensor ck = make_cu_seqlens({4, 7});  // 3 entries vs cu_seqlens_q's 4
  vl.opts.cu_seqlens_k = ck.view();
  expect_error([&] { vl.fwd(); }, ErrorKind::value, "cu_seqlens_k", {"as many entries as cu_seqlens_q", "(4)", "got 3"});
}

TEST(Validation, CuSeqlensNotContiguous) {
  Varlen vl;
  HostTensor spread(DType::i32, {8});
  for (int i = 0; i < 8; ++i) spread.set(i, 0);
  TensorView cq = spread.view();
  cq.shape[0] = 4;
  cq.stride[0] = 2;
  vl.opts.cu_seqlens_q = cq;
  // A 1-d view with stride 2 fails the last-dim rule first; both name the argument.
  expect_error([&] { vl.fwd(); }, ErrorKind::value, "cu_seqlens_q", {"contiguous"});
}

TEST(Validation, MaxSeqlenOutOfRange) {
  Varlen a;
  a.opts.max_seqlen_q = -1;
  expect_error([&] { a.fwd(); }, ErrorKind::value, "max_seqlen_q", {"[0, 2^31)", "got -1"});
  Varlen b;
  b.opts.max_seqlen_k = std::int64_t(1) << 31;
  expect_error([&] { b.fwd(); }, ErrorKind::value, "max_seqlen_k", {"[0, 2^31)"});
}

TEST(Validation, VarlenValueTokensMismatch) {
  Varlen vl;
  vl.v.shape[0] = 10;
  expect_error([&] { vl.fwd(); }, ErrorKind::value, "v", {"total tokens must equal k's", "(11)", "got 10"});
}

TEST(Validation, CuSeqlensMustStartAtZero) {
  Varlen vl;
  vl.cu_q()[0] = 1;
  expect_error([&] { vl.fwd(); }, ErrorKind::value, "cu_seqlens_q", {"start at 0", "got 1"});
}

TEST(Validation, CuSeqlensMustBeNonDecreasing) {
  Varlen vl;
  vl.cu_q()[2] = 2;  // 0, 3, 2, 8
  expect_error([&] { vl.fwd(); }, ErrorKind::value, "cu_seqlens_q", {"non-decreasing", "entry 2 < entry 1"});
}

TEST(Validation, SequenceLongerThanMaxSeqlen) {
  Varlen vl;
  vl.opts.max_seqlen_q = 4;  // the third sequence has 5 queries
  expect_error([&] { vl.fwd(); }, ErrorKind::value, "cu_seqlens_q",
               {"sequence 2", "length 5", "> max_seqlen_q (4)"});
  Varlen v2;
  v2.opts.max_seqlen_k = 3;
  expect_error([&] { v2.fwd(); }, ErrorKind::value, "cu_seqlens_k", {"sequence 0", "length 4", "max_seqlen_k (3)"});
}

TEST(Validation, CuSeqlensLastEntryMustEqualTokens) {
  Varlen vl;
  vl.cu_q()[3] = 7;  // q has 8 tokens
  expect_error([&] { vl.fwd(); }, ErrorKind::value, "cu_seqlens_q", {"last entry (7)", "number of tokens (8)"});
}

TEST(Validation, CuSeqlensOnAnotherDevice) {
  Varlen vl;
  vl.opts.cu_seqlens_k.device = Device::cuda(0);
  expect_error([&] { vl.fwd(); }, ErrorKind::type, "cu_seqlens_k", {"same device as q"});
}

// ---- outputs ----

TEST(Validation, OutWrongShape) {
  Fixed f;
  f.out.shape[3] = Fixed::D;  // must be head_dim_v (24)
  expect_error([&] { f.fwd(); }, ErrorKind::value, "out", {"shape must be (2, 5, 4, 24)", "got (2, 5, 4, 16)"});
  Varlen vl;
  vl.out.shape[0] = 7;
  expect_error([&] { vl.fwd(); }, ErrorKind::value, "out", {"shape must be (8, 2, 32)"});
}

TEST(Validation, OutWrongDtype) {
  Fixed f;
  f.out.dtype = DType::f32;
  expect_error([&] { f.fwd(); }, ErrorKind::type, "out", {"dtype must match q", "float32"});
}

TEST(Validation, LseWrongDtype) {
  Fixed f;
  f.lse.dtype = DType::f16;
  expect_error([&] { f.fwd(); }, ErrorKind::type, "lse", {"dtype must be float32", "float16"});
}

TEST(Validation, LseWrongShape) {
  Fixed f;
  f.lse.shape[2] = 4;
  expect_error([&] { f.fwd(); }, ErrorKind::value, "lse", {"shape must be (2, 4, 5)", "got (2, 4, 4)"});
  Fixed g;
  g.lse.ndim = 2;
  expect_error([&] { g.fwd(); }, ErrorKind::value, "lse", {"must have 3 dims"});
  Varlen vl;  // varlen LSE is (heads, total_q)
  HostTensor l3(DType::f32, {3, 2, 5});
  vl.lse = l3.view();
  expect_error([&] { vl.fwd(); }, ErrorKind::value, "lse", {"must have 2 dims"});
  Varlen v2;
  v2.lse.shape[1] = 9;
  expect_error([&] { v2.fwd(); }, ErrorKind::value, "lse", {"shape must be (2, 8)"});
}

TEST(Validation, BackwardNeedsLse) {
  Fixed f;
  f.lse = TensorView{};
  expect_error([&] { f.bwd(); }, ErrorKind::value, "lse", {"required by backward"});
}

TEST(Validation, DoutWrongShape) {
  Fixed f;
  f.dout.shape[1] = 4;
  expect_error([&] { f.bwd(); }, ErrorKind::value, "dout", {"shape must be (2, 5, 4, 24)"});
}

TEST(Validation, GradientWrongShape) {
  Fixed f;
  f.dq.shape[2] = 2;
  expect_error([&] { f.bwd(); }, ErrorKind::value, "dq", {"shape must match its input's", "(2, 5, 4, 16)"});
  Fixed g;
  g.dk.shape[1] = 8;
  expect_error([&] { g.bwd(); }, ErrorKind::value, "dk", {"shape must match"});
  Fixed h;
  h.dv.shape[3] = 16;
  expect_error([&] { h.bwd(); }, ErrorKind::value, "dv", {"shape must match", "(2, 7, 2, 24)"});
}

TEST(Validation, GradientWrongDtype) {
  Fixed f;
  f.dk.dtype = DType::bf16;
  expect_error([&] { f.bwd(); }, ErrorKind::type, "dk", {"dtype must match q"});
}

// ---- CUDA views: validated without touching memory ----

TEST(Validation, CudaMisalignedPointer) {
  OnCuda c;
  c.q.data = static_cast<char*>(c.q.data) + 1;  // odd address
  expect_error([&] { forward(c.q, c.k, c.v, c.out, c.lse, c.opts); }, ErrorKind::value, "q", {"16-byte aligned"});
  OnCuda d;
  d.v.data = static_cast<char*>(d.v.data) + 8;
  expect_error([&] { forward(d.q, d.k, d.v, d.out, d.lse, d.opts); }, ErrorKind::value, "v", {"16-byte aligned"});
}

TEST(Validation, CudaRowStrideNotMultipleOf16Bytes) {
  OnCuda c;
  c.k.stride[1] = c.k.stride[1] + 4;  // 8 bytes of padding per row
  c.k.stride[0] = c.k.stride[1] * OnCuda::S;
  expect_error([&] { forward(c.q, c.k, c.v, c.out, c.lse, c.opts); }, ErrorKind::value, "k",
               {"stride of dim 1", "multiple of 16 bytes"});
}

TEST(Validation, CudaVarlenIsValidatedWithoutReadingDeviceMemory) {
  // cu_seqlens live on the device: their contents are the kernels' to trust,
  // so validation must accept these views without dereferencing anything.
  OnCuda c;
  const Device dev = Device::cuda(0);
  c.q = TensorView::contiguous(OnCuda::fake(0), DType::bf16, {40, 2, 64}, dev);
  c.k = TensorView::contiguous(OnCuda::fake(1), DType::bf16, {50, 2, 64}, dev);
  c.v = TensorView::contiguous(OnCuda::fake(2), DType::bf16, {50, 2, 64}, dev);
  c.out = TensorView::contiguous(OnCuda::fake(3), DType::bf16, {40, 2, 64}, dev);
  c.lse = TensorView::contiguous(OnCuda::fake(4), DType::f32, {2, 40}, dev);
  c.opts.cu_seqlens_q = TensorView::contiguous(OnCuda::fake(5), DType::i32, {4}, dev);
  c.opts.cu_seqlens_k = TensorView::contiguous(OnCuda::fake(6), DType::i32, {4}, dev);
  c.opts.max_seqlen_q = 40;
  c.opts.max_seqlen_k = 50;
  AttnParams p;
  EXPECT_NO_THROW(p = c.params());
  EXPECT_EQ(p.batch, 3);
  EXPECT_EQ(p.total_q, 40);
  EXPECT_EQ(p.cu_seqlens_q, OnCuda::fake(5));
}

TEST(Validation, CudaTensorsWithoutCudaBuild) {
  if (built_with_cuda())
    GTEST_SKIP() << "this build has the CUDA backend; fake CUDA pointers would reach real kernels";
  OnCuda c;
  ASSERT_NO_THROW(c.params()) << "the problem itself is valid";
  expect_error([&] { forward(c.q, c.k, c.v, c.out, c.lse, c.opts); }, ErrorKind::not_supported, "q",
               {"built without CUDA"});
  expect_error([&] { forward_workspace_bytes(c.q, c.k, c.v, c.opts); }, ErrorKind::not_supported, "q",
               {"without CUDA"});
  const Selection s = select_forward(c.q, c.k, c.v, c.opts);
  EXPECT_FALSE(s.ok);
  EXPECT_NE(s.reason.find("without CUDA"), std::string::npos) << s.reason;
  EXPECT_FALSE(select_backward(c.q, c.k, c.v, c.opts).ok);
}

// ---- selection ----

TEST(Validation, SelectReportsCpuAndRejectsInvalid) {
  Fixed f;
  const Selection s = select_forward(f.q, f.k, f.v, f.opts);
  EXPECT_TRUE(s.ok);
  EXPECT_EQ(s.backend, "cpu");
  EXPECT_TRUE(s.reason.empty());
  EXPECT_TRUE(select_backward(f.q, f.k, f.v, f.opts).ok);
  f.k.shape[3] = 8;
  expect_error([&] { select_forward(f.q, f.k, f.v, f.opts); }, ErrorKind::value, "k", {"head dim"});
  expect_error([&] { forward_workspace_bytes(f.q, f.k, f.v, f.opts); }, ErrorKind::value, "k", {"head dim"});
}

}  // namespace
}  // namespace flashpp::test
