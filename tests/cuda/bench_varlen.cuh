#pragma once
// Forward on varlen batches (flashpp_cuda_bench --varlen): how evenly the grid's
// blocks share tiles of unequal length. Lengths from a fixed-seed generator, two
// spreads: uniform in [64, 4096] and a long tail (most short, a few up to 8K),
// about 32K tokens a batch, hidden 2048, bf16, causal and not. FLOPs count the
// (query, key) pairs each sequence really has: 4 d H sum L^2 (causal L(L+1)/2).
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "bench_common.cuh"
#include "flashpp/attention.hpp"

namespace flashpp::bench {

// Sequence lengths of one batch: `tokens` in all, the last one cut to fit.
inline std::vector<int> varlen_lengths(bool long_tail, int tokens, std::uint64_t seed) {
  std::vector<int> lens;
  int total = 0;
  while (total < tokens) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    const double u = double((seed >> 11) & ((1ull << 53) - 1)) / double(1ull << 53);
    int len = long_tail ? int(std::fmin(8192.0, std::fmax(32.0, 200.0 * std::pow(1.0 - u, -1.0 / 1.2))))
                        : 64 + int(u * (4096 - 64));
    len = std::min(len, tokens - total);
    lens.push_back(len);
    total += len;
  }
  return lens;
}

inline int run_varlen(const std::string& json_path, int reps) {
  constexpr int kTokens = 32768;
  FILE* js = json_path.empty() ? nullptr : std::fopen(json_path.c_str(), "w");
  if (js) std::fprintf(js, "[\n");
  std::printf("%-6s %-9s %-6s %6s %8s %10s %10s  %s\n", "hdim", "lengths", "causal", "seqs", "longest", "fwd ms",
              "fwd TF/s", "kernel");
  bool first = true;
  for (int d : {64, 128})
    for (bool long_tail : {false, true})
      for (bool causal : {false, true}) {
        const std::vector<int> lens = varlen_lengths(long_tail, kTokens, 12345);
        const int h = 2048 / d, batch = int(lens.size());
        std::vector<int> cu(1, 0);
        double pairs = 0;
        int longest = 0;
        for (int len : lens) {
          cu.push_back(cu.back() + len);
          pairs += causal ? 0.5 * double(len) * (len + 1) : double(len) * len;
          longest = std::max(longest, len);
        }
        const std::size_t elems = std::size_t(kTokens) * h * d;
        Buffers buf;
        auto* q = static_cast<__nv_bfloat16*>(buf.alloc(elems * 2));
        auto* k = static_cast<__nv_bfloat16*>(buf.alloc(elems * 2));
        auto* v = static_cast<__nv_bfloat16*>(buf.alloc(elems * 2));
        auto* o = static_cast<__nv_bfloat16*>(buf.alloc(elems * 2));
        auto* lse = static_cast<float*>(buf.alloc(std::size_t(kTokens) * h * 4));
        auto* cu_dev = static_cast<int*>(buf.alloc(cu.size() * 4));
        check(cudaMemcpy(cu_dev, cu.data(), cu.size() * 4, cudaMemcpyHostToDevice), "cu_seqlens");
        unsigned seed = 1;
        for (auto* x : {q, k, v}) fill_normalish<<<1024, 256>>>(x, elems, seed++);
        check(cudaDeviceSynchronize(), "fill");
        const Device gpu = Device::cuda(0);
        auto view = [&](void* p) { return TensorView::contiguous(p, DType::bf16, {kTokens, h, d}, gpu); };
        const TensorView lv = TensorView::contiguous(lse, DType::f32, {h, kTokens}, gpu);
        AttentionOptions opts;
        opts.causal = causal;
        opts.cu_seqlens_q = opts.cu_seqlens_k = TensorView::contiguous(cu_dev, DType::i32, {batch + 1}, gpu);
        opts.max_seqlen_q = opts.max_seqlen_k = longest;
        const std::size_t ws_bytes = forward_workspace_bytes(view(q), view(k), view(v), opts);
        void* ws = buf.alloc(std::max<std::size_t>(ws_bytes, 256));
        const std::string kernel = select_forward(view(q), view(k), view(v), opts).backend;
        const float ms = median_ms([&] { forward(view(q), view(k), view(v), view(o), lv, opts, {ws, ws_bytes}); }, reps);
        check(cudaGetLastError(), "kernels");
        const double tf = 4.0 * d * h * pairs / (ms * 1e-3) / 1e12;
        const char* spread = long_tail ? "long-tail" : "uniform";
        std::printf("%-6d %-9s %-6s %6d %8d %10.3f %10.1f  %s\n", d, spread, causal ? "yes" : "no", batch, longest, ms,
                    tf, kernel.c_str());
        if (js)
          std::fprintf(js,
                       "%s  {\"impl\": \"flashpp\", \"hdim\": %d, \"seqlen\": \"%s\", \"sequences\": %d, "
                       "\"longest\": %d, \"tokens\": %d, \"heads\": %d, \"causal\": %s, \"fwd_ms\": %.4f, "
                       "\"fwd_tflops\": %.2f, \"fwd_kernel\": \"%s\"}",
                       first ? "" : ",\n", d, spread, batch, longest, kTokens, h, causal ? "true" : "false", ms, tf,
                       kernel.c_str());
        first = false;
      }
  if (js) {
    std::fprintf(js, "\n]\n");
    std::fclose(js);
  }
  return 0;
}

}  // namespace flashpp::bench
