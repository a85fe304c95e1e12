// Host side of the CUDA decode path: picks the compiled kernel (dtype, head
// dim, row tiles), sizes the split-KV workspace, and orders the work on the
// caller's stream: clear status -> append -> (clear split counters) ->
// attention, whose last split block per group merges the partials (or, on
// sm90 with FLASHPP_DECODE_CLUSTER=1, whose clusters merge their splits in
// distributed shared memory). No host
// synchronization and no allocation, so the sequence can be graph-captured.
// On sm90 the append and attention kernels are programmatic dependents of the
// kernel before them (ptx/grid_dependency.cuh): each one's launch overlaps the
// tail of the previous kernel, which matters for batch-1 steps of ~20 us.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <tuple>

#include "cuda/check.hpp"
#include "cuda/decode/append_kernel.cuh"
#include "cuda/decode/decode_args.hpp"
#include "cuda/decode/decode_backend.hpp"
#include "cuda/decode/decode_config.hpp"
#include "flashpp/error.hpp"

namespace flashpp::cuda::decode {

// Instances live in instances/*.cu.
extern template AttentionKernel attention_kernel<__nv_bfloat16, 64, 1, false>();
extern template AttentionKernel attention_kernel<__nv_bfloat16, 64, 2, false>();
extern template AttentionKernel attention_kernel<__nv_bfloat16, 64, 1, true>();
extern template AttentionKernel attention_kernel<__nv_bfloat16, 128, 1, false>();
extern template AttentionKernel attention_kernel<__nv_bfloat16, 128, 2, false>();
extern template AttentionKernel attention_kernel<__nv_bfloat16, 128, 1, true>();
extern template AttentionKernel attention_kernel<__nv_bfloat16, 256, 1, false>();
extern template AttentionKernel attention_kernel<__half, 64, 1, false>();
extern template AttentionKernel attention_kernel<__half, 64, 2, false>();
extern template AttentionKernel attention_kernel<__half, 64, 1, true>();
extern template AttentionKernel attention_kernel<__half, 128, 1, false>();
extern template AttentionKernel attention_kernel<__half, 128, 2, false>();
extern template AttentionKernel attention_kernel<__half, 128, 1, true>();
extern template AttentionKernel attention_kernel<__half, 256, 1, false>();

namespace {

constexpr std::size_t kAlign = 256;
std::size_t align_up(std::size_t x) { return (x + kAlign - 1) / kAlign * kAlign; }

// How a call maps onto blocks.
struct Shape {
  int head_dim = 0;   // compiled
  int row_tiles = 1;  // 16-row tiles per block
  int row_blocks = 1;
  int rows = 0;       // packed rows per kv head
  int block_n = 0;
  bool wide = false;  // the 8-warp variant (decode_config.hpp)
};

// FLASHPP_DECODE_WARPS=4 or 8 forces the variant where it exists (tuning runs);
// unset or anything else lets wide_wanted() decide.
int forced_warps() {
  static const int w = [] {
    const char* e = std::getenv("FLASHPP_DECODE_WARPS");
    return e != nullptr && (std::string(e) == "4" || std::string(e) == "8") ? std::atoi(e) : 0;
  }();
  return w;
}

// Programmatic-launch overlap of consecutive steps on sm90 (DecodeArgs,
// span_prefetch.cuh): keys each block prefetches into L2 before its wait, and
// how many key tiles before its end it lets the next kernel launch, so the next
// kernel's first tiles are read while this grid's last blocks merge. Off by
// default: the same-run A/B of docs/kvcache.md ("Sixth round") found at most
// -1.4% at batch 1 / 16K (21.8 -> 21.5 us with 256 keys, 4 tiles), and 64K
// slower and noisier (the prefetch competes with the running step for HBM).
// FLASHPP_DECODE_PREFETCH=<keys>
// and FLASHPP_DECODE_DEPENDENTS=<tiles, or -1 for right after the wait>
// override them (tuning runs).
constexpr int kPrefetchKeys = 0;
constexpr int kDependentsTilesLeft = -1;

int env_int(const char* name, int fallback) {
  const char* e = std::getenv(name);
  if (e == nullptr || *e == '\0') return fallback;
  char* end = nullptr;
  const long v = std::strtol(e, &end, 10);
  return *end == '\0' && v >= -1 && v <= (1 << 20) ? int(v) : fallback;
}

int prefetch_keys() {
  static const int k = env_int("FLASHPP_DECODE_PREFETCH", kPrefetchKeys);
  return k;
}

int dependents_tiles_left() {
  static const int t = env_int("FLASHPP_DECODE_DEPENDENTS", kDependentsTilesLeft);
  return t;
}

// Split merge through distributed shared memory (cluster_merge.cuh) on sm90:
// FLASHPP_DECODE_CLUSTER=1 turns it on where it applies (2..16 splits, and every
// group's cluster resident at once). Off by default until a same-run A/B on the
// device has measured it (docs/kvcache.md, "Seventh round").
bool cluster_merge_enabled() {
  static const bool on = [] {
    const char* e = std::getenv("FLASHPP_DECODE_CLUSTER");
    return e != nullptr && std::string(e) == "1";
  }();
  return on;
}

// Paged caches with pages smaller than the 4-warp tile: their per-row page
// lookups make the tile loop issue-bound, and 8 warps per block measured 3-5%
// faster there (batch 1 and 16, page 16). Elsewhere the 4-warp kernel is as fast
// or faster, batch 1 included (docs/kvcache.md, fourth round).
bool wide_wanted(const KVCacheParams& p, int head_dim) {
  if (forced_warps() != 0) return forced_warps() == 8;
  return p.paged() && p.page_size < decode_tiles(head_dim).block_n();
}

// pick_variant = false (sizes that do not depend on it, the workspace): never wide.
Shape shape_of(const KVCacheParams& p, bool pick_variant = false) {
  const AttnParams& a = p.attn;
  Shape s;
  s.head_dim = decode_head_dim(std::max(a.head_dim, a.head_dim_v));
  s.rows = a.seqlen_q * a.gqa_ratio;
  s.row_tiles = s.rows > 16 ? max_row_tiles(s.head_dim) : 1;
  s.row_blocks = std::max(1, (s.rows + 16 * s.row_tiles - 1) / (16 * s.row_tiles));
  s.wide = pick_variant && s.row_tiles == 1 && has_wide_variant(s.head_dim) && wide_wanted(p, s.head_dim);
  s.block_n = decode_tiles(s.head_dim, s.wide).block_n();
  return s;
}

template <typename T>
AttentionKernel kernel_for_dtype(int d, int mt, bool wide) {
  if (d == 64)
    return wide ? attention_kernel<T, 64, 1, true>() : mt == 2 ? attention_kernel<T, 64, 2, false>()
                                                                : attention_kernel<T, 64, 1, false>();
  if (d == 128)
    return wide ? attention_kernel<T, 128, 1, true>() : mt == 2 ? attention_kernel<T, 128, 2, false>()
                                                                 : attention_kernel<T, 128, 1, false>();
  return attention_kernel<T, 256, 1, false>();
}

AttentionKernel kernel_for(const KVCacheParams& p, const Shape& s) {
  return p.attn.dtype == ElemType::bf16 ? kernel_for_dtype<__nv_bfloat16>(s.head_dim, s.row_tiles, s.wide)
                                        : kernel_for_dtype<__half>(s.head_dim, s.row_tiles, s.wide);
}

struct DeviceFacts {
  std::string error;
  int sms = 0;
  int major = 0;
};

std::mutex g_mutex;
std::map<int, DeviceFacts> g_devices;
std::map<std::tuple<int, int, int, int>, int> g_blocks_per_sm;  // (device, dtype, hdim, row tiles + 100 if wide)

const DeviceFacts& device_facts(int device) {
  std::lock_guard<std::mutex> lock(g_mutex);
  auto it = g_devices.find(device);
  if (it != g_devices.end()) return it->second;
  DeviceFacts f;
  if (cudaDeviceGetAttribute(&f.sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&f.major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess) {
    cudaGetLastError();
    f.error = "cannot query CUDA device " + std::to_string(device);
  } else if (f.major < 8) {
    f.error = "the decode kernels need compute capability 8.0 or newer (device " + std::to_string(device) + " is " +
              std::to_string(f.major) + ".x)";
  }
  return g_devices.emplace(device, f).first->second;
}

// Opts the kernel in to its shared memory (once per device) and returns its
// blocks per SM.
int prepared_blocks_per_sm(const KVCacheParams& p, const Shape& s, int device) {
  const auto key = std::make_tuple(device, int(p.attn.dtype), s.head_dim, s.row_tiles + (s.wide ? 100 : 0));
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    auto it = g_blocks_per_sm.find(key);
    if (it != g_blocks_per_sm.end()) return it->second;
  }
  DeviceGuard guard(device);
  int blocks = 0;
  check_cuda(kernel_for(p, s).prepare(&blocks), "preparing the decode kernel");
  if (blocks < 1) throw Error(ErrorKind::runtime, "cuda", "the decode kernel does not fit on this device");
  std::lock_guard<std::mutex> lock(g_mutex);
  g_blocks_per_sm[key] = blocks;
  return blocks;
}

// Clusters of num_splits blocks resident at once for this kernel, per device
// (0 where none fits or the device has no clusters).
std::map<std::tuple<int, int, int, int, int>, int> g_cluster_fit;

int resident_clusters(const KVCacheParams& p, const Shape& s, int device) {
  const auto key = std::make_tuple(device, int(p.attn.dtype), s.head_dim, s.row_tiles + (s.wide ? 100 : 0), p.num_splits);
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    auto it = g_cluster_fit.find(key);
    if (it != g_cluster_fit.end()) return it->second;
  }
  DeviceGuard guard(device);
  int fit = 0;
  if (kernel_for(p, s).cluster_fit(p.num_splits, &fit) != cudaSuccess) {
    cudaGetLastError();  // a device or driver without (large) clusters: the L2 merge
    fit = 0;
  }
  std::lock_guard<std::mutex> lock(g_mutex);
  g_cluster_fit[key] = fit;
  return fit;
}

// The cluster size of this call's launch: num_splits when the splits merge in
// a cluster, else 0 (the L2 merge, or one split).
int cluster_splits(const KVCacheParams& p, const Shape& s, int device) {
  if (!cluster_merge_enabled() || p.num_splits < 2 || p.num_splits > kMaxClusterSplits) return 0;
  if (device_facts(device).major < 9) return 0;
  const std::int64_t groups = std::int64_t(p.attn.batch) * p.attn.heads_kv * s.row_blocks;
  // All groups in one wave: a cluster waiting for a free GPC would stall the step.
  return resident_clusters(p, s, device) >= groups ? p.num_splits : 0;
}

std::string kernel_name(const KVCacheParams& p, const Shape& s, int cluster) {
  return std::string("cuda-decode ") + (p.attn.dtype == ElemType::bf16 ? "bf16" : "f16") + " hdim" +
         std::to_string(s.head_dim) + " rows" + std::to_string(16 * s.row_tiles) + (s.wide ? " warps8" : "") + " splits" +
         std::to_string(p.num_splits) + (cluster > 0 ? " cluster-merge" : "") + (p.paged() ? " paged" : " contiguous");
}

std::int64_t part_rows(const KVCacheParams& p) {
  return std::int64_t(p.attn.batch) * p.attn.heads_q * p.attn.seqlen_q;
}

// Blocks per SM the split planner aims for. Measured on an H200 (docs/kvcache.md):
// with one address per tile (contiguous caches, and pages that hold whole
// tiles) one block keeps its SM's share of HBM busy and a second only adds
// splits to merge; pages smaller than a tile cost a page lookup per row, and
// a lone block of those is issue-bound, so it gets a second block beside it.
int streaming_blocks_per_sm(const KVCacheParams& p, const Shape& s, int fit) {
  return p.paged() && p.page_size < s.block_n ? std::min(fit, 2) : 1;
}

// Split-KV scratch, in this order: partial O, partial LSE, arrival counters.
struct SplitScratch {
  std::size_t o_bytes = 0, lse_bytes = 0, counter_bytes = 0;
  std::size_t total() const { return o_bytes + lse_bytes + counter_bytes; }
};

SplitScratch split_scratch(const KVCacheParams& p, const Shape& s) {
  SplitScratch w;
  if (p.num_splits <= 1) return w;
  const std::size_t rows = std::size_t(p.num_splits) * std::size_t(part_rows(p));
  w.o_bytes = align_up(rows * p.attn.head_dim_v * sizeof(float));
  w.lse_bytes = align_up(rows * sizeof(float));
  w.counter_bytes = align_up(std::size_t(p.attn.batch) * p.attn.heads_kv * s.row_blocks * sizeof(int));
  return w;
}

}  // namespace

DecodeChoice select(const KVCacheParams& p, int device) {
  const DeviceFacts& f = device_facts(device);
  if (!f.error.empty()) return {false, "", f.error};
  if (p.attn.dtype != ElemType::f16 && p.attn.dtype != ElemType::bf16)
    return {false, "", "the decode kernels take float16 or bfloat16"};
  const Shape s = shape_of(p, true);
  if (s.head_dim == 0) return {false, "", "head dim above 256"};
  int cluster = 0;
  if (p.num_splits >= 2 && cluster_merge_enabled()) {
    prepared_blocks_per_sm(p, s, device);  // the cluster query needs the shared-memory opt-in
    cluster = cluster_splits(p, s, device);
  }
  return {true, kernel_name(p, s, cluster), ""};
}

int num_splits(const KVCacheParams& p, int device) {
  if (p.num_splits > 0) return std::min(p.num_splits, kMaxSplits);
  const DeviceFacts& f = device_facts(device);
  if (!f.error.empty()) throw Error(ErrorKind::not_supported, "q", f.error);
  const Shape s = shape_of(p, true);
  const std::int64_t blocks = std::int64_t(p.attn.batch) * p.attn.heads_kv * s.row_blocks;
  const int tiles = (p.capacity + s.block_n - 1) / s.block_n;  // the lengths are on the device: plan for capacity
  return choose_num_splits(blocks, tiles, f.sms * streaming_blocks_per_sm(p, s, prepared_blocks_per_sm(p, s, device)),
                           kMaxSplits);
}

std::size_t workspace_bytes(const KVCacheParams& p, int) { return split_scratch(p, shape_of(p)).total(); }

void run(const KVCacheParams& p, void* workspace, std::size_t, void* stream_ptr, int device) {
  const auto stream = static_cast<cudaStream_t>(stream_ptr);
  const Shape s = shape_of(p, true);
  prepared_blocks_per_sm(p, s, device);
  DeviceGuard guard(device);
  if (p.validation_status != nullptr)
    check_cuda(cudaMemsetAsync(p.validation_status, 0, 4 * sizeof(std::int32_t), stream), "clearing validation_status");
  const AttnParams& a = p.attn;
  const bool bf16 = a.dtype == ElemType::bf16;
  const bool dependent = device_facts(device).major >= 9;
  if (p.k_new != nullptr && p.seqlen_new > 0 && a.batch > 0) {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(unsigned(a.batch) * unsigned(p.seqlen_new));
    cfg.blockDim = dim3(128);
    cfg.stream = stream;
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = attr;
    cfg.numAttrs = dependent ? 1 : 0;
    check_cuda(bf16 ? cudaLaunchKernelEx(&cfg, append_kernel<__nv_bfloat16>, p)
                    : cudaLaunchKernelEx(&cfg, append_kernel<__half>, p),
               "launching the decode append kernel");
    check_launch("decode append kernel");
  }
  if (a.batch == 0 || a.seqlen_q == 0) return;

  DecodeArgs args;
  args.p = p;
  args.part_rows = part_rows(p);
  args.rows_per_kv_head = s.rows;
  if (dependent) {
    args.prefetch_keys = std::max(prefetch_keys(), 0);
    args.dependents_tiles_left = dependents_tiles_left();
  }
  const int cluster = cluster_splits(p, s, device);
  args.cluster_splits = cluster;
  if (p.num_splits > 1 && cluster == 0) {
    const SplitScratch w = split_scratch(p, s);
    char* base = static_cast<char*>(workspace);
    args.o_part = reinterpret_cast<float*>(base);
    args.lse_part = reinterpret_cast<float*>(base + w.o_bytes);
    if (p.split_counters != nullptr) {
      // Caller-owned, zero on entry (the API checked it holds batch * heads_q *
      // seqlen_q >= batch * heads_kv * row_blocks entries); the merging blocks
      // leave it zero.
      args.split_arrivals = p.split_counters;
    } else {
      args.split_arrivals = reinterpret_cast<int*>(base + w.o_bytes + w.lse_bytes);
      check_cuda(cudaMemsetAsync(args.split_arrivals, 0, w.counter_bytes, stream), "clearing the split counters");
    }
  }
  const dim3 grid(unsigned(a.batch) * unsigned(a.heads_kv), unsigned(p.num_splits), unsigned(s.row_blocks));
  check_cuda(kernel_for(p, s).launch(args, grid, stream, dependent, cluster), "launching the decode attention kernel");
  check_launch("decode attention kernel");
}

void read_status(const std::int32_t* device_status, std::int32_t host[4], void* stream, int device) {
  DeviceGuard guard(device);
  const auto st = static_cast<cudaStream_t>(stream);
  check_cuda(cudaMemcpyAsync(host, device_status, 4 * sizeof(std::int32_t), cudaMemcpyDeviceToHost, st),
             "reading validation_status");
  check_cuda(cudaStreamSynchronize(st), "reading validation_status");
}

}  // namespace flashpp::cuda::decode
