// Where a batch-1 decode step spends its time: runs the decode kernel
// (32 q / 8 kv heads, d 128, bf16, contiguous cache, one query token) replayed
// through a CUDA graph as the decode benchmark does, then replays it once more
// with phase timestamps (src/cuda/decode/phase_trace.cuh) and prints, per
// step, the launch gap, the blocks' start and end spread and each phase's
// median. Beside it, two floors measured the same way: an empty kernel (the
// launch path alone) and a plain streaming read of the same bytes by the
// same number of blocks. --variant <prefetch keys>,<dependents tiles left>[,cluster]
// (repeatable) sets the programmatic-launch overlap of DecodeArgs, and with a
// third field 1 merges the splits in a cluster (cluster_merge.cuh) instead of
// through L2 (the "->arrived" phase is then the cluster barrier). A tuning
// tool (docs/kvcache.md), built with FLASHPP_DECODE_TRACE; it checks its
// output against a host computation first.
#define FLASHPP_DECODE_TRACE 1
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "cuda/decode/decode_kernel.cuh"
#include "cuda_check.cuh"
#include "graph_timing.cuh"

namespace {

using flashpp::cuda::decode::DecodeArgs;
namespace dec = flashpp::cuda::decode;

constexpr int kHeadsQ = 32, kHeadsKV = 8, kDim = 128;

__global__ void fill_random(__nv_bfloat16* x, std::size_t n, unsigned seed, float amp) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n; i += std::size_t(gridDim.x) * blockDim.x) {
    unsigned h = unsigned(i) * 2654435761u ^ seed;
    h ^= h >> 13;
    h *= 0x5bd1e995u;
    h ^= h >> 15;
    x[i] = __float2bfloat16(amp * (float(h & 0xffff) / 32768.f - 1.f));
  }
}

__global__ void empty_kernel(int) {
  flashpp::cuda::ptx::wait_prior_grids();
  flashpp::cuda::ptx::allow_dependent_launch();
}

// Block (head, split) reads the K and V rows of its key span for its head, as
// the decode kernel does, keeping `kInFlight` 16-byte loads per tensor in flight
// per thread; one word per block goes out so nothing is optimized away.
template <int kInFlight>
__global__ void stream_kernel(const uint4* k, const uint4* v, int keys_per_block, unsigned* sink) {
  flashpp::cuda::ptx::wait_prior_grids();
  flashpp::cuda::ptx::allow_dependent_launch();
  const int hk = blockIdx.x, split = blockIdx.y;
  constexpr int kChunks = kDim / 8;  // uint4 per row
  const int chunk = threadIdx.x % kChunks, row_in = threadIdx.x / kChunks, row_step = blockDim.x / kChunks;
  const std::size_t row_stride = std::size_t(kHeadsKV) * kChunks;
  unsigned acc = 0;
  const int j0 = split * keys_per_block;
  for (int j = j0 + row_in; j < j0 + keys_per_block; j += row_step * kInFlight) {
    uint4 a[kInFlight], b[kInFlight];
#pragma unroll
    for (int u = 0; u < kInFlight; ++u) {
      const std::size_t off = std::size_t(j + u * row_step) * row_stride + std::size_t(hk) * kChunks + chunk;
      a[u] = __ldcs(k + off);
      b[u] = __ldcs(v + off);
    }
#pragma unroll
    for (int u = 0; u < kInFlight; ++u) acc ^= a[u].x ^ a[u].w ^ b[u].y ^ b[u].z;
  }
  if (acc == 0x12345678u) sink[blockIdx.x] = acc;
}

struct Buffers {
  int len = 0, copies = 0;
  std::size_t per_copy = 0;  // elements of K (= of V) per copy
  __nv_bfloat16 *k = nullptr, *v = nullptr, *q = nullptr, *o = nullptr;
  float *o_part = nullptr, *lse_part = nullptr;
  int *counters = nullptr, *seqlens = nullptr;
  unsigned* sink = nullptr;
};

DecodeArgs make_args(const Buffers& B, int copy, int splits) {
  DecodeArgs args;
  flashpp::KVCacheParams& p = args.p;
  flashpp::AttnParams& a = p.attn;
  a.q = B.q;
  a.k = B.k + std::size_t(copy) * B.per_copy;
  a.v = B.v + std::size_t(copy) * B.per_copy;
  a.o = B.o;
  a.q_batch_stride = a.q_row_stride = kHeadsQ * kDim;
  a.q_head_stride = kDim;
  a.o_batch_stride = a.o_row_stride = kHeadsQ * kDim;
  a.o_head_stride = kDim;
  a.k_batch_stride = a.v_batch_stride = std::int64_t(B.len) * kHeadsKV * kDim;
  a.k_row_stride = a.v_row_stride = kHeadsKV * kDim;
  a.k_head_stride = a.v_head_stride = kDim;
  a.batch = 1;
  a.seqlen_q = 1;
  a.seqlen_k = B.len;
  a.heads_q = kHeadsQ;
  a.heads_kv = kHeadsKV;
  a.gqa_ratio = kHeadsQ / kHeadsKV;
  a.head_dim = a.head_dim_v = kDim;
  a.scale = 1.f / std::sqrt(float(kDim));
  a.scale_log2 = a.scale * 1.4426950408889634f;
  a.window_left = -1;
  a.window_right = 0;
  a.causal = true;
  a.dtype = flashpp::ElemType::bf16;
  p.batch_cache = 1;
  p.capacity = B.len;
  p.cache_seqlens = B.seqlens;
  p.num_splits = splits;
  p.split_counters = B.counters;
  args.o_part = B.o_part;
  args.lse_part = B.lse_part;
  args.split_arrivals = B.counters;
  args.part_rows = kHeadsQ;
  args.rows_per_kv_head = kHeadsQ / kHeadsKV;
  return args;
}

float bf(__nv_bfloat16 x) { return __bfloat162float(x); }

// Host attention of copy 0 against the kernel's output: max |error|.
double check_output(const Buffers& B) {
  const std::size_t n = B.per_copy;
  std::vector<__nv_bfloat16> k(n), v(n), q(kHeadsQ * kDim), o(kHeadsQ * kDim);
  CHECK(cudaMemcpy(k.data(), B.k, n * 2, cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(v.data(), B.v, n * 2, cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(q.data(), B.q, q.size() * 2, cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(o.data(), B.o, o.size() * 2, cudaMemcpyDeviceToHost));
  double worst = 0;
  const double scale = 1.0 / std::sqrt(double(kDim));
  for (int h = 0; h < kHeadsQ; ++h) {
    const int hk = h / (kHeadsQ / kHeadsKV);
    std::vector<double> s(std::size_t(B.len));
    double mx = -1e300;
    for (int j = 0; j < B.len; ++j) {
      double d = 0;
      for (int c = 0; c < kDim; ++c) d += double(bf(q[h * kDim + c])) * bf(k[(std::size_t(j) * kHeadsKV + hk) * kDim + c]);
      s[j] = d * scale;
      mx = std::max(mx, s[j]);
    }
    double sum = 0;
    for (auto& x : s) sum += (x = std::exp(x - mx));
    for (int c = 0; c < kDim; ++c) {
      double acc = 0;
      for (int j = 0; j < B.len; ++j) acc += s[j] * bf(v[(std::size_t(j) * kHeadsKV + hk) * kDim + c]);
      worst = std::max(worst, std::abs(acc / sum - double(bf(o[h * kDim + c]))));
    }
  }
  return worst;
}

// Median microseconds per call of `calls` launches replayed as one graph,
// after two direct launches (warm-up).
template <typename Launch>
double step_us(cudaStream_t stream, int calls, Launch launch) {
  for (int i = 0; i < 2; ++i) launch(i);
  CHECK(cudaStreamSynchronize(stream));
  return median(graph_call_times_us(stream, calls, launch));
}

// Launches kernel(args...) on `stream` as a programmatic dependent of the
// kernel before it, as run_config launches the decode kernel, so the floors
// see the same launch overlap.
template <typename... Params, typename... Args>
void launch_dependent(void (*kernel)(Params...), dim3 grid, dim3 block, cudaStream_t stream, Args... args) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  CHECK(cudaLaunchKernelEx(&cfg, kernel, args...));
}

// One launch setting of the programmatic-launch overlap (DecodeArgs).
struct Variant {
  int prefetch_keys = 0, dependents_tiles_left = -1, cluster = 0;
};

void run_config(int len, int splits, int calls, const std::vector<Variant>& variants) {
  cudaStream_t stream;
  CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  Buffers B;
  B.len = len;
  B.per_copy = std::size_t(len) * kHeadsKV * kDim;
  const std::size_t l2_defeat = 200u << 20;  // several times L2 across the copies
  B.copies = std::max<int>(2, int((l2_defeat + 4 * B.per_copy - 1) / (4 * B.per_copy)));
  CHECK(cudaMalloc(&B.k, B.per_copy * B.copies * 2));
  CHECK(cudaMalloc(&B.v, B.per_copy * B.copies * 2));
  CHECK(cudaMalloc(&B.q, kHeadsQ * kDim * 2));
  CHECK(cudaMalloc(&B.o, kHeadsQ * kDim * 2));
  CHECK(cudaMalloc(&B.o_part, std::size_t(dec::kMaxSplits) * kHeadsQ * kDim * 4));
  CHECK(cudaMalloc(&B.lse_part, std::size_t(dec::kMaxSplits) * kHeadsQ * 4));
  CHECK(cudaMalloc(&B.counters, 1024 * 4));
  CHECK(cudaMemset(B.counters, 0, 1024 * 4));
  CHECK(cudaMalloc(&B.seqlens, 4));
  CHECK(cudaMemcpy(B.seqlens, &len, 4, cudaMemcpyHostToDevice));
  CHECK(cudaMalloc(&B.sink, 4096));
  fill_random<<<1024, 256>>>(B.k, B.per_copy * B.copies, 11u, 1.f);
  fill_random<<<1024, 256>>>(B.v, B.per_copy * B.copies, 23u, 1.f);
  fill_random<<<32, 128>>>(B.q, kHeadsQ * kDim, 37u, 2.f);
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());

  using Kernel = dec::AttentionKernel;
  const Kernel kern = dec::attention_kernel<__nv_bfloat16, kDim, 1, false>();
  int fit = 0;
  CHECK(kern.prepare(&fit));
  std::vector<DecodeArgs> args;
  for (int c = 0; c < B.copies; ++c) args.push_back(make_args(B, c, splits));
  const dim3 grid(kHeadsKV, unsigned(splits), 1);
  int cluster = 0;  // set per variant
  auto launch = [&](int i) { CHECK(kern.launch(args[std::size_t(i % B.copies)], grid, stream, true, cluster)); };
  const double bytes = 2.0 * B.per_copy * 2;

  for (const Variant& var : variants) {
    cluster = 0;
    if (var.cluster != 0) {
      int fit = 0;
      if (splits > dec::kMaxClusterSplits || kern.cluster_fit(splits, &fit) != cudaSuccess || fit < 1) {
        cudaGetLastError();
        std::printf("\n=== len %d, splits %d: no cluster of %d blocks fits; cluster variant skipped ===\n", len, splits,
                    splits);
        continue;
      }
      std::printf("\n(clusters of %d blocks: %d resident at once, %d needed)\n", splits, fit, kHeadsKV);
      cluster = splits;
    }
    for (DecodeArgs& x : args) {
      x.prefetch_keys = var.prefetch_keys;
      x.dependents_tiles_left = var.dependents_tiles_left;
      x.cluster_splits = cluster;
    }
    CHECK(cudaMemset(B.o, 0, kHeadsQ * kDim * 2));
    launch(0);
    CHECK(cudaStreamSynchronize(stream));
    const double err = check_output(B);
    const double us = step_us(stream, calls, launch);
    std::printf("\n=== len %d, splits %d, prefetch %d keys, dependents at %d tiles left, %s merge: %.2f us/step, "
                "%.3f TB/s (max |err| vs host %.2e%s) ===\n",
                len, splits, var.prefetch_keys, var.dependents_tiles_left, cluster ? "cluster" : "L2", us, bytes / (us * 1e-6) / 1e12, err,
                err < 2e-2 ? "" : "  ** WRONG **");

    // Traced replay.
    const int blocks = kHeadsKV * splits;
    unsigned long long* buf = nullptr;
    const std::size_t words = std::size_t(calls + 4) * blocks * dec::kTraceWords;
    CHECK(cudaMalloc(&buf, words * 8));
    CHECK(cudaMemset(buf, 0, words * 8));
    unsigned zero = 0;
    CHECK(cudaMemcpyToSymbol(dec::g_trace_buffer, &buf, sizeof(buf)));
    CHECK(cudaMemcpyToSymbol(dec::g_trace_sequence, &zero, sizeof(zero)));
    const cudaGraphExec_t exec = capture_calls(stream, calls, launch);
    CHECK(cudaGraphLaunch(exec, stream));
    CHECK(cudaStreamSynchronize(stream));
    std::vector<unsigned long long> h(words);
    CHECK(cudaMemcpy(h.data(), buf, words * 8, cudaMemcpyDeviceToHost));
    CHECK(cudaGraphExecDestroy(exec));
    unsigned long long* null_buf = nullptr;
    CHECK(cudaMemcpyToSymbol(dec::g_trace_buffer, &null_buf, sizeof(null_buf)));
    CHECK(cudaFree(buf));

    int clock_khz = 0;
    CHECK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0));
    const double cycles_per_us = clock_khz * 1e-3;
    auto W = [&](int L, int blk, int word) { return h[(std::size_t(L) * blocks + blk) * dec::kTraceWords + word]; };
    auto timer_us = [&](int L, int blk, int ph) { return double(W(L, blk, 2 * ph)) * 1e-3; };
    auto clock_us = [&](int L, int blk, int ph) { return ph == dec::kPhaseStart ? 0.0 : double(W(L, blk, 2 * ph + 1)) / cycles_per_us; };
    const char* names[dec::kTracePhases] = {"",           "",          "start->Q issued",       "->length loaded",
                                            "->span",     "->tiles issued", "->Q landed",     "->first tile",
                                            "->loop end", "->warp lse", "->warp merge",     "->written",
                                            "->arrived",  "->exit (merging blocks)"};
    std::vector<double> gap, span, start_spread, loop_spread, exit_spread, entry_lead, phase[dec::kTracePhases];
    for (int L = 2; L < calls - 1; ++L) {
      double s_min = 1e300, s_max = 0, e_max = 0, e_min = 1e300, l_min = 1e300, l_max = 0, prev_end = 0;
      for (int b = 0; b < blocks; ++b) {
        const double t0 = timer_us(L, b, dec::kPhaseStart);
        s_min = std::min(s_min, t0);
        s_max = std::max(s_max, t0);
        e_max = std::max(e_max, timer_us(L, b, dec::kPhaseExit));
        e_min = std::min(e_min, timer_us(L, b, dec::kPhaseExit));
        l_min = std::min(l_min, t0 + clock_us(L, b, dec::kPhaseLoopEnd));
        l_max = std::max(l_max, t0 + clock_us(L, b, dec::kPhaseLoopEnd));
        prev_end = std::max(prev_end, timer_us(L - 1, b, dec::kPhaseExit));
        entry_lead.push_back(t0 - timer_us(L, b, dec::kPhaseEntry));
        const bool merging = W(L, b, 2 * dec::kTracePhases + 1) != 0;
        for (int k = dec::kPhaseQIssued; k < dec::kTracePhases; ++k) {
          if (k == dec::kPhaseExit && !merging) continue;
          phase[k].push_back(clock_us(L, b, k) - clock_us(L, b, k - 1));
        }
      }
      gap.push_back(s_min - prev_end);
      span.push_back(e_max - s_min);
      start_spread.push_back(s_max - s_min);
      loop_spread.push_back(l_max - l_min);
      exit_spread.push_back(e_max - e_min);
    }
    std::printf("per step (median over steps 2..%d), us: previous grid's last exit -> first start %.2f | first start -> "
                "last exit %.2f | start spread %.2f | loop-end spread %.2f | exit spread %.2f | entry lead %.2f\n",
                calls - 2, median(gap), median(span), median(start_spread), median(loop_spread), median(exit_spread),
                median(entry_lead));
    std::printf("per block phases (thread 0's clock at %.0f MHz), us: median / mean / max\n", cycles_per_us);
    for (int k = dec::kPhaseQIssued; k < dec::kTracePhases; ++k) {
      double sum = 0;
      for (double x : phase[k]) sum += x;
      const double mean = phase[k].empty() ? 0 : sum / phase[k].size();
      const double mx = phase[k].empty() ? 0 : *std::max_element(phase[k].begin(), phase[k].end());
      std::printf("  %-26s %7.2f / %7.2f / %7.2f\n", names[k], median(phase[k]), mean, mx);
    }
  }  // variants

  // Floors, measured the same way.
  const double us_empty =
      step_us(stream, calls, [&](int) { launch_dependent(empty_kernel, grid, dim3(128), stream, 0); });
  auto stream_floor = [&](auto kernel, int split_count, int threads) {
    return step_us(stream, calls, [&, kernel](int i) {
      const auto* kp = reinterpret_cast<const uint4*>(B.k + std::size_t(i % B.copies) * B.per_copy);
      const auto* vp = reinterpret_cast<const uint4*>(B.v + std::size_t(i % B.copies) * B.per_copy);
      launch_dependent(kernel, dim3(kHeadsKV, unsigned(split_count)), dim3(unsigned(threads)), stream, kp, vp,
                       len / split_count, B.sink);
    });
  };
  std::printf("floors, us/step: empty kernel (same grid) %.2f", us_empty);
  for (int sc : {16, 32}) {
    const double u4 = stream_floor(stream_kernel<4>, sc, 128), u8 = stream_floor(stream_kernel<8>, sc, 128),
                 u8w = stream_floor(stream_kernel<8>, sc, 256);
    std::printf(" | stream x%d blocks: 4 loads %.2f, 8 loads %.2f, 8 loads 256 thr %.2f (%.2f TB/s best)", kHeadsKV * sc,
                u4, u8, u8w, bytes / (std::min({u4, u8, u8w}) * 1e-6) / 1e12);
  }
  std::printf("\n");

  CHECK(cudaFree(B.k));
  CHECK(cudaFree(B.v));
  CHECK(cudaFree(B.q));
  CHECK(cudaFree(B.o));
  CHECK(cudaFree(B.o_part));
  CHECK(cudaFree(B.lse_part));
  CHECK(cudaFree(B.counters));
  CHECK(cudaFree(B.seqlens));
  CHECK(cudaFree(B.sink));
  CHECK(cudaStreamDestroy(stream));
}

}  // namespace

int main(int argc, char** argv) {
  int calls = 24;
  std::vector<std::pair<int, int>> configs;
  std::vector<Variant> variants;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--calls") == 0) calls = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--variant") == 0) {
      Variant v;
      if (std::sscanf(argv[i + 1], "%d,%d,%d", &v.prefetch_keys, &v.dependents_tiles_left, &v.cluster) >= 2)
        variants.push_back(v);
    }
    if (std::strcmp(argv[i], "--config") == 0) {
      int len = 0, splits = 0;
      if (std::sscanf(argv[i + 1], "%d,%d", &len, &splits) == 2) configs.push_back({len, splits});
    }
  }
  if (configs.empty()) configs = {{4096, 16}, {16384, 16}, {16384, 32}, {65536, 16}};
  // Default: the launch before the overlap (no prefetch, next kernel let in at
  // the start) and the launcher's defaults.
  if (variants.empty()) variants = {{0, -1}, {128, 0}};
  for (auto [len, splits] : configs) {
    if (len % (splits * 64) != 0 || splits > dec::kMaxSplits) {
      std::fprintf(stderr, "len must be a multiple of 64 * splits, splits <= %d\n", dec::kMaxSplits);
      return 2;
    }
    run_config(len, splits, calls, variants);
  }
  return 0;
}
