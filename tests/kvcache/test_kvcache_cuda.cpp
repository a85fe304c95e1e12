// CUDA attention with a KV cache against the fp64 reference and the CPU
// backend: random GPU-sized cases (shuffled page pools, ragged lengths, page
// sizes 1/16/64/256 and odd ones, append + rotary, masks, softcap, split
// counts), edge cases, CUDA-graph replay, and the device-side validation mode.
// Skips with a visible reason where no GPU is present.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <new>
#include <string>
#include <tuple>

#include "kvcache/kvcache_case.hpp"
#include "support/expect.hpp"
#include "support/seed.hpp"

namespace flashpp::test::kv {
namespace {

#define CUDA_OK(x) ASSERT_EQ((x), cudaSuccess) << #x << ": " << cudaGetErrorString(x)

std::string gpu_missing() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    cudaGetLastError();
    return "no CUDA device available";
  }
  return "";
}

#define REQUIRE_GPU()                                  \
  do {                                                 \
    const std::string why = gpu_missing();             \
    if (!why.empty()) GTEST_SKIP() << why;             \
  } while (0)

// Device copies of every tensor of a KVTensors, with the same geometry.
class DeviceTensors {
 public:
  explicit DeviceTensors(KVTensors& t) : t_(t) {
    for (HostTensor* x : t.all()) {
      if (x->ndim() == 0) continue;
      void* d = nullptr;
      if (cudaMalloc(&d, std::max<std::size_t>(x->storage_bytes(), 16)) != cudaSuccess) throw std::bad_alloc();
      cudaMemcpy(d, x->storage(), x->storage_bytes(), cudaMemcpyHostToDevice);
      ptr_[x] = d;
    }
  }
  ~DeviceTensors() {
    for (auto& [x, d] : ptr_) cudaFree(d);
  }
  DeviceTensors(const DeviceTensors&) = delete;
  DeviceTensors& operator=(const DeviceTensors&) = delete;

  TensorView view(const HostTensor& x) const { return x.view_on(ptr_.at(&x), Device::cuda(0)); }
  void* ptr(const HostTensor& x) const { return ptr_.at(&x); }
  KVCacheArgs args(const KVCase& c) const {
    return kv_args(c, t_, [this](const HostTensor& x) { return view(x); });
  }
  // Device storage -> host tensors (outputs and the cache).
  void download() {
    for (HostTensor* x : {&t_.out, &t_.lse, &t_.k_cache, &t_.v_cache, &t_.status})
      if (x->ndim() > 0) cudaMemcpy(x->storage(), ptr_.at(x), x->storage_bytes(), cudaMemcpyDeviceToHost);
  }

 private:
  KVTensors& t_;
  std::map<const HostTensor*, void*> ptr_;
};

// Filled with 0xff bytes: the call must not rely on what the workspace held
// (split partials, arrival counters).
class DeviceWorkspace {
 public:
  explicit DeviceWorkspace(std::size_t bytes) : bytes_(bytes) {
    if (bytes > 0 && cudaMalloc(&data_, bytes) != cudaSuccess) throw std::bad_alloc();
    if (bytes > 0) cudaMemset(data_, 0xff, bytes);
  }
  ~DeviceWorkspace() { cudaFree(data_); }
  Workspace get() const { return {data_, bytes_}; }

 private:
  void* data_ = nullptr;
  std::size_t bytes_;
};

const char* short_name(DType t) { return t == DType::f16 ? "fp16" : "bf16"; }

// One case on the GPU (optionally with device validation), checked against
// the reference, and against the CPU backend on an identical copy.
// counters: caller-owned split counters (KVCacheArgs::split_counters), or null.
void expect_gpu_case(const KVCase& c, std::mt19937_64& rng, bool validate, const TensorView* counters = nullptr) {
  std::mt19937_64 rng_cpu = rng;
  KVTensors t = make_kv_tensors(c, rng);
  KVTensors tc = make_kv_tensors(c, rng_cpu);
  SCOPED_TRACE("case: " + c.describe() + (validate ? " validate_on_device" : "") + "\n" + t.describe());
  const KVExpected e = kv_reference(c, t);

  DeviceTensors dev(t);
  KVCacheArgs a = dev.args(c);
  if (validate) {
    a.validate_on_device = true;
    a.validation_status = dev.view(t.status);
  }
  if (counters != nullptr) a.split_counters = *counters;
  const AttentionOptions o = c.options();
  const Selection sel = select_kvcache(a, o);
  ASSERT_TRUE(sel.ok) << sel.reason;
  const DeviceWorkspace ws(kvcache_workspace_bytes(a, o));
  attention_with_kvcache(a, o, ws.get());
  CUDA_OK(cudaDeviceSynchronize());
  if (validate) {
    EXPECT_NO_THROW(check_kvcache_status(a.validation_status));
  }
  dev.download();

  const KVCheck r = check_kv_results(c, t, e);
  expect_within_tolerance(r.tolerance);
  expect_no_messages(r.problems, "gpu");

  attention_with_kvcache(kv_host_args(c, tc), o);
  const KVCheck rc = check_kv_results(c, tc, e);
  expect_within_tolerance(rc.tolerance);
  // Both backends pass the rule; report how far apart they are.
  testing::Test::RecordProperty("gpu_vs_cpu_out", std::to_string(max_abs_diff(t.out.to_dense(), tc.out.to_dense())));
}

constexpr DType kDtypes[] = {DType::bf16, DType::f16};
constexpr int kRandomCases = 24;

class KVCacheCudaRandom : public testing::TestWithParam<std::tuple<DType, int>> {};

TEST_P(KVCacheCudaRandom, MatchesReferenceAndCpu) {
  REQUIRE_GPU();
  const auto [dtype, index] = GetParam();
  auto rng = make_rng(std::string("KVCacheCudaRandom.") + short_name(dtype), std::uint64_t(index));
  const KVCase c = sample_kv_case(rng, dtype, true);
  expect_gpu_case(c, rng, index % 3 == 0);
}

INSTANTIATE_TEST_SUITE_P(Sampled, KVCacheCudaRandom,
                         testing::Combine(testing::ValuesIn(kDtypes), testing::Range(0, kRandomCases)),
                         [](const auto& info) {
                           return std::string(short_name(std::get<0>(info.param))) + "_" +
                                  std::to_string(std::get<1>(info.param));
                         });

class KVCacheCudaEdge : public testing::TestWithParam<std::tuple<DType, int>> {};

TEST_P(KVCacheCudaEdge, MatchesReferenceAndCpu) {
  REQUIRE_GPU();
  const auto [dtype, index] = GetParam();
  const KVCase c = kv_edge_cases(dtype)[std::size_t(index)];
  auto rng = make_rng("KVCacheCudaEdge." + c.label + short_name(dtype));
  expect_gpu_case(c, rng, false);
}

INSTANTIATE_TEST_SUITE_P(Fixed, KVCacheCudaEdge,
                         testing::Combine(testing::ValuesIn(kDtypes),
                                          testing::Range(0, int(kv_edge_cases(DType::bf16).size()))),
                         [](const auto& info) {
                           return kv_edge_cases(std::get<0>(info.param))[std::size_t(std::get<1>(info.param))].label +
                                  "_" + short_name(std::get<0>(info.param));
                         });

// The decode shapes the benchmark runs, small: 32/8 heads, d = 128, shuffled
// pages of every benchmarked size, ragged lengths, one and four query tokens.
class KVCacheCudaPages : public testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(KVCacheCudaPages, DecodeShapes) {
  REQUIRE_GPU();
  const auto [page, sq] = GetParam();
  auto rng = make_rng("KVCacheCudaPages." + std::to_string(page) + "." + std::to_string(sq));
  KVCase c;
  c.label = "decode_pages";
  c.dtype = DType::bf16;
  c.batch = 5;
  c.seqlen_q = sq;
  c.heads_q = 32;
  c.heads_kv = 8;
  c.head_dim = c.head_dim_v = 128;
  c.paged = true;
  c.page_size = page;
  c.max_pages = (2048 + page - 1) / page;
  c.extra_pages = 7;
  c.seqlen_new = sq;
  c.causal = true;
  c.rotary_dim = 128;
  c.rotary_interleaved = page % 2 == 0;
  for (int b = 0; b < c.batch; ++b)
    c.cache_lens.push_back(std::uniform_int_distribution<int>(0, c.capacity() - sq)(rng));
  expect_gpu_case(c, rng, true);
}

INSTANTIATE_TEST_SUITE_P(PageSizes, KVCacheCudaPages,
                         testing::Combine(testing::Values(1, 16, 64, 256), testing::Values(1, 4)),
                         [](const auto& info) {
                           return "page" + std::to_string(std::get<0>(info.param)) + "_sq" +
                                  std::to_string(std::get<1>(info.param));
                         });

TEST(KVCacheCuda, ExplicitSplitCounts) {
  REQUIRE_GPU();
  for (int splits : {1, 2, 7, 128}) {
    auto rng = make_rng("KVCacheCuda.ExplicitSplitCounts", std::uint64_t(splits));
    KVCase c = sample_kv_case(rng, DType::bf16, true);
    c.num_splits = splits;
    expect_gpu_case(c, rng, false);
  }
}

// Caller-owned split counters, zeroed once and shared by calls of different
// shapes and split counts: every call is right, and leaves them all zero.
TEST(KVCacheCuda, CallerOwnedSplitCounters) {
  REQUIRE_GPU();
  constexpr std::int64_t kCounters = 1 << 16;
  std::int32_t* counters = nullptr;
  CUDA_OK(cudaMalloc(&counters, kCounters * 4));
  CUDA_OK(cudaMemset(counters, 0, kCounters * 4));
  const TensorView view = TensorView::contiguous(counters, DType::i32, {kCounters}, Device::cuda(0));
  for (int round = 0; round < 6; ++round) {
    auto rng = make_rng("KVCacheCuda.CallerOwnedSplitCounters", std::uint64_t(round));
    KVCase c = sample_kv_case(rng, round % 2 ? DType::f16 : DType::bf16, true);
    c.num_splits = round % 3 == 0 ? 0 : round % 3 == 1 ? 3 : 11;
    ASSERT_LE(std::int64_t(c.batch) * c.heads_q * c.seqlen_q, kCounters);
    expect_gpu_case(c, rng, round == 4, &view);
    std::vector<std::int32_t> host(kCounters);
    CUDA_OK(cudaMemcpy(host.data(), counters, kCounters * 4, cudaMemcpyDeviceToHost));
    for (std::int64_t i = 0; i < kCounters; ++i) ASSERT_EQ(host[std::size_t(i)], 0) << "counter " << i << " after round " << round;
  }
  cudaFree(counters);
}

// Spans longer than the page-id window a block stages in shared memory (page
// sizes 1 and 3, one split and a few): the window moves along the span.
TEST(KVCacheCuda, LongSpansSmallPages) {
  REQUIRE_GPU();
  for (int page : {1, 3})
    for (int splits : {1, 3}) {
      auto rng = make_rng("KVCacheCuda.LongSpansSmallPages", std::uint64_t(page * 16 + splits));
      KVCase c;
      c.label = "long_spans";
      c.dtype = DType::bf16;
      c.batch = 2;
      c.heads_q = 8;
      c.heads_kv = 2;
      c.head_dim = c.head_dim_v = 128;
      c.paged = true;
      c.page_size = page;
      c.max_pages = (5000 + page - 1) / page;
      c.extra_pages = 5;
      c.seqlen_new = 1;
      c.causal = true;
      c.num_splits = splits;
      for (int b = 0; b < c.batch; ++b)
        c.cache_lens.push_back(std::uniform_int_distribution<int>(c.capacity() - 400, c.capacity() - 1)(rng));
      expect_gpu_case(c, rng, page == 3);
    }
}

// Captured into a CUDA graph (no host sync, no allocation inside), replayed
// three times: bitwise the same as a direct call, with the planner's split count
// and forced ones (the split arrival counters start over on every replay; split
// count 7 uses caller-owned counters, which the calls leave zero).
class KVCacheCudaGraph : public testing::TestWithParam<int> {};

TEST_P(KVCacheCudaGraph, ReplayMatchesDirectCall) {
  REQUIRE_GPU();
  auto rng = make_rng("KVCacheCuda.GraphReplayMatchesDirectCall", std::uint64_t(GetParam()));
  KVCase c = sample_kv_case(rng, DType::bf16, true);
  c.num_splits = GetParam();
  KVTensors t = make_kv_tensors(c, rng);
  SCOPED_TRACE(c.describe());
  DeviceTensors dev(t);
  KVCacheArgs a = dev.args(c);
  std::int32_t* counters = nullptr;  // odd split parameters: caller-owned counters
  if (GetParam() % 2 == 1) {
    const std::int64_t n = std::int64_t(c.batch) * c.heads_q * c.seqlen_q;
    CUDA_OK(cudaMalloc(&counters, std::size_t(n) * 4));
    CUDA_OK(cudaMemset(counters, 0, std::size_t(n) * 4));
    a.split_counters = TensorView::contiguous(counters, DType::i32, {n}, Device::cuda(0));
  }
  AttentionOptions o = c.options();
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  o.stream = stream;
  const DeviceWorkspace ws(kvcache_workspace_bytes(a, o));
  attention_with_kvcache(a, o, ws.get());  // direct (also opts kernels in to their shared memory)
  CUDA_OK(cudaStreamSynchronize(stream));
  dev.download();
  const std::vector<double> direct = t.out.to_dense();

  cudaGraph_t graph;
  CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  attention_with_kvcache(a, o, ws.get());
  CUDA_OK(cudaStreamEndCapture(stream, &graph));
  cudaGraphExec_t exec;
  CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
  CUDA_OK(cudaMemset(dev.ptr(t.out), 0xff, t.out.storage_bytes()));
  for (int i = 0; i < 3; ++i) CUDA_OK(cudaGraphLaunch(exec, stream));
  CUDA_OK(cudaStreamSynchronize(stream));
  dev.download();
  const std::vector<double> replayed = t.out.to_dense();
  ASSERT_EQ(replayed.size(), direct.size());
  for (std::size_t i = 0; i < replayed.size(); ++i) ASSERT_EQ(replayed[i], direct[i]) << "element " << i;
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
  cudaFree(counters);
}

INSTANTIATE_TEST_SUITE_P(Splits, KVCacheCudaGraph, testing::Values(0, 5, 7),
                         [](const auto& info) { return "splits" + std::to_string(info.param); });

// Out-of-range device tables with validate_on_device: no crash, the fault is
// reported through the status words, the bad sequences give zero rows and
// append nothing, and the good sequence is still right.
TEST(KVCacheCuda, DeviceValidationReportsBadTables) {
  REQUIRE_GPU();
  auto rng = make_rng("KVCacheCuda.DeviceValidationReportsBadTables");
  KVCase c;
  c.label = "bad_tables";
  c.dtype = DType::bf16;
  c.batch = 3;
  c.heads_q = 8;
  c.heads_kv = 2;
  c.head_dim = c.head_dim_v = 128;
  c.paged = true;
  c.page_size = 16;
  c.max_pages = 8;
  c.cache_lens = {40, 50, 60};
  c.seqlen_new = 1;
  KVTensors t = make_kv_tensors(c, rng);
  const KVExpected e = kv_reference(c, t);
  const std::vector<double> k_before = t.k_cache.to_dense();
  DeviceTensors dev(t);
  // Sequence 0: a page outside the pool; sequence 1: more tokens than fit.
  const std::int32_t bad_page = 1 << 20, bad_len = c.capacity() + 5;
  CUDA_OK(cudaMemcpy(static_cast<std::int32_t*>(dev.view(t.block_table).data) + 1, &bad_page, 4, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(static_cast<std::int32_t*>(dev.view(t.cache_seqlens).data) + 1, &bad_len, 4, cudaMemcpyHostToDevice));
  KVCacheArgs a = dev.args(c);
  a.validate_on_device = true;
  a.validation_status = dev.view(t.status);
  const AttentionOptions o = c.options();
  const DeviceWorkspace ws(kvcache_workspace_bytes(a, o));
  attention_with_kvcache(a, o, ws.get());
  CUDA_OK(cudaDeviceSynchronize());
  try {
    check_kvcache_status(a.validation_status);
    ADD_FAILURE() << "bad tables were not reported";
  } catch (const Error& err) {
    EXPECT_TRUE(err.argument() == "block_table" || err.argument() == "cache_seqlens") << err.what();
  }
  dev.download();
  const auto out = t.out.to_dense();
  const std::size_t row = std::size_t(c.heads_q) * c.head_dim_v;  // one sequence (seqlen_q = 1)
  for (std::size_t i = 0; i < 2 * row; ++i) ASSERT_EQ(out[i], 0.0) << "bad sequence output element " << i;
  std::vector<double> good(out.begin() + 2 * row, out.end()), want(e.out_f64.begin() + 2 * row, e.out_f64.end()),
      naive(e.out_naive.begin() + 2 * row, e.out_naive.end());
  expect_within_tolerance({check_tolerance("out(seq 2)", c.describe(), c.dtype, good, want, naive)});
  // Only sequence 2 appended (one slot per kv head).
  const std::vector<double> k_after = t.k_cache.to_dense();
  int appended = 0;
  for (std::size_t i = 0; i < k_after.size(); ++i) appended += k_after[i] != k_before[i];
  EXPECT_LE(appended, c.heads_kv * c.head_dim) << "more than one sequence's slot was written";
}

// With FLASHPP_DECODE_CLUSTER=1 on sm90 (the "cluster." copy of this binary's
// tests), the splits of batch-1 decode shapes merge in thread-block clusters:
// the selection must say so (where the clusters fit), and the results pass the
// same checks. Split counts
// 2..16, splits that see no key, masks, append + rotary, paged caches, head dims
// 64/128/256, several query tokens.
TEST(KVCacheCuda, ClusterMergeDecodeShapes) {
  REQUIRE_GPU();
  const char* env = std::getenv("FLASHPP_DECODE_CLUSTER");
  if (env == nullptr || std::string(env) != "1") GTEST_SKIP() << "runs with FLASHPP_DECODE_CLUSTER=1 (the cluster. tests)";
  cudaDeviceProp prop;
  CUDA_OK(cudaGetDeviceProperties(&prop, 0));
  if (prop.major != 9) GTEST_SKIP() << "the cluster merge runs on sm_90 GPUs only";
  struct Shape {
    const char* label;
    int head_dim, seqlen_q, splits, cache_len, page_size;  // page_size 0: contiguous
    bool causal, append;
    std::int64_t window_left;
  };
  const Shape shapes[] = {
      {"d128_splits16", 128, 1, 16, 2900, 0, false, false, -1},
      {"d128_splits2", 128, 1, 2, 1500, 0, false, false, -1},
      {"d128_splits5_page64", 128, 1, 5, 2000, 64, false, false, -1},
      {"d128_splits16_empty_splits", 128, 1, 16, 70, 0, false, false, -1},
      {"d128_sq4_causal_append", 128, 4, 8, 1200, 0, true, true, -1},
      {"d128_window", 128, 1, 12, 2500, 16, true, false, 300},
      {"d64_splits16", 64, 2, 16, 3000, 0, false, false, -1},
      {"d256_splits9", 256, 1, 9, 1800, 256, false, false, -1},
  };
  int index = 0;
  for (const Shape& sh : shapes) {
    for (DType dt : kDtypes) {
      SCOPED_TRACE(std::string(sh.label) + " " + short_name(dt));
      auto rng = make_rng("KVCacheCuda.ClusterMergeDecodeShapes", std::uint64_t(index++));
      KVCase c;
      c.label = sh.label;
      c.dtype = dt;
      c.batch = 1;
      c.heads_q = 32;
      c.heads_kv = 8;
      c.head_dim = c.head_dim_v = sh.head_dim;
      c.seqlen_q = sh.seqlen_q;
      c.causal = sh.causal;
      c.window_left = sh.window_left;
      if (sh.window_left >= 0) c.window_right = 0;
      c.num_splits = sh.splits;
      const int slots = sh.cache_len + 64;
      if (sh.page_size > 0) {
        c.paged = true;
        c.page_size = sh.page_size;
        c.max_pages = (slots + sh.page_size - 1) / sh.page_size;
        c.extra_pages = 3;
      } else {
        c.seqlen_cache = slots;
      }
      c.cache_lens = {sh.cache_len};
      if (sh.append) {
        c.seqlen_new = sh.seqlen_q;
        c.rotary_dim = sh.head_dim / 2;
      }
      KVTensors t = make_kv_tensors(c, rng);
      DeviceTensors dev(t);
      const Selection sel = select_kvcache(dev.args(c), c.options());
      ASSERT_TRUE(sel.ok) << sel.reason;
      // Eight clusters of up to 8 blocks (one per SM) fit on any sm90 part; larger
      // clusters need that many free SMs in one GPC, which the part may not have for
      // all eight groups at once (the launcher then keeps the L2 merge; reported).
      const bool cluster = sel.backend.find("cluster-merge") != std::string::npos;
      if (sh.splits <= 8) {
        EXPECT_TRUE(cluster) << sel.backend;
      }
      testing::Test::RecordProperty(std::string("merge_") + sh.label, cluster ? "cluster" : "L2");
      expect_gpu_case(c, rng, index % 3 == 0);
    }
  }
}

TEST(KVCacheCuda, SelectNamesTheKernel) {
  REQUIRE_GPU();
  auto rng = make_rng("KVCacheCuda.SelectNamesTheKernel");
  const KVCase c = sample_kv_case(rng, DType::f16, true);
  KVTensors t = make_kv_tensors(c, rng);
  DeviceTensors dev(t);
  const Selection s = select_kvcache(dev.args(c), c.options());
  ASSERT_TRUE(s.ok) << s.reason;
  EXPECT_NE(s.backend.find("cuda-decode"), std::string::npos) << s.backend;
}

}  // namespace
}  // namespace flashpp::test::kv
