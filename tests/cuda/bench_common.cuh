#pragma once
// Helpers of the CUDA benchmarks (not tests): error exit, device buffers freed at
// scope end, a cheap deterministic fill, and the median of timed calls.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

namespace flashpp::bench {

inline void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
    std::exit(2);
  }
}

// `scale` stretches the bell (the benchmark's --q-scale: logits large enough that
// softmax rows concentrate on one key).
__global__ void fill_normalish(__nv_bfloat16* x, std::size_t n, unsigned seed, float scale = 1.f) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n; i += std::size_t(gridDim.x) * blockDim.x) {
    unsigned h = unsigned(i) * 2654435761u ^ seed;
    h ^= h >> 13;
    h *= 0x5bd1e995u;
    h ^= h >> 15;
    // sum of two uniforms: a cheap bell shape in (-1, 1), never all zeros
    const float u = float(h & 0xffff) / 65536.f + float(h >> 16) / 65536.f - 1.f;
    x[i] = __float2bfloat16(u * scale);
  }
}


// --sink (bench_cuda.cu): head dim 0 of every query row becomes 1, of every key but
// each sequence's first 0, and of the first key L sqrt(d) (bf16 rounds it to 3
// significant digits), so with the softmax scale 1 / sqrt(d) each query's logit on
// its first key is L plus what the other dims give (std ~0.17 from fill_normalish)
// and on the others what those dims give. rows = batch * seqlen * heads, row-major.
__global__ void add_sink(__nv_bfloat16* q, __nv_bfloat16* k, std::size_t rows, int seqlen, int heads, int d,
                         float logit) {
  for (std::size_t r = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; r < rows;
       r += std::size_t(gridDim.x) * blockDim.x) {
    const bool first_key = (r / heads) % seqlen == 0;
    q[r * d] = __float2bfloat16(1.f);
    k[r * d] = __float2bfloat16(first_key ? logit * sqrtf(float(d)) : 0.f);
  }
}

struct Buffers {
  std::vector<void*> ptrs;
  void* alloc(std::size_t bytes) {
    void* p = nullptr;
    check(cudaMalloc(&p, bytes), "cudaMalloc");
    ptrs.push_back(p);
    return p;
  }
  ~Buffers() {
    for (void* p : ptrs) cudaFree(p);
  }
};

// Idle time before each timed pass (--cool-ms; scripts/peer_bench.py takes the same
// option). Back-to-back passes keep an H100 at its power cap and lower its clock for
// whatever runs next; the peers' process idles between configs. An equal pause before
// every pass on both sides starts each measurement from the same state.
inline int& cool_ms() {
  static int ms = 0;
  return ms;
}

template <class F>
float median_ms(F&& f, int reps) {
  if (cool_ms() > 0) {
    check(cudaDeviceSynchronize(), "sync");
    std::this_thread::sleep_for(std::chrono::milliseconds(cool_ms()));
  }
  cudaEvent_t a, b;
  check(cudaEventCreate(&a), "event");
  check(cudaEventCreate(&b), "event");
  for (int i = 0; i < 2; ++i) f();  // warm-up
  std::vector<float> t;
  for (int i = 0; i < reps; ++i) {
    check(cudaEventRecord(a), "record");
    f();
    check(cudaEventRecord(b), "record");
    check(cudaEventSynchronize(b), "sync");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, a, b), "elapsed");
    t.push_back(ms);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace flashpp::bench
