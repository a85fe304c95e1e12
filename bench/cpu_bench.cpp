// CPU backend throughput (numbers, not pass/fail): GFLOP/s of forward and
// backward for head dims 64/128, seqlen 1K..8K, causal and not, on one thread
// and on all threads. FLOPs = 4 * B * H * N^2 * d (halved when causal);
// backward counts 2.5x forward.
//   flashpp_cpu_bench --benchmark_out=cpu.json --benchmark_out_format=json
#include <benchmark/benchmark.h>

#include <cstring>
#include <random>
#include <vector>

#include "flashpp/flashpp.hpp"

#if defined(_OPENMP)
#include <omp.h>
#endif

namespace {

struct Problem {
  std::int64_t B = 1, N, H = 2, D;
  std::vector<float> q, k, v, o, dout, dq, dk, dv, lse;
  std::vector<unsigned char> ws;
  Problem(std::int64_t n, std::int64_t d) : N(n), D(d) {
    const std::size_t e = std::size_t(B * N * H * D);
    std::mt19937 rng(1234);
    std::normal_distribution<float> nd;
    for (auto* t : {&q, &k, &v, &dout}) {
      t->resize(e);
      for (auto& x : *t) x = nd(rng);
    }
    o.assign(e, 0.f);
    dq.assign(e, 0.f);
    dk.assign(e, 0.f);
    dv.assign(e, 0.f);
    lse.assign(std::size_t(B * H * N), 0.f);
  }
  flashpp::TensorView t(std::vector<float>& x) {
    return flashpp::TensorView::contiguous(x.data(), flashpp::DType::f32, {B, N, H, D});
  }
  flashpp::TensorView tl() { return flashpp::TensorView::contiguous(lse.data(), flashpp::DType::f32, {B, H, N}); }
};

void set_threads(int threads) {
#if defined(_OPENMP)
  omp_set_num_threads(threads > 0 ? threads : omp_get_num_procs());
#else
  (void)threads;
#endif
}

double fwd_flops(const Problem& p, bool causal) {
  return 4.0 * p.B * p.H * double(p.N) * p.N * p.D * (causal ? 0.5 : 1.0);
}

// args: N, D, causal, threads (0 = all), backward
void BM_attention(benchmark::State& state) {
  const std::int64_t N = state.range(0), D = state.range(1);
  const bool causal = state.range(2) != 0;
  const bool bwd = state.range(4) != 0;
  set_threads(int(state.range(3)));
  Problem p(N, D);
  flashpp::AttentionOptions opts;
  opts.causal = causal;
  flashpp::forward(p.t(p.q), p.t(p.k), p.t(p.v), p.t(p.o), p.tl(), opts);
  const std::size_t wsb = flashpp::backward_workspace_bytes(p.t(p.q), p.t(p.k), p.t(p.v), opts);
  p.ws.resize(wsb + 64);
  void* ws = reinterpret_cast<void*>((reinterpret_cast<std::uintptr_t>(p.ws.data()) + 63) & ~std::uintptr_t(63));
  for (auto _ : state) {
    if (bwd)
      flashpp::backward(p.t(p.dout), p.t(p.q), p.t(p.k), p.t(p.v), p.t(p.o), p.tl(), p.t(p.dq), p.t(p.dk), p.t(p.dv),
                        opts, {ws, wsb});
    else
      flashpp::forward(p.t(p.q), p.t(p.k), p.t(p.v), p.t(p.o), p.tl(), opts);
    benchmark::ClobberMemory();
  }
  const double flops = fwd_flops(p, causal) * (bwd ? 2.5 : 1.0);
  state.counters["GFLOPs"] = benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(std::string(bwd ? "bwd" : "fwd") + (causal ? " causal" : "") + " B=1 H=2 fp32");
}

void args(benchmark::internal::Benchmark* b) {
  for (int bwd : {0, 1})
    for (int threads : {1, 0})
      for (int d : {64, 128})
        for (int n : {1024, 2048, 4096, 8192})
          for (int causal : {0, 1}) b->Args({n, d, causal, threads, bwd});
  b->ArgNames({"N", "D", "causal", "threads", "bwd"});
  b->Unit(benchmark::kMillisecond);
  b->UseRealTime();
  b->MinTime(0.2);
}

BENCHMARK(BM_attention)->Apply(args);

}  // namespace

BENCHMARK_MAIN();
