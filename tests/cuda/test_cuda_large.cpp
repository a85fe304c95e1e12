// A K/V tensor of more than 2^31 elements: every offset in the kernels must be
// 64-bit. q is tiny and a causal window keeps the work small; the keys it sees sit
// at the far end of K/V (rows past 2^24, element offsets past 2^31). The visible
// slice is checked against the reference run on that slice alone (the window is
// bottom-right aligned, so the slice has the same visibility), keys outside every
// visible tile are NaN so that any stray read shows, and dK/dV rows no query sees
// must come back exactly 0.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "api/validate.hpp"
#include "flashpp/attention.hpp"
#include "gpu_support.hpp"
#include "reference/reference.hpp"
#include "support/compare.hpp"
#include "support/expect.hpp"
#include "support/host_tensor.hpp"
#include "support/seed.hpp"

namespace flashpp::test::gpu {
namespace {

TEST(CudaLargeTensor, KeysBeyond2Pow31Elements) {
  FLASHPP_REQUIRE_GPU();
  const std::int64_t d = 128, sq = 256, sk = (std::int64_t(1) << 24) + 4096, tail = 1024;
  static_assert(((std::int64_t(1) << 24) + 4096) * 128 > (std::int64_t(1) << 31));
  const std::int64_t kv_bytes = sk * d * 2;
  if (free_device_memory() < std::size_t(4 * kv_bytes + (std::int64_t(1) << 30)))
    GTEST_SKIP() << "needs " << (4 * kv_bytes >> 30) << " GiB of free device memory";
  const DType dt = DType::bf16;
  AttentionOptions opts;
  opts.causal = true;
  opts.window_left = 512;  // rows see keys [i + sk - sq - 512, i + sk - sq]: all within the last 768

  auto rng = make_rng("CudaLargeTensor");
  HostTensor q(dt, {1, sq, 1, d}), dout(dt, {1, sq, 1, d});
  HostTensor k_tail(dt, {1, tail, 1, d}), v_tail(dt, {1, tail, 1, d});
  q.fill_normal(rng);
  dout.fill_normal(rng);
  k_tail.fill_normal(rng);
  v_tail.fill_normal(rng);

  DeviceBuffer k{std::size_t(kv_bytes)}, v{std::size_t(kv_bytes)}, dk{std::size_t(kv_bytes)}, dv{std::size_t(kv_bytes)};
  k.fill_byte(0xff);  // bf16 0xffff is NaN: keys no tile may touch
  v.fill_byte(0xff);
  dk.fill_byte(0xff);
  dv.fill_byte(0xff);
  const std::size_t tail_off = std::size_t((sk - tail) * d * 2);
  k.upload(k_tail.storage(), k_tail.storage_bytes(), tail_off);
  v.upload(v_tail.storage(), v_tail.storage_bytes(), tail_off);
  DeviceBuffer dq_buf(q.storage_bytes()), q_buf(q.storage_bytes()), do_buf(dout.storage_bytes());
  DeviceBuffer out_buf(q.storage_bytes()), lse_buf(std::size_t(sq) * 4);
  q_buf.upload(q.storage(), q.storage_bytes());
  do_buf.upload(dout.storage(), dout.storage_bytes());
  out_buf.fill_byte(0xff);
  dq_buf.fill_byte(0xff);
  lse_buf.fill_byte(0xff);

  const Device gpu = Device::cuda(0);
  const TensorView qv = TensorView::contiguous(q_buf.get(), dt, {1, sq, 1, d}, gpu);
  const TensorView kv = TensorView::contiguous(k.get(), dt, {1, sk, 1, d}, gpu);
  const TensorView vv = TensorView::contiguous(v.get(), dt, {1, sk, 1, d}, gpu);
  const TensorView ov = TensorView::contiguous(out_buf.get(), dt, {1, sq, 1, d}, gpu);
  const TensorView lv = TensorView::contiguous(lse_buf.get(), DType::f32, {1, 1, sq}, gpu);
  const TensorView dov = TensorView::contiguous(do_buf.get(), dt, {1, sq, 1, d}, gpu);
  const TensorView dqv = TensorView::contiguous(dq_buf.get(), dt, {1, sq, 1, d}, gpu);
  const TensorView dkv = TensorView::contiguous(dk.get(), dt, {1, sk, 1, d}, gpu);
  const TensorView dvv = TensorView::contiguous(dv.get(), dt, {1, sk, 1, d}, gpu);
  ASSERT_GT(kv.numel(), std::int64_t(1) << 31);

  forward(qv, kv, vv, ov, lv, opts);
  DeviceBuffer ws(backward_workspace_bytes(qv, kv, vv, opts));
  backward(dov, qv, kv, vv, ov, lv, dqv, dkv, dvv, opts, {ws.get(), ws.bytes()});
  device_synchronize();

  // Reference on the slice: same q, the last `tail` keys.
  HostTensor out(dt, {1, sq, 1, d}), lse(DType::f32, {1, 1, sq}), dq(dt, {1, sq, 1, d});
  HostTensor dk_tail(dt, {1, tail, 1, d}), dv_tail(dt, {1, tail, 1, d});
  out_buf.download(out.storage(), out.storage_bytes());
  lse_buf.download(lse.storage(), lse.storage_bytes());
  dq_buf.download(dq.storage(), dq.storage_bytes());
  dk.download(dk_tail.storage(), dk_tail.storage_bytes(), tail_off);
  dv.download(dv_tail.storage(), dv_tail.storage_bytes(), tail_off);
  const AttnParams p = detail::make_backward_params(dout.view(), q.view(), k_tail.view(), v_tail.view(), out.view(),
                                                    lse.view(), dq.view(), dk_tail.view(), dv_tail.view(), opts);
  std::vector<double> ref_o[2], ref_l[2], ref_dq[2], ref_dk[2], ref_dv[2];
  int i = 0;
  for (auto prec : {reference::Precision::f64, reference::Precision::storage}) {
    reference::forward(p, prec, ref_o[i], ref_l[i]);
    reference::backward(p, prec, ref_dq[i], ref_dk[i], ref_dv[i]);
    ++i;
  }
  const std::string what = "bf16 sk=2^24+4096 d=128 causal window 512";
  expect_within_tolerance({check_tolerance("out", what, dt, out.to_dense(), ref_o[0], ref_o[1]),
                           check_tolerance("lse", what, dt, lse.to_dense(), ref_l[0], ref_l[1]),
                           check_tolerance("dq", what, dt, dq.to_dense(), ref_dq[0], ref_dq[1]),
                           check_tolerance("dk", what, dt, dk_tail.to_dense(), ref_dk[0], ref_dk[1]),
                           check_tolerance("dv", what, dt, dv_tail.to_dense(), ref_dv[0], ref_dv[1])});

  // dK/dV rows no query sees: exactly zero (first 32 MiB, and the rows just below the slice).
  const std::size_t probe = std::size_t(32) << 20;
  std::vector<std::uint16_t> host(probe / 2);
  for (const DeviceBuffer* g : {&dk, &dv})
    for (std::size_t off : {std::size_t(0), tail_off - probe}) {
      g->download(host.data(), probe, off);
      std::size_t nonzero = 0;
      for (std::uint16_t x : host) nonzero += (x & 0x7fff) != 0;
      EXPECT_EQ(nonzero, 0u) << (g == &dk ? "dk" : "dv") << " rows no query sees are not 0 (byte offset " << off
                             << ")";
    }
}

}  // namespace
}  // namespace flashpp::test::gpu
