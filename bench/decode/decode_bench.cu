// Decode benchmark: attention_with_kvcache for one new query token (and a
// few speculative ones) over long caches, replayed through CUDA graphs, as
// KV bytes read per second. Shapes: 32 query / 8 kv heads, head dim 128,
// bf16; batch 1/16/64; cache 4K/16K/64K; contiguous and paged (16/64/256,
// pages shuffled through the pool). Small problems rotate over several cache
// copies so the L2 (60 MB on an H200) never holds the working set.
//
// Prints one JSON object per line (stdout) and a table (stderr):
//   flashpp_decode_bench [--quick] [--no-sweep] [--only B,LEN,PAGE,SPLITS] [--clear-counters] > ours.jsonl
// --no-sweep skips the forced split counts measured beside each planner pick;
// --only runs one configuration (page 0: contiguous, splits 0: the planner's),
// e.g. under a profiler. Calls pass caller-owned split counters, zeroed once,
// as a serving engine would (KVCacheArgs::split_counters); --clear-counters
// leaves them to the workspace, cleared by every call (one memset node more).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "cuda_check.cuh"
#include "flashpp/kvcache.hpp"
#include "graph_timing.cuh"

namespace {

constexpr int kHeadsQ = 32, kHeadsKV = 8, kDim = 128;
constexpr std::size_t kRotateBytes = std::size_t(512) << 20;  // keep per-replay traffic well above L2
constexpr std::int64_t kCounters = 64 * 4 * kHeadsQ;            // batch * seqlen_q * heads_q at most
std::int32_t* g_counters = nullptr;                            // null: --clear-counters

// Random bf16 in about [-2, 2) from a hash of the index: never zeros in bulk.
__global__ void fill_random(std::uint16_t* x, std::size_t n, std::uint32_t seed) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n; i += std::size_t(gridDim.x) * blockDim.x) {
    std::uint32_t h = std::uint32_t(i) * 2654435761u ^ seed ^ std::uint32_t(i >> 32) * 40503u;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    const float f = (float(h & 0xffffff) / 16777216.f - 0.5f) * 4.f;
    std::uint32_t u;
    std::memcpy(&u, &f, 4);
    x[i] = std::uint16_t(u >> 16);
  }
}

void fill(void* p, std::size_t elems, std::uint32_t seed) {
  fill_random<<<4096, 256>>>(static_cast<std::uint16_t*>(p), elems, seed);
  CHECK(cudaGetLastError());
}

flashpp::TensorView view(void* d, flashpp::DType t, std::initializer_list<std::int64_t> shape) {
  return flashpp::TensorView::contiguous(d, t, shape, flashpp::Device::cuda(0));
}

struct Config {
  int batch, len, page, seqlen_q;  // page 0: contiguous cache
  int num_splits;                  // 0: auto
  bool validate;
};

struct Result {
  double us;  // median per call
  int splits;
  double tbps;
  std::string kernel;  // what select_kvcache names (splits, merge path)
};

struct Pools {
  void* k = nullptr;
  void* v = nullptr;
  std::size_t elems = 0;  // per pool
};

Result run_config(const Config& c, const Pools& pools, void* ws, std::size_t ws_bytes, void* q, void* out,
                  std::int32_t* seqlens, std::int32_t* tables, std::int32_t* status, cudaStream_t stream) {
  const std::size_t per_call = std::size_t(c.batch) * c.len * kHeadsKV * kDim;  // elements of K (and of V)
  const std::size_t kv_bytes = per_call * 2 * 2;
  int copies = int(std::min<std::size_t>(pools.elems / per_call, (kRotateBytes + kv_bytes - 1) / kv_bytes));
  copies = std::max(copies, 1);
  const int calls = std::max(copies, 8);

  std::vector<std::int32_t> lens(std::size_t(c.batch), c.len);
  CHECK(cudaMemcpy(seqlens, lens.data(), lens.size() * 4, cudaMemcpyHostToDevice));
  const int pages_per_seq = c.page ? c.len / c.page : 0;
  std::mt19937 rng(1234u + c.batch * 7 + c.len + c.page);
  if (c.page) {
    // Each copy's pages are a shuffled slice of the pool.
    std::vector<std::int32_t> table(std::size_t(c.batch) * pages_per_seq);
    for (int r = 0; r < copies; ++r) {
      std::iota(table.begin(), table.end(), 0);
      std::shuffle(table.begin(), table.end(), rng);
      CHECK(cudaMemcpy(tables + std::size_t(r) * table.size(), table.data(), table.size() * 4, cudaMemcpyHostToDevice));
    }
  }

  std::vector<flashpp::KVCacheArgs> args(static_cast<std::size_t>(copies));
  for (int r = 0; r < copies; ++r) {
    auto* kb = static_cast<std::uint16_t*>(pools.k) + std::size_t(r) * per_call;
    auto* vb = static_cast<std::uint16_t*>(pools.v) + std::size_t(r) * per_call;
    flashpp::KVCacheArgs& a = args[std::size_t(r)];
    a.q = view(q, flashpp::DType::bf16, {c.batch, c.seqlen_q, kHeadsQ, kDim});
    a.out = view(out, flashpp::DType::bf16, {c.batch, c.seqlen_q, kHeadsQ, kDim});
    a.cache_seqlens = view(seqlens, flashpp::DType::i32, {c.batch});
    if (c.page) {
      const std::int64_t pool_pages = std::int64_t(c.batch) * pages_per_seq;
      a.k_cache = view(kb, flashpp::DType::bf16, {pool_pages, c.page, kHeadsKV, kDim});
      a.v_cache = view(vb, flashpp::DType::bf16, {pool_pages, c.page, kHeadsKV, kDim});
      a.block_table = view(tables + std::size_t(r) * pool_pages, flashpp::DType::i32, {c.batch, pages_per_seq});
    } else {
      a.k_cache = view(kb, flashpp::DType::bf16, {c.batch, c.len, kHeadsKV, kDim});
      a.v_cache = view(vb, flashpp::DType::bf16, {c.batch, c.len, kHeadsKV, kDim});
    }
    a.num_splits = c.num_splits;
    if (g_counters != nullptr) a.split_counters = view(g_counters, flashpp::DType::i32, {kCounters});
    if (c.validate) {
      a.validate_on_device = true;
      a.validation_status = view(status, flashpp::DType::i32, {4});
    }
  }
  flashpp::AttentionOptions o;
  o.causal = true;
  o.stream = stream;
  const int splits = flashpp::kvcache_num_splits(args[0], o);
  const std::size_t need = flashpp::kvcache_workspace_bytes(args[0], o);
  if (need > ws_bytes) {
    std::fprintf(stderr, "workspace too small (%zu > %zu)\n", need, ws_bytes);
    std::exit(1);
  }
  const flashpp::Workspace w{ws, ws_bytes};
  for (const auto& a : args) flashpp::attention_with_kvcache(a, o, w);  // warm up, opt in
  CHECK(cudaStreamSynchronize(stream));

  const double us = median(graph_call_times_us(stream, calls, [&](int i) {
    flashpp::attention_with_kvcache(args[std::size_t(i % copies)], o, w);
  }));
  if (c.validate) flashpp::check_kvcache_status(args[0].validation_status, stream);
  return {us, splits, double(kv_bytes) / (us * 1e-6) / 1e12, flashpp::select_kvcache(args[0], o).backend};
}

double copy_bandwidth(void* a, void* b, std::size_t bytes) {
  cudaEvent_t e0, e1;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));
  CHECK(cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice));
  std::vector<float> t;
  for (int i = 0; i < 5; ++i) {
    CHECK(cudaEventRecord(e0));
    CHECK(cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice));
    CHECK(cudaEventRecord(e1));
    CHECK(cudaEventSynchronize(e1));
    float ms;
    CHECK(cudaEventElapsedTime(&ms, e0, e1));
    t.push_back(ms);
  }
  std::sort(t.begin(), t.end());
  return 2.0 * bytes / (t[2] * 1e-3) / 1e12;  // read + write
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false, sweep_splits = true, clear_counters = false;
  Config only{0, 0, 0, 1, 0, false};
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) quick = true;
    if (std::strcmp(argv[i], "--no-sweep") == 0) sweep_splits = false;
    if (std::strcmp(argv[i], "--clear-counters") == 0) clear_counters = true;
    if (std::strcmp(argv[i], "--only") == 0 && i + 1 < argc) {
      if (std::sscanf(argv[++i], "%d,%d,%d,%d", &only.batch, &only.len, &only.page, &only.num_splits) != 4 ||
          only.batch < 1 || only.batch > 64 || only.len < 1 || only.len > 65536 || only.page < 0 ||
          (only.page > 0 && only.page < 16) ||
          (only.page > 0 && only.len % only.page != 0) || only.num_splits < 0) {
        std::fprintf(stderr, "--only: expected B,LEN,PAGE,SPLITS with B <= 64, LEN <= 65536, PAGE 0 or >= 16, LEN %% PAGE == 0\n");
        return 2;
      }
      sweep_splits = false;
    }
  }
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  Pools pools;
  pools.elems = std::size_t(64) * 65536 * kHeadsKV * kDim;
  CHECK(cudaMalloc(&pools.k, pools.elems * 2));
  CHECK(cudaMalloc(&pools.v, pools.elems * 2));
  fill(pools.k, pools.elems, 1u);
  fill(pools.v, pools.elems, 2u);
  const double copy_tbps = copy_bandwidth(pools.k, pools.v, std::size_t(4) << 30);
  fill(pools.v, pools.elems, 2u);

  void *q, *out, *ws;
  std::int32_t *seqlens, *tables, *status;
  const std::size_t q_elems = std::size_t(64) * 4 * kHeadsQ * kDim;
  CHECK(cudaMalloc(&q, q_elems * 2));
  CHECK(cudaMalloc(&out, q_elems * 2));
  fill(q, q_elems, 3u);
  CHECK(cudaMalloc(&seqlens, 64 * 4));
  CHECK(cudaMalloc(&status, 16));
  const std::size_t table_entries = pools.elems / (kHeadsKV * kDim);  // one per slot: enough for page size 1
  CHECK(cudaMalloc(&tables, table_entries * 4 / 16 + 4096));          // smallest benchmarked page is 16
  const std::size_t ws_bytes = std::size_t(256) << 20;
  CHECK(cudaMalloc(&ws, ws_bytes));
  cudaStream_t stream;
  CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  if (!clear_counters) {
    CHECK(cudaMalloc(&g_counters, kCounters * 4));
    CHECK(cudaMemset(g_counters, 0, kCounters * 4));
  }

  std::printf("{\"kind\":\"device\",\"gpu\":\"%s\",\"sms\":%d,\"copy_tbps\":%.4f}\n", prop.name,
              prop.multiProcessorCount, copy_tbps);
  std::fprintf(stderr, "device copy (read+write): %.3f TB/s\n", copy_tbps);
  std::fprintf(stderr, "%5s %6s %5s %3s %6s | %9s %7s | best split sweep\n", "batch", "cache", "page", "sq", "splits",
               "us", "TB/s");

  std::vector<Config> configs;
  if (only.batch > 0) configs.push_back(only);
  const std::vector<int> batches = quick ? std::vector<int>{1, 64} : std::vector<int>{1, 16, 64};
  const std::vector<int> lens = quick ? std::vector<int>{16384} : std::vector<int>{4096, 16384, 65536};
  if (only.batch == 0) {
    for (int b : batches)
      for (int l : lens)
        for (int page : {0, 16, 64, 256}) configs.push_back({b, l, page, 1, 0, false});
    configs.push_back({16, 16384, 64, 4, 0, false});  // speculative: 4 query tokens
    configs.push_back({16, 16384, 64, 1, 0, true});   // device-side validation on
    configs.push_back({1, 16384, 64, 1, 0, true});
  }

  for (const Config& c : configs) {
    const Result r = run_config(c, pools, ws, ws_bytes, q, out, seqlens, tables, status, stream);
    // Split sweep: what the heuristic left on the table.
    Result best = r;
    int best_splits = r.splits;
    std::string sweep;
    // Batch 1 needs many splits, batch >= 16 a few at most.
    const std::vector<int> counts = c.batch == 1 ? std::vector<int>{4, 8, 12, 16, 24, 32, 48, 64}
                                                 : std::vector<int>{1, 2, 3, 4, 8};
    if (sweep_splits && !c.validate && c.seqlen_q == 1)
      for (int s : counts) {
        if (s == r.splits || s * 128 > c.len) continue;
        Config cs = c;
        cs.num_splits = s;
        const Result rs = run_config(cs, pools, ws, ws_bytes, q, out, seqlens, tables, status, stream);
        sweep += (sweep.empty() ? "" : ",") + std::string("{\"splits\":") + std::to_string(s) +
                 ",\"us\":" + std::to_string(rs.us) + ",\"tbps\":" + std::to_string(rs.tbps) + "}";
        if (rs.tbps > best.tbps) {
          best = rs;
          best_splits = s;
        }
      }
    std::printf(
        "{\"kind\":\"flashpp\",\"batch\":%d,\"cache_len\":%d,\"page_size\":%d,\"seqlen_q\":%d,\"validate\":%s,"
        "\"splits\":%d,\"us\":%.3f,\"kv_tbps\":%.4f,\"pct_copy_4_27\":%.1f,\"best_splits\":%d,\"best_tbps\":%.4f,"
        "\"counters\":\"%s\",\"kernel\":\"%s\",\"sweep\":[%s]}\n",
        c.batch, c.len, c.page, c.seqlen_q, c.validate ? "true" : "false", r.splits, r.us, r.tbps, 100 * r.tbps / 4.27,
        best_splits, best.tbps, clear_counters ? "cleared" : "caller", r.kernel.c_str(), sweep.c_str());
    std::fflush(stdout);
    std::fprintf(stderr, "%5d %6d %5d %3d %6d | %9.2f %7.3f | %d -> %.3f | %s\n", c.batch, c.len, c.page, c.seqlen_q,
                 r.splits, r.us, r.tbps, best_splits, best.tbps, r.kernel.c_str());
  }
  return 0;
}
