// Concurrent calls: several host threads, each with its own stream and its own
// case (different head dims, so different kernels and first-use paths), run
// forward + backward repeatedly; every result must match the reference.
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "gpu_case_runner.hpp"
#include "support/seed.hpp"

namespace flashpp::test::gpu {
namespace {

TEST(CudaConcurrency, ThreadsOnSeparateStreams) {
  FLASHPP_REQUIRE_GPU();
  constexpr int kThreads = 6, kRepeats = 3;
  std::vector<std::vector<std::string>> failures(kThreads);
  std::vector<std::thread> pool;
  for (int ti = 0; ti < kThreads; ++ti)
    pool.emplace_back([ti, &failures] {
      std::vector<std::string>& bad = failures[std::size_t(ti)];
      try {
        auto rng = make_rng("CudaConcurrency", std::uint64_t(ti));
        AttnCase c;
        c.label = "thread" + std::to_string(ti);
        c.dtype = ti % 2 ? DType::bf16 : DType::f16;
        c.batch = 2;
        c.seqlen_q = 150 + 37 * ti;
        c.seqlen_k = 190 + 23 * ti;
        c.heads_q = 4;
        c.heads_kv = 2;
        static constexpr int kDims[] = {32, 64, 96, 128, 192, 256};
        c.head_dim = c.head_dim_v = kDims[ti % 6];
        c.causal = ti % 3 == 0;
        c.deterministic = ti % 2 == 0;
        c = on_gpu(c);
        AttnTensors t = make_tensors(c, rng, true);
        Stream stream;
        DeviceCase dev(c, t);
        AttnResult f64, naive;
        for (int rep = 0; rep < kRepeats; ++rep) {
          dev.run_forward(stream.handle());
          dev.run_backward(stream.handle());
          stream.synchronize();
          dev.download();
          if (rep == 0) {
            f64 = reference_result(c, t, reference::Precision::f64, true);
            naive = reference_result(c, t, reference::Precision::storage, true);
          }
          for (const auto& r : check_results(c, collect(t, true), f64, naive, true))
            if (!r.ok) bad.push_back("repeat " + std::to_string(rep) + ": " + r.line);
        }
      } catch (const std::exception& e) {
        bad.push_back(std::string("exception: ") + e.what());
      }
    });
  for (auto& th : pool) th.join();
  for (int ti = 0; ti < kThreads; ++ti)
    for (const auto& m : failures[std::size_t(ti)]) ADD_FAILURE() << "thread " << ti << ": " << m;
}

}  // namespace
}  // namespace flashpp::test::gpu
