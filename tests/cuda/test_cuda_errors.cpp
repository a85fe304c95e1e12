// Bad arguments on CUDA tensors raise flashpp::Error naming the argument, before
// any kernel runs; select() explains what runs.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "flashpp/attention.hpp"
#include "gpu_support.hpp"

namespace flashpp::test::gpu {
namespace {

struct Tensors {
  static constexpr std::int64_t B = 1, S = 64, H = 2, D = 64;
  DeviceBuffer q{B * S * H * D * 2 + 64}, k{B * S * H * D * 2}, v{B * S * H * D * 2}, o{B * S * H * D * 2};
  DeviceBuffer lse{B * H * S * 4};
  Device gpu = Device::cuda(0);
  TensorView view(const DeviceBuffer& b, DType dt = DType::bf16) const {
    return TensorView::contiguous(b.get(), dt, {B, S, H, D}, gpu);
  }
  TensorView lse_view() const { return TensorView::contiguous(lse.get(), DType::f32, {B, H, S}, gpu); }
};

template <class F>
void expect_error(F&& f, const std::string& argument, ErrorKind kind) {
  try {
    f();
    ADD_FAILURE() << "expected flashpp::Error about " << argument;
  } catch (const Error& e) {
    EXPECT_EQ(e.argument(), argument) << e.what();
    EXPECT_EQ(int(e.kind()), int(kind)) << e.what();
  }
}

TEST(CudaErrors, MisalignedPointer) {
  FLASHPP_REQUIRE_GPU();
  Tensors t;
  TensorView q = t.view(t.q);
  q.data = static_cast<char*>(q.data) + 2;
  expect_error([&] { forward(q, t.view(t.k), t.view(t.v), t.view(t.o), t.lse_view()); }, "q", ErrorKind::value);
}

TEST(CudaErrors, RowStrideNotMultipleOf16Bytes) {
  FLASHPP_REQUIRE_GPU();
  Tensors t;
  // row stride of 140 elements = 280 bytes: rows would start off a 16-byte boundary
  const TensorView k = TensorView::strided(t.k.get(), DType::bf16, {1, 32, 2, 64}, {32 * 140, 140, 64, 1}, t.gpu);
  expect_error([&] { forward(t.view(t.q), k, t.view(t.v), t.view(t.o), t.lse_view()); }, "k", ErrorKind::value);
}

TEST(CudaErrors, Float32IsCpuOnly) {
  FLASHPP_REQUIRE_GPU();
  Tensors t;
  expect_error([&] {
    forward(t.view(t.q, DType::f32), t.view(t.k, DType::f32), t.view(t.v, DType::f32), t.view(t.o, DType::f32),
            t.lse_view());
  }, "q", ErrorKind::type);
}

TEST(CudaErrors, MixedDevices) {
  FLASHPP_REQUIRE_GPU();
  Tensors t;
  std::vector<std::uint16_t> host(std::size_t(Tensors::B * Tensors::S * Tensors::H * Tensors::D), 0x3c00);
  const TensorView k_cpu = TensorView::contiguous(host.data(), DType::bf16, {1, 64, 2, 64});
  expect_error([&] { forward(t.view(t.q), k_cpu, t.view(t.v), t.view(t.o), t.lse_view()); }, "k", ErrorKind::type);
}

TEST(CudaErrors, BackwardWorkspaceTooSmall) {
  FLASHPP_REQUIRE_GPU();
  Tensors t;
  DeviceBuffer dq(t.q.bytes()), dk(t.k.bytes()), dv(t.v.bytes()), dout(t.o.bytes());
  const std::size_t need = backward_workspace_bytes(t.view(t.q), t.view(t.k), t.view(t.v));
  ASSERT_GT(need, 0u);
  DeviceBuffer ws(need);
  expect_error([&] {
    backward(t.view(dout), t.view(t.q), t.view(t.k), t.view(t.v), t.view(t.o), t.lse_view(), t.view(dq), t.view(dk),
             t.view(dv), {}, {ws.get(), need - 1});
  }, "workspace", ErrorKind::value);
}

TEST(CudaErrors, HeadDimAbove256) {
  FLASHPP_REQUIRE_GPU();
  DeviceBuffer q(1 * 8 * 1 * 264 * 2);
  const TensorView v = TensorView::contiguous(q.get(), DType::f16, {1, 8, 1, 264}, Device::cuda(0));
  expect_error([&] { (void)select_forward(v, v, v); }, "q", ErrorKind::not_supported);
}

TEST(CudaSelect, NamesTheKernel) {
  FLASHPP_REQUIRE_GPU();
  Tensors t;
  const Selection s = select_forward(t.view(t.q), t.view(t.k), t.view(t.v));
  EXPECT_TRUE(s.ok) << s.reason;
  // The Hopper family on sm_90 devices, the FA2-class one elsewhere (which says why).
  const bool hopper = s.backend.rfind("cuda-sm90 fwd bf16 hdim64", 0) == 0;
  EXPECT_TRUE(hopper || s.backend.rfind("cuda-sm80 fwd bf16 hdim64", 0) == 0) << s.backend;
  if (!hopper) {
    EXPECT_NE(s.note.find("cuda-sm90"), std::string::npos) << s.note;
  }
  AttentionOptions det;
  det.deterministic = true;
  const Selection b = select_backward(t.view(t.q), t.view(t.k), t.view(t.v), det);
  EXPECT_TRUE(b.ok) << b.reason;
  EXPECT_NE(b.backend.find("deterministic"), std::string::npos) << b.backend;
  // head dim 40 rounds up to the 64 kernel with predicated loads
  DeviceBuffer q40(1 * 8 * 1 * 40 * 2);
  const TensorView v40 = TensorView::contiguous(q40.get(), DType::f16, {1, 8, 1, 40}, Device::cuda(0));
  const Selection s40 = select_forward(v40, v40, v40);
  EXPECT_TRUE(s40.ok) << s40.reason;
  EXPECT_NE(s40.backend.find("hdim64"), std::string::npos) << s40.backend;
  // A family forced through the environment (the library reads it per call).
  auto forced_sm80 = [&](const char* variable, auto select) {
    ::setenv(variable, "sm80", 1);
    const Selection s = select(t.view(t.q), t.view(t.k), t.view(t.v), AttentionOptions{});
    ::unsetenv(variable);
    return s;
  };
  // Forcing the FA2-class forward (the rules of validation and of the Hopper TMA
  // loads coincide for realistic views, so the override is the fallback a test
  // can reach on an H200): the FA2 kernel runs and the note says why.
  const Selection forced = forced_sm80("FLASHPP_CUDA_FORWARD_FAMILY", select_forward);
  EXPECT_TRUE(forced.ok) << forced.reason;
  EXPECT_EQ(forced.backend.rfind("cuda-sm80 fwd bf16 hdim64", 0), 0u) << forced.backend;
  if (hopper) {
    EXPECT_NE(forced.note.find("FLASHPP_CUDA_FORWARD_FAMILY=sm80"), std::string::npos) << forced.note;
  }
  // The deterministic backward above passed the Hopper backward over (on any device:
  // that rule comes before the device's): the FA2-class backward ran and the note says why.
  EXPECT_EQ(b.backend.rfind("cuda-sm80 bwd", 0), 0u) << b.backend;
  EXPECT_NE(b.note.find("cuda-sm90 bwd"), std::string::npos) << b.note;
  EXPECT_NE(b.note.find("deterministic"), std::string::npos) << b.note;
  // Forcing the FA2-class backward: it runs and the note says why.
  const Selection forced_bwd = forced_sm80("FLASHPP_CUDA_BACKWARD_FAMILY", select_backward);
  EXPECT_TRUE(forced_bwd.ok) << forced_bwd.reason;
  EXPECT_EQ(forced_bwd.backend.rfind("cuda-sm80 bwd", 0), 0u) << forced_bwd.backend;
  EXPECT_NE(forced_bwd.note.find("FLASHPP_CUDA_BACKWARD_FAMILY=sm80"), std::string::npos) << forced_bwd.note;
}

}  // namespace
}  // namespace flashpp::test::gpu
