// The main job: one forward + backward of exact attention on a realistic
// shape, on the GPU when one is present and supported, else on the CPU.
// Prints the backend, time, GFLOP/s, the max error against the fp64 naive
// reference (checked on the first batch entry and KV-head group), and the
// memory used beside what standard attention would need.
//
//   flashpp_demo [--cpu] [--batch B] [--seqlen N] [--heads H] [--kv-heads HK] [--hdim D] [--causal]
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/half.hpp"
#include "flashpp/flashpp.hpp"
#include "reference/reference.hpp"
#include "api/validate.hpp"

#ifdef FLASHPP_WITH_CUDA
#include <cuda_runtime.h>
#endif

namespace {

struct Shape {
  int batch = 0, seqlen = 0, heads = 0, kv_heads = 0, hdim = 0;
  bool causal = false;
};

bool gpu_available() {
#ifdef FLASHPP_WITH_CUDA
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
#else
  return false;
#endif
}

// Host buffer of bf16 (GPU path) or fp32 (CPU path) random normal values.
struct HostTensor {
  std::vector<unsigned char> bytes;
  flashpp::DType dtype;
  std::int64_t numel;
  HostTensor(std::int64_t n, flashpp::DType t, std::mt19937_64* rng) : bytes(n * flashpp::dtype_size(t)), dtype(t), numel(n) {
    if (!rng) return;
    std::normal_distribution<float> nd;
    for (std::int64_t i = 0; i < n; ++i) {
      const float x = nd(*rng);
      if (t == flashpp::DType::bf16) {
        const std::uint16_t h = flashpp::float_to_bf16(x);
        std::memcpy(&bytes[i * 2], &h, 2);
      } else {
        std::memcpy(&bytes[i * 4], &x, 4);
      }
    }
  }
  void* data() { return bytes.data(); }
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  bool force_cpu = false;
  Shape s;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() { return i + 1 < argc ? std::atoi(argv[++i]) : 0; };
    if (a == "--cpu") force_cpu = true;
    else if (a == "--batch") s.batch = next();
    else if (a == "--seqlen") s.seqlen = next();
    else if (a == "--heads") s.heads = next();
    else if (a == "--kv-heads") s.kv_heads = next();
    else if (a == "--hdim") s.hdim = next();
    else if (a == "--causal") s.causal = true;
    else {
      std::fprintf(stderr, "usage: %s [--cpu] [--batch B] [--seqlen N] [--heads H] [--kv-heads HK] [--hdim D] [--causal]\n", argv[0]);
      return 2;
    }
  }
  const bool gpu = !force_cpu && gpu_available();
  // Defaults: a GPT-style layer (hidden 2048 on the GPU); smaller on the CPU.
  if (!s.batch) s.batch = gpu ? 4 : 1;
  if (!s.seqlen) s.seqlen = gpu ? 4096 : 2048;
  if (!s.heads) s.heads = gpu ? 16 : 8;
  if (!s.kv_heads) s.kv_heads = s.heads;
  if (!s.hdim) s.hdim = gpu ? 128 : 64;
  const flashpp::DType dt = gpu ? flashpp::DType::bf16 : flashpp::DType::f32;
  const std::int64_t B = s.batch, N = s.seqlen, H = s.heads, HK = s.kv_heads, D = s.hdim;

  std::mt19937_64 rng(std::random_device{}());
  HostTensor q(B * N * H * D, dt, &rng), k(B * N * HK * D, dt, &rng), v(B * N * HK * D, dt, &rng),
      dout(B * N * H * D, dt, &rng);
  HostTensor out(B * N * H * D, dt, nullptr), dq(q.numel, dt, nullptr), dk(k.numel, dt, nullptr),
      dv(v.numel, dt, nullptr);
  std::vector<float> lse(B * H * N);

  flashpp::AttentionOptions opts;
  opts.causal = s.causal;
  const flashpp::Device dev = gpu ? flashpp::Device::cuda(0) : flashpp::Device::cpu();
  std::vector<void*> device_ptrs;  // device copies, in the order q k v dout out dq dk dv lse ws_f ws_b
  auto place = [&](void* host, std::size_t bytes, bool copy) -> void* {
    if (!gpu) return host;
#ifdef FLASHPP_WITH_CUDA
    void* d = nullptr;
    if (cudaMalloc(&d, bytes ? bytes : 1) != cudaSuccess) {
      std::fprintf(stderr, "cudaMalloc of %zu bytes failed\n", bytes);
      std::exit(1);
    }
    if (copy) cudaMemcpy(d, host, bytes, cudaMemcpyHostToDevice);
    device_ptrs.push_back(d);
    return d;
#else
    (void)bytes; (void)copy;
    return host;
#endif
  };
  auto view = [&](HostTensor& t, std::int64_t heads, bool copy) {
    return flashpp::TensorView::contiguous(place(t.data(), t.bytes.size(), copy), dt, {B, N, heads, D}, dev);
  };
  const auto tq = view(q, H, true), tk = view(k, HK, true), tv = view(v, HK, true), tdo = view(dout, H, true);
  const auto to = view(out, H, false), tdq = view(dq, H, false), tdk = view(dk, HK, false), tdv = view(dv, HK, false);
  const auto tlse = flashpp::TensorView::contiguous(place(lse.data(), lse.size() * 4, false), flashpp::DType::f32, {B, H, N}, dev);

  std::size_t tensor_bytes = q.bytes.size() * 3 + k.bytes.size() * 4 + lse.size() * 4 + out.bytes.size();
  std::size_t ws_f = 0, ws_b = 0;
  try {
    const auto sel = flashpp::select_backward(tq, tk, tv, opts);
    if (gpu && !sel.ok) {
      std::printf("GPU present but not supported for this shape (%s); rerun with --cpu\n", sel.reason.c_str());
      return 1;
    }
    ws_f = flashpp::forward_workspace_bytes(tq, tk, tv, opts);
    ws_b = flashpp::backward_workspace_bytes(tq, tk, tv, opts);
    std::vector<unsigned char> hf(ws_f + 64), hb(ws_b + 64);
    auto align64 = [](unsigned char* p) { return reinterpret_cast<void*>((reinterpret_cast<std::uintptr_t>(p) + 63) & ~std::uintptr_t(63)); };
    flashpp::Workspace wf{gpu ? place(hf.data(), ws_f, false) : align64(hf.data()), ws_f};
    flashpp::Workspace wb{gpu ? place(hb.data(), ws_b, false) : align64(hb.data()), ws_b};

    auto sync = [&]() {
#ifdef FLASHPP_WITH_CUDA
      if (gpu) cudaDeviceSynchronize();
#endif
    };
    // One untimed call warms up (kernel loading, thread pool start).
    flashpp::forward(tq, tk, tv, to, tlse, opts, wf);
    sync();
    auto t0 = std::chrono::steady_clock::now();
    flashpp::forward(tq, tk, tv, to, tlse, opts, wf);
    sync();
    const double t_fwd = seconds_since(t0);
    flashpp::backward(tdo, tq, tk, tv, to, tlse, tdq, tdk, tdv, opts, wb);
    sync();
    t0 = std::chrono::steady_clock::now();
    flashpp::backward(tdo, tq, tk, tv, to, tlse, tdq, tdk, tdv, opts, wb);
    sync();
    const double t_bwd = seconds_since(t0);

#ifdef FLASHPP_WITH_CUDA
    if (gpu) {
      cudaMemcpy(out.data(), to.data, out.bytes.size(), cudaMemcpyDeviceToHost);
      cudaMemcpy(dq.data(), tdq.data, dq.bytes.size(), cudaMemcpyDeviceToHost);
      cudaMemcpy(dk.data(), tdk.data, dk.bytes.size(), cudaMemcpyDeviceToHost);
      cudaMemcpy(dv.data(), tdv.data, dv.bytes.size(), cudaMemcpyDeviceToHost);
      for (void* p : device_ptrs) cudaFree(p);
    }
#endif

    const double flops_fwd = 4.0 * B * H * double(N) * N * D * (s.causal ? 0.5 : 1.0);
    const double flops_bwd = 2.5 * flops_fwd;
    // Standard attention keeps S and P (B x H x N x N each, in the input dtype) for its backward.
    const double standard_extra = 2.0 * B * H * double(N) * N * flashpp::dtype_size(dt);
    std::printf("flashpp %s demo\n", flashpp::version());
    std::printf("backend        : %s\n", sel.backend.c_str());
    std::printf("shape          : batch %lld, seqlen %lld, heads %lld (kv %lld), hdim %lld, %s, %s\n", (long long)B,
                (long long)N, (long long)H, (long long)HK, (long long)D, flashpp::dtype_name(dt), s.causal ? "causal" : "non-causal");
    std::printf("forward        : %9.3f ms  %9.1f GFLOP/s\n", t_fwd * 1e3, flops_fwd / t_fwd * 1e-9);
    std::printf("backward       : %9.3f ms  %9.1f GFLOP/s\n", t_bwd * 1e3, flops_bwd / t_bwd * 1e-9);
    std::printf("checking against the fp64 reference (batch 0, kv group 0) ...\n");
    std::fflush(stdout);

    // Reference on batch 0 and the first KV-head group (all its query heads):
    // the same strides with batch = 1, heads_kv = 1 address exactly that slice.
    const auto hq = flashpp::TensorView::contiguous(q.data(), dt, {B, N, H, D});
    const auto hk = flashpp::TensorView::contiguous(k.data(), dt, {B, N, HK, D});
    const auto hv = flashpp::TensorView::contiguous(v.data(), dt, {B, N, HK, D});
    const auto ho = flashpp::TensorView::contiguous(out.data(), dt, {B, N, H, D});
    const auto hdo = flashpp::TensorView::contiguous(dout.data(), dt, {B, N, H, D});
    flashpp::AttnParams p = flashpp::detail::make_backward_params(
        hdo, hq, hk, hv, ho, flashpp::TensorView::contiguous(lse.data(), flashpp::DType::f32, {B, H, N}),
        flashpp::TensorView::contiguous(dq.data(), dt, {B, N, H, D}), flashpp::TensorView::contiguous(dk.data(), dt, {B, N, HK, D}),
        flashpp::TensorView::contiguous(dv.data(), dt, {B, N, HK, D}), opts);
    p.batch = 1;
    p.heads_kv = 1;
    p.heads_q = p.gqa_ratio;
    std::vector<double> ro, rl, rdq, rdk, rdv;
    flashpp::reference::forward(p, flashpp::reference::Precision::f64, ro, rl);
    flashpp::reference::backward(p, flashpp::reference::Precision::f64, rdq, rdk, rdv);
    // The reference output is (N, heads_q_slice, D); ours is (N, H, D): compare row by row.
    auto cmp = [&](const std::vector<double>& ref, const HostTensor& t, std::int64_t heads_ref, std::int64_t heads_all) {
      double e = 0;
      const auto et = flashpp::detail::to_elem_type(t.dtype);
      for (std::int64_t n = 0; n < N; ++n)
        for (std::int64_t h = 0; h < heads_ref; ++h)
          for (std::int64_t c = 0; c < D; ++c)
            e = std::max(e, std::abs(flashpp::reference::load(t.bytes.data(), et, (n * heads_all + h) * D + c) -
                                     ref[(n * heads_ref + h) * D + c]));
      return e;
    };
    const double e_out = cmp(ro, out, p.heads_q, H), e_dq = cmp(rdq, dq, p.heads_q, H);
    const double e_dk = cmp(rdk, dk, 1, HK), e_dv = cmp(rdv, dv, 1, HK);

    std::printf("max |err| vs fp64 reference (batch 0, kv group 0): out %.3g  dq %.3g  dk %.3g  dv %.3g\n", e_out, e_dq, e_dk, e_dv);
    std::printf("memory         : flashpp %.1f MB (tensors %.1f MB + workspace %.1f MB); standard attention needs %.1f MB more for S and P\n",
                (tensor_bytes + ws_f + ws_b) / 1e6, tensor_bytes / 1e6, (ws_f + ws_b) / 1e6, standard_extra / 1e6);
    const double tol = dt == flashpp::DType::f32 ? 1e-3 : 5e-2;
    const bool ok = e_out < tol && e_dq < tol && e_dk < tol && e_dv < tol && std::isfinite(e_out + e_dq + e_dk + e_dv);
    std::printf("result         : %s\n", ok ? "OK" : "ERROR TOO LARGE");
    return ok ? 0 : 1;
  } catch (const flashpp::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
