// Quick benchmark of flashpp's CUDA forward and backward (not a test): the
// configurations of the reference table in DESIGN.md (bf16, batch * seqlen = 16K,
// hidden 2048), timed with CUDA events, median of repeated calls after warm-up.
// FLOPs: forward 4 * B * H * N^2 * d (halved when causal), backward 2.5x forward.
//   flashpp_cuda_bench [--json PATH] [--reps N] [--cool-ms MS] [--quick | --grid | --varlen] [--fwd-only | --bwd-only] [--hdim D]
//   [--q-scale S] [--sink L]
// --q-scale multiplies q by S (default 1): with S ~ 100 most softmax rows sit on one
// key, which times the backward's exact-D passes (bwd_exact_d.cuh) on every block.
// --sink L gives every query the logit L on its sequence's first key (an attention
// sink, as trained models have in many heads): its P is about e^L / (e^L + keys), so
// L = ln(3 N) puts 3/4 of each long row's mass there; rows past 1/2 are marked.
// --fwd-only times our default forward alone (the FA2 and backward columns read 0);
// --bwd-only times the backward alone (the forward columns read 0); --hdim keeps
// the configurations of one head dim. --varlen times the forward on varlen
// batches instead (bench_varlen.cuh).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench_common.cuh"
#include "bench_varlen.cuh"
#include "flashpp/attention.hpp"

namespace {

using namespace flashpp::bench;

struct Config {
  int d, n;
  bool causal;
};

// A number that is the whole argument, or NaN (which the checks below reject), so a
// typo is an error rather than a silent 0.
float parse_float(const char* text) {
  char* end = nullptr;
  const float x = std::strtof(text, &end);
  return end != text && *end == '\0' ? x : NAN;
}

// A count that is the whole argument and in [0, 60000], else -1 (rejected below).
int parse_ms(const char* text) {
  char* end = nullptr;
  const long x = std::strtol(text, &end, 10);
  return end != text && *end == '\0' && x >= 0 && x <= 60000 ? int(x) : -1;
}

}  // namespace

int main(int argc, char** argv) {
  std::string json_path;
  int reps = 10;
  bool quick = false, grid = false, varlen = false, fwd_only = false, bwd_only = false;
  int keep_d = 0;
  float q_scale = 1.f;
  float sink_logit = 0.f;  // 0: no sink
  int only_d = 0, only_n = 0, only_causal = 0;  // --only hdim,N,causal: one config (profiling)
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--json") && i + 1 < argc) json_path = argv[++i];
    else if (!std::strcmp(argv[i], "--reps") && i + 1 < argc) reps = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--quick")) quick = true;
    else if (!std::strcmp(argv[i], "--grid")) grid = true;
    else if (!std::strcmp(argv[i], "--varlen")) varlen = true;
    else if (!std::strcmp(argv[i], "--fwd-only")) fwd_only = true;
    else if (!std::strcmp(argv[i], "--bwd-only")) bwd_only = true;
    else if (!std::strcmp(argv[i], "--q-scale") && i + 1 < argc) q_scale = parse_float(argv[++i]);
    else if (!std::strcmp(argv[i], "--sink") && i + 1 < argc) sink_logit = parse_float(argv[++i]);
    else if (!std::strcmp(argv[i], "--hdim") && i + 1 < argc) keep_d = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--cool-ms") && i + 1 < argc) {
      flashpp::bench::cool_ms() = parse_ms(argv[++i]);
      if (flashpp::bench::cool_ms() < 0) {
        std::fprintf(stderr, "--cool-ms wants a whole number of milliseconds in [0, 60000]\n");
        return 2;
      }
    }
    else if (!std::strcmp(argv[i], "--only") && i + 1 < argc &&
             std::sscanf(argv[++i], "%d,%d,%d", &only_d, &only_n, &only_causal) != 3) {
      std::fprintf(stderr, "--only wants hdim,N,causal (for example 128,16384,0)\n");
      return 2;
    }
  }
  if (varlen) return flashpp::bench::run_varlen(json_path, reps);
  std::vector<Config> configs = {{64, 2048, false},   {64, 16384, false},  {128, 1024, false}, {128, 4096, false},
                                 {128, 16384, false}, {128, 16384, true}, {256, 16384, false}};
  if (quick) configs = {{128, 4096, false}};
  // The full grid: hdim 64/128/256 x N 512..16K x causal or not (batch * N = 16K).
  if (grid) {
    configs.clear();
    for (int d : {64, 128, 256})
      for (bool causal : {false, true})
        for (int n = 512; n <= 16384; n *= 2) configs.push_back({d, n, causal});
  }
  if (only_d != 0 && (only_d < 1 || only_d > 256 || only_n < 1 || only_n > 16384)) {
    std::fprintf(stderr, "--only: hdim must be in 1..256 and N in 1..16384 (batch = 16384 / N)\n");
    return 2;
  }
  if (only_d != 0) configs = {{only_d, only_n, only_causal != 0}};
  if (!(q_scale > 0.f) || !std::isfinite(q_scale)) {
    std::fprintf(stderr, "--q-scale must be a finite number above 0\n");
    return 2;
  }
  if (!std::isfinite(sink_logit) || sink_logit < 0.f || sink_logit > 60.f) {
    std::fprintf(stderr, "--sink must be a logit in 0..60 (0: no sink)\n");
    return 2;
  }
  if (fwd_only && bwd_only) {
    std::fprintf(stderr, "--fwd-only and --bwd-only exclude each other\n");
    return 2;
  }
  if (keep_d != 0) {
    std::erase_if(configs, [&](const Config& c) { return c.d != keep_d; });
    if (configs.empty()) {
      std::fprintf(stderr, "--hdim %d: no configuration has that head dim\n", keep_d);
      return 2;
    }
  }
  FILE* js = json_path.empty() ? nullptr : std::fopen(json_path.c_str(), "w");
  if (js) std::fprintf(js, "[\n");
  std::printf("%-6s %-6s %-6s %10s %10s %10s %10s %12s %12s %12s\n", "hdim", "N", "causal", "fwd ms", "fwd TF/s",
              "bwd ms", "bwd TF/s", "bwd-det TF/s", "fa2-fwd TF/s", "fa2-bwd TF/s");
  bool first = true;
  for (const Config& c : configs) {
    const int d = c.d, n = c.n, b = 16384 / n, h = 2048 / d;
    const std::size_t elems = std::size_t(b) * n * h * d;
    Buffers buf;
    auto* q = static_cast<__nv_bfloat16*>(buf.alloc(elems * 2));
    auto* k = static_cast<__nv_bfloat16*>(buf.alloc(elems * 2));
    auto* v = static_cast<__nv_bfloat16*>(buf.alloc(elems * 2));
    auto* o = static_cast<__nv_bfloat16*>(buf.alloc(elems * 2));
    auto* dout = static_cast<__nv_bfloat16*>(buf.alloc(elems * 2));
    auto* dq = static_cast<__nv_bfloat16*>(buf.alloc(elems * 2));
    auto* dk = static_cast<__nv_bfloat16*>(buf.alloc(elems * 2));
    auto* dv = static_cast<__nv_bfloat16*>(buf.alloc(elems * 2));
    auto* lse = static_cast<float*>(buf.alloc(std::size_t(b) * h * n * 4));
    unsigned seed = 1;
    for (auto* x : {q, k, v, dout}) fill_normalish<<<1024, 256>>>(x, elems, seed++, x == q ? q_scale : 1.f);
    if (sink_logit > 0.f) add_sink<<<1024, 256>>>(q, k, std::size_t(b) * n * h, n, h, d, sink_logit);
    check(cudaDeviceSynchronize(), "fill");
    using flashpp::DType;
    using flashpp::TensorView;
    const flashpp::Device gpu = flashpp::Device::cuda(0);
    auto view = [&](void* p) { return TensorView::contiguous(p, DType::bf16, {b, n, h, d}, gpu); };
    const TensorView lv = TensorView::contiguous(lse, DType::f32, {b, h, n}, gpu);
    flashpp::AttentionOptions opts;
    opts.causal = c.causal;
    flashpp::AttentionOptions det = opts;
    det.deterministic = true;
    const std::size_t ws_bytes = std::max(flashpp::backward_workspace_bytes(view(q), view(k), view(v), opts),
                                          flashpp::backward_workspace_bytes(view(q), view(k), view(v), det));
    void* ws = buf.alloc(std::max<std::size_t>(ws_bytes, 256));
    // The forward's workspace as callers pass it (the Hopper kernel's dynamic
    // schedule for masked calls).
    const std::size_t fws_bytes = flashpp::forward_workspace_bytes(view(q), view(k), view(v), opts);
    void* fws = buf.alloc(std::max<std::size_t>(fws_bytes, 256));
    auto run_fwd = [&] { flashpp::forward(view(q), view(k), view(v), view(o), lv, opts, {fws, fws_bytes}); };
    const double fwd_flops = 4.0 * b * h * double(n) * n * d * (c.causal ? 0.5 : 1.0);
    const std::string fwd_kernel = flashpp::select_forward(view(q), view(k), view(v), opts).backend;
    // The FA2-class forward on the same inputs (the fallback family on Hopper), timed
    // before the default forward: right after the Hopper kernel (the GPU's highest power
    // draw) an H100 ran it 8-11% slower at 8K-16K keys than in a pass of its own, which
    // torch flash, timed after a backward, does not suffer.
    float fa2_ms = 0.f;
    if (!fwd_only && !bwd_only) {
      setenv("FLASHPP_CUDA_FORWARD_FAMILY", "sm80", 1);
      fa2_ms = median_ms(run_fwd, reps);
      unsetenv("FLASHPP_CUDA_FORWARD_FAMILY");
    }
    const float fwd_ms = bwd_only ? 0.f : median_ms(run_fwd, reps);
    // The backward reads this forward's out and LSE.
    run_fwd();
    auto run_bwd = [&](const flashpp::AttentionOptions& o_) {
      flashpp::backward(view(dout), view(q), view(k), view(v), view(o), lv, view(dq), view(dk), view(dv), o_,
                        {ws, ws_bytes});
    };
    // The FA2-class backward (the fallback family on Hopper) where the default is
    // another kernel, timed first for the reason given for the forward above.
    const std::string bwd_kernel = flashpp::select_backward(view(q), view(k), view(v), opts).backend;
    const bool bwd_is_fa2 = bwd_kernel.rfind("cuda-sm80", 0) == 0;
    float fa2_bwd_ms = 0.f;
    if (!fwd_only && !bwd_only && !bwd_is_fa2) {
      setenv("FLASHPP_CUDA_BACKWARD_FAMILY", "sm80", 1);
      fa2_bwd_ms = median_ms([&] { run_bwd(opts); }, reps);
      unsetenv("FLASHPP_CUDA_BACKWARD_FAMILY");
    }
    const float bwd_ms = fwd_only ? 0.f : median_ms([&] { run_bwd(opts); }, reps);
    if (bwd_is_fa2) fa2_bwd_ms = bwd_ms;
    const float det_ms = grid || fwd_only || bwd_only ? 0.f : median_ms([&] { run_bwd(det); }, std::max(3, reps / 2));
    check(cudaGetLastError(), "kernels");
    const double fwd_tf = fwd_ms > 0.f ? fwd_flops / (fwd_ms * 1e-3) / 1e12 : 0.0;
    const double bwd_tf = bwd_ms > 0.f ? 2.5 * fwd_flops / (bwd_ms * 1e-3) / 1e12 : 0.0;
    const double det_tf = det_ms > 0.f ? 2.5 * fwd_flops / (det_ms * 1e-3) / 1e12 : 0.0;
    const double fa2_tf = fa2_ms > 0.f ? fwd_flops / (fa2_ms * 1e-3) / 1e12 : 0.0;
    const double fa2_bwd_tf = fa2_bwd_ms > 0.f ? 2.5 * fwd_flops / (fa2_bwd_ms * 1e-3) / 1e12 : 0.0;
    std::printf("%-6d %-6d %-6s %10.3f %10.1f %10.3f %10.1f %12.1f %12.1f %12.1f\n", d, n, c.causal ? "yes" : "no",
                fwd_ms, fwd_tf, bwd_ms, bwd_tf, det_tf, fa2_tf, fa2_bwd_tf);
    if (js)
      std::fprintf(js,
                   "%s  {\"impl\": \"flashpp\", \"hdim\": %d, \"seqlen\": %d, \"batch\": %d, \"heads\": %d, "
                   "\"causal\": %s, \"fwd_ms\": %.4f, \"fwd_tflops\": %.2f, \"bwd_ms\": %.4f, \"bwd_tflops\": %.2f, "
                   "\"bwd_det_ms\": %.4f, \"bwd_det_tflops\": %.2f, \"fwd_fa2_ms\": %.4f, \"fwd_fa2_tflops\": %.2f, "
                   "\"bwd_fa2_ms\": %.4f, \"bwd_fa2_tflops\": %.2f, \"fwd_kernel\": \"%s\", \"bwd_kernel\": \"%s\"}",
                   first ? "" : ",\n", d, n, b, h, c.causal ? "true" : "false", fwd_ms, fwd_tf, bwd_ms, bwd_tf, det_ms,
                   det_tf, fa2_ms, fa2_tf, fa2_bwd_ms, fa2_bwd_tf, fwd_kernel.c_str(), bwd_kernel.c_str());
    first = false;
  }
  if (js) {
    std::fprintf(js, "\n]\n");
    std::fclose(js);
  }
  return 0;
}
