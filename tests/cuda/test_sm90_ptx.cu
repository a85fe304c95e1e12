// Device unit tests of the Hopper PTX wrappers (src/cuda/ptx/{wgmma,mbarrier,tma,
// warpgroup,stmatrix}.cuh) against host computations: TMA tile loads with the 128-byte
// swizzle completing on an mbarrier, wgmma SS (both operands K-major) and RS (A from
// registers, B MN-major through the transpose bit) read through sw128 descriptors,
// stmatrix staging of accumulator rows and TMA stores clipped at the tensor's end,
// setmaxnreg with a named-barrier hand-off between warpgroups, the L2 bulk
// prefetch (prefetched lines never hide later writes), and clusters (rank,
// barrier, loads from a neighbour block's shared memory). Skip unless the GPU is sm_90.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "common/half.hpp"
#include "cuda/common/element.cuh"
#include "cuda/ptx/cluster.cuh"
#include "cuda/ptx/math.cuh"
#include "cuda/ptx/mbarrier.cuh"
#include "cuda/ptx/prefetch.cuh"
#include "cuda/ptx/tma.cuh"
#include "cuda/ptx/warpgroup.cuh"
#include "cuda/ptx/wgmma.cuh"
#include "cuda/sm90/fwd_epilogue.cuh"
#include "cuda/sm90/tensor_maps.hpp"
#include "gpu_support.hpp"
#include "support/seed.hpp"

namespace flashpp::test::gpu {
namespace {

using namespace flashpp::cuda;

#define CUDA_OK(x) ASSERT_EQ((x), cudaSuccess) << #x << ": " << cudaGetErrorString(cudaGetLastError())

bool is_sm90() {
  if (!gpu_unavailable_reason().empty()) return false;
  cudaDeviceProp prop;
  return cudaGetDeviceProperties(&prop, 0) == cudaSuccess && prop.major == 9;
}

#define REQUIRE_SM90()                                                       \
  do {                                                                       \
    FLASHPP_REQUIRE_GPU();                                                   \
    if (!is_sm90()) GTEST_SKIP() << "the Hopper PTX tests need an sm_90 GPU"; \
  } while (0)

// Row-major bf16 matrix (rows x cols) with small integers / 8, exact in bf16 and in
// fp32 sums, so products compare exactly.
std::vector<std::uint16_t> exact_matrix(std::mt19937_64& rng, int rows, int cols, std::vector<float>& as_float) {
  std::uniform_int_distribution<int> u(-8, 8);
  std::vector<std::uint16_t> m(std::size_t(rows) * cols);
  as_float.resize(m.size());
  for (std::size_t i = 0; i < m.size(); ++i) {
    as_float[i] = float(u(rng)) / 8.f;
    m[i] = float_to_bf16(as_float[i]);
  }
  return m;
}

// Tensor maps through the kernels' own encoder: "q" is a (rows_a x 64) matrix with
// box rows_a, "k" a (rows_b x 64) matrix with box rows_b, "v" a (rows_b x cols_v) one.
sm90::FwdMaps maps_for(const void* a, int rows_a, const void* b, int rows_b, const void* v, int cols_v) {
  AttnParams p;
  p.dtype = ElemType::bf16;
  p.q = a;
  p.k = b;
  p.v = v;
  p.batch = 1;
  p.heads_q = p.heads_kv = 1;
  p.head_dim = 64;
  p.head_dim_v = cols_v;
  p.seqlen_q = rows_a;
  p.seqlen_k = rows_b;
  p.q_row_stride = 64;
  p.k_row_stride = 64;
  p.v_row_stride = cols_v;
  p.q_head_stride = p.q_batch_stride = 64 * rows_a;
  p.k_head_stride = p.k_batch_stride = 64 * rows_b;
  p.v_head_stride = p.v_batch_stride = std::int64_t(cols_v) * rows_b;
  return sm90::encode_fwd_maps(p, rows_a, rows_b);
}

// Downloads the rows x cols fp32 result at dout and compares it with the product
// ref(i, j) computed here in fp32. The inputs are exact in bf16 and every partial sum
// is exact in fp32, so the rule is equality; the first five misses are named.
template <typename Ref>
void expect_exact_product(const DeviceBuffer& dout, int rows, int cols, Ref ref, const char* what) {
  std::vector<float> got(std::size_t(rows) * cols);
  dout.download(got.data(), got.size() * 4);
  int bad = 0;
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < cols; ++j) {
      const float want = ref(i, j);
      if (got[std::size_t(i) * cols + j] != want && bad++ < 5)
        ADD_FAILURE() << what << "[" << i << "][" << j << "] = " << got[std::size_t(i) * cols + j] << ", expected "
                      << want;
    }
  EXPECT_EQ(bad, 0);
}

// The TMA test kernels' shared memory: a base aligned to 1024 bytes (the 128-byte
// swizzle's atom) and one mbarrier at bar_offset from it, initialized for one arrival
// and visible to every thread of the block on return.
struct TileSmem {
  std::uint32_t base, bar;
};
#if FLASHPP_SM90_ENABLED
__device__ TileSmem tile_smem_with_barrier(unsigned char* smem_raw, std::uint32_t bar_offset) {
  const std::uint32_t base = (ptx::smem_u32(smem_raw) + 1023u) & ~1023u;
  const TileSmem t{base, base + bar_offset};
  if (threadIdx.x == 0) {
    ptx::mbarrier_init(t.bar, 1);
    ptx::mbarrier_init_fence();
  }
  __syncthreads();
  return t;
}

// Writes a warpgroup's m64nN fp32 accumulator (R = N / 2 registers per thread: rows
// 16 warp + g (+ 8), columns 8j + 2t (+ 1)) into out, row-major with `stride`
// columns, from column col0 on.
template <int R>
__device__ void store_accumulator(const float (&d)[R], float* out, int stride, int col0 = 0) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  for (int j = 0; j < R / 4; ++j)
    for (int e = 0; e < 4; ++e) {
      const int row = warp * 16 + g + 8 * (e / 2), col = col0 + 8 * j + 2 * t + (e % 2);
      out[row * stride + col] = d[4 * j + e];
    }
}
#endif

// ---------------- TMA + mbarrier + wgmma SS ----------------
// D (64 x 64) = A (64 x 64) * B^T with B stored (64 x 64) row-major (K-major as the
// B operand): S = Q K^T of the forward. Then D is written row-major as floats.
__global__ void __launch_bounds__(128) wgmma_ss_kernel(const __grid_constant__ sm90::FwdMaps maps, float* out) {
#if FLASHPP_SM90_ENABLED
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const TileSmem sm = tile_smem_with_barrier(smem_raw, 2 * 64 * 128);
  const std::uint32_t a_s = sm.base, b_s = sm.base + 64 * 128, bar = sm.bar;
  if (threadIdx.x == 0) {
    ptx::mbarrier_arrive_expect_tx(bar, 2 * 64 * 128);
    ptx::tma_load_4d(a_s, &maps.q, bar, 0, 0, 0, 0);
    ptx::tma_load_4d(b_s, &maps.k, bar, 0, 0, 0, 0);
  }
  ptx::mbarrier_wait(bar, 0);
  float d[32];
  for (int i = 0; i < 32; ++i) d[i] = 0.f;
  ptx::wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) {
    const std::uint64_t da = ptx::sw128_desc(a_s + kk * 32, 16, 1024);
    const std::uint64_t db = ptx::sw128_desc(b_s + kk * 32, 16, 1024);
    ptx::Wgmma<__nv_bfloat16, 64>::ss<0, 0>(d, da, db, 1);
  }
  ptx::wgmma_commit();
  ptx::wgmma_wait<0>();
  ptx::fence_registers(d);
  store_accumulator(d, out, 64);
#endif
}

TEST(Sm90Ptx, TmaSwizzledLoadAndWgmmaSS) {
  REQUIRE_SM90();
  std::mt19937_64 rng = make_rng(::testing::UnitTest::GetInstance()->current_test_info()->name());
  std::vector<float> af, bf;
  const auto a = exact_matrix(rng, 64, 64, af);
  const auto b = exact_matrix(rng, 64, 64, bf);
  DeviceBuffer da(a.size() * 2), db(b.size() * 2), dout(64 * 64 * 4);
  da.upload(a.data(), a.size() * 2);
  db.upload(b.data(), b.size() * 2);
  const sm90::FwdMaps maps = maps_for(da.get(), 64, db.get(), 64, db.get(), 64);
  const int smem = 1024 + 2 * 64 * 128 + 64;
  CUDA_OK(cudaFuncSetAttribute(wgmma_ss_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  wgmma_ss_kernel<<<1, 128, smem>>>(maps, static_cast<float*>(dout.get()));
  CUDA_OK(cudaDeviceSynchronize());
  expect_exact_product(
      dout, 64, 64,
      [&](int i, int j) {
        float ref = 0.f;
        for (int k = 0; k < 64; ++k) ref += af[i * 64 + k] * bf[j * 64 + k];
        return ref;
      },
      "D");
}

// ---------------- wgmma SS with both operands transposed (MN-major) ----------------
// The Hopper backward's dQ = dS K: D (64 x 64) = A (64 x 64) * B (64 x 64) with A kept as
// A^T (rows = k, 128-byte rows of 64 m) written by the threads themselves through the
// 128-byte swizzle (chunk j of row r at chunk j ^ (r % 8)), then made visible to the
// async proxy, and B loaded by TMA as rows of k (row-major k x n).
__global__ void __launch_bounds__(128) wgmma_ss_transposed_kernel(const __grid_constant__ sm90::FwdMaps maps,
                                                                  const float* at, float* out, bool halves) {
#if FLASHPP_SM90_ENABLED
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const TileSmem sm = tile_smem_with_barrier(smem_raw, 2 * 64 * 128);
  const std::uint32_t a_s = sm.base, b_s = sm.base + 64 * 128, bar = sm.bar;
  if (threadIdx.x == 0) {
    ptx::mbarrier_arrive_expect_tx(bar, 64 * 128);
    ptx::tma_load_4d(b_s, &maps.k, bar, 0, 0, 0, 0);
  }
  // A^T: thread t writes 32-bit pairs of rows; element (k, m) at byte 2 m of row k.
  for (int i = int(threadIdx.x); i < 64 * 32; i += 128) {
    const int r = i / 32, pair = i % 32, j = pair / 4, w = pair % 4;
    const std::uint32_t v = Element<__nv_bfloat16>::pack(at[r * 64 + 2 * pair], at[r * 64 + 2 * pair + 1]);
    const std::uint32_t addr = a_s + r * 128 + ((j ^ (r & 7)) << 4) + 4 * w;
    asm volatile("st.shared.u32 [%0], %1;\n" ::"r"(addr), "r"(v) : "memory");
  }
  ptx::fence_proxy_async_smem();
  __syncthreads();
  ptx::mbarrier_wait(bar, 0);
  if (halves) {
    // Two m64n32 products, B read from column 32 h on: its descriptor starts 64 bytes
    // into the swizzled rows (the Hopper backward's split of dQ by columns).
    for (int h = 0; h < 2; ++h) {
      float d[16];
      ptx::wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < 4; ++kk)
        ptx::Wgmma<__nv_bfloat16, 32>::ss<1, 1>(d, ptx::sw128_desc(a_s + kk * 2048, 64 * 128, 1024),
                                                 ptx::sw128_desc(b_s + 64 * h + kk * 2048, 64 * 128, 1024),
                                                 kk > 0 ? 1 : 0);
      ptx::wgmma_commit();
      ptx::wgmma_wait<0>();
      ptx::fence_registers(d);
      store_accumulator(d, out, 64, 32 * h);
    }
    return;
  }
  float d[32];
  ptx::wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < 4; ++kk)
    ptx::Wgmma<__nv_bfloat16, 64>::ss<1, 1>(d, ptx::sw128_desc(a_s + kk * 2048, 64 * 128, 1024),
                                             ptx::sw128_desc(b_s + kk * 2048, 64 * 128, 1024), kk > 0 ? 1 : 0);
  ptx::wgmma_commit();
  ptx::wgmma_wait<0>();
  ptx::fence_registers(d);
  store_accumulator(d, out, 64);
#endif
}

// halves: as two m64n32 products (B's descriptor 64 bytes into the row for the second).
static void check_wgmma_ss_transposed(bool halves) {
  std::mt19937_64 rng = make_rng(::testing::UnitTest::GetInstance()->current_test_info()->name());
  std::vector<float> atf, bf;
  exact_matrix(rng, 64, 64, atf);  // A^T, row-major k x m (values exact in bf16)
  const auto b = exact_matrix(rng, 64, 64, bf);  // B, row-major k x n
  DeviceBuffer dat(atf.size() * 4), db(b.size() * 2), dout(64 * 64 * 4);
  dat.upload(atf.data(), atf.size() * 4);
  db.upload(b.data(), b.size() * 2);
  const sm90::FwdMaps maps = maps_for(db.get(), 64, db.get(), 64, db.get(), 64);
  const int smem = 1024 + 2 * 64 * 128 + 64;
  CUDA_OK(cudaFuncSetAttribute(wgmma_ss_transposed_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  wgmma_ss_transposed_kernel<<<1, 128, smem>>>(maps, static_cast<const float*>(dat.get()),
                                               static_cast<float*>(dout.get()), halves);
  CUDA_OK(cudaDeviceSynchronize());
  expect_exact_product(
      dout, 64, 64,
      [&](int i, int j) {
        float ref = 0.f;
        for (int k = 0; k < 64; ++k) ref += atf[k * 64 + i] * bf[k * 64 + j];
        return ref;
      },
      halves ? "D (two halves)" : "D");
}

TEST(Sm90Ptx, WgmmaSSWithBothOperandsTransposed) {
  REQUIRE_SM90();
  check_wgmma_ss_transposed(false);
}

// The same product as two column halves, B's descriptor starting inside the swizzled row.
TEST(Sm90Ptx, WgmmaSSTransposedBFromItsSecondColumnHalf) {
  REQUIRE_SM90();
  check_wgmma_ss_transposed(true);
}

// ---------------- wgmma RS with a transposed (MN-major) B ----------------
// This thread's A fragments of P (64 x 64, row-major fp32, as bf16) for a warpgroup's
// wgmma RS: rows 16 warp + g (+8), the m16n8k16 layout per k-step of 16. (Only where
// the kernels that call it have bodies.)
#if FLASHPP_SM90_ENABLED
__device__ void load_p_fragments(const float* pmat, std::uint32_t (&pa)[4][4]) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  for (int kk = 0; kk < 4; ++kk) {
    const int r0 = warp * 16 + g, c0 = kk * 16 + 2 * t;
    auto at = [&](int r, int c) { return pmat[r * 64 + c]; };
    pa[kk][0] = Element<__nv_bfloat16>::pack(at(r0, c0), at(r0, c0 + 1));
    pa[kk][1] = Element<__nv_bfloat16>::pack(at(r0 + 8, c0), at(r0 + 8, c0 + 1));
    pa[kk][2] = Element<__nv_bfloat16>::pack(at(r0, c0 + 8), at(r0, c0 + 9));
    pa[kk][3] = Element<__nv_bfloat16>::pack(at(r0 + 8, c0 + 8), at(r0 + 8, c0 + 9));
  }
}
#endif

// O (64 x 128) = P (64 x 64, registers) * V (64 keys x 128 columns, row-major): the
// forward's O += P V, with V in two 64-column panels (LBO = panel stride).
__global__ void __launch_bounds__(128) wgmma_rs_kernel(const __grid_constant__ sm90::FwdMaps maps,
                                                       const float* pmat, float* out) {
#if FLASHPP_SM90_ENABLED
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const TileSmem sm = tile_smem_with_barrier(smem_raw, 2 * 64 * 128);
  const std::uint32_t v_s = sm.base, bar = sm.bar;
  if (threadIdx.x == 0) {
    ptx::mbarrier_arrive_expect_tx(bar, 2 * 64 * 128);
    ptx::tma_load_4d(v_s, &maps.v, bar, 0, 0, 0, 0);
    ptx::tma_load_4d(v_s + 64 * 128, &maps.v, bar, 64, 0, 0, 0);
  }
  std::uint32_t pa[4][4];
  load_p_fragments(pmat, pa);
  ptx::mbarrier_wait(bar, 0);
  float d[64];
  for (int i = 0; i < 64; ++i) d[i] = 0.f;
  ptx::wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) {
    const std::uint64_t db = ptx::sw128_desc(v_s + kk * 16 * 128, 64 * 128, 1024);
    ptx::Wgmma<__nv_bfloat16, 128>::rs<1>(d, pa[kk], db, 1);
  }
  ptx::wgmma_commit();
  ptx::wgmma_wait<0>();
  ptx::fence_registers(d);
  store_accumulator(d, out, 128);
#endif
}

TEST(Sm90Ptx, WgmmaRSWithTransposedB) {
  REQUIRE_SM90();
  std::mt19937_64 rng = make_rng(::testing::UnitTest::GetInstance()->current_test_info()->name());
  std::vector<float> pf, vf;
  exact_matrix(rng, 64, 64, pf);
  const auto v = exact_matrix(rng, 64, 128, vf);
  DeviceBuffer dp(pf.size() * 4), dv(v.size() * 2), dout(64 * 128 * 4);
  dp.upload(pf.data(), pf.size() * 4);
  dv.upload(v.data(), v.size() * 2);
  const sm90::FwdMaps maps = maps_for(dv.get(), 64, dv.get(), 64, dv.get(), 128);
  const int smem = 1024 + 2 * 64 * 128 + 64;
  CUDA_OK(cudaFuncSetAttribute(wgmma_rs_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  wgmma_rs_kernel<<<1, 128, smem>>>(maps, static_cast<const float*>(dp.get()), static_cast<float*>(dout.get()));
  CUDA_OK(cudaDeviceSynchronize());
  expect_exact_product(
      dout, 64, 128,
      [&](int i, int j) {
        float ref = 0.f;
        for (int k = 0; k < 64; ++k) ref += pf[i * 64 + k] * vf[k * 128 + j];
        return ref;
      },
      "O");
}

// ---------------- wgmma RS, 8 extra columns from a panel of ones ----------------
// O (64 x 72) = P (64 x 64, registers) * [V | 1] with V (64 keys x 64 columns) in one
// of two stage buffers and the second 64-column atom (LBO) a panel of ones past both:
// the forward's row sums from the tensor pipe (row_sums_by_tensor). Stage s's
// descriptor is the stage-0 one moved s stages on, its LBO moved back as much, as in
// the kernel's gemm_o. Columns 64..71 of every row must be P's row sum.
__global__ void __launch_bounds__(128) wgmma_rs_sum_columns_kernel(const __grid_constant__ sm90::FwdMaps maps,
                                                                   const float* pmat, float* out) {
#if FLASHPP_SM90_ENABLED
  constexpr std::uint32_t kStage = 64 * 128, kOnes = 2 * kStage;
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const TileSmem sm = tile_smem_with_barrier(smem_raw, 3 * kStage);
  const std::uint32_t v_s = sm.base, bar = sm.bar;
  const std::uint32_t one2 = Element<__nv_bfloat16>::pack(1.f, 1.f);
  uint4* const ones = reinterpret_cast<uint4*>(smem_raw + (v_s - ptx::smem_u32(smem_raw)) + kOnes);
  for (std::uint32_t i = threadIdx.x; i < kStage / 16; i += blockDim.x) ones[i] = make_uint4(one2, one2, one2, one2);
  ptx::fence_proxy_async_smem();
  __syncthreads();
  if (threadIdx.x == 0) {
    ptx::mbarrier_arrive_expect_tx(bar, 2 * kStage);
    ptx::tma_load_4d(v_s, &maps.v, bar, 0, 0, 0, 0);           // stage 0
    ptx::tma_load_4d(v_s + kStage, &maps.v, bar, 0, 0, 0, 0);  // stage 1: the same V
  }
  std::uint32_t pa[4][4];
  load_p_fragments(pmat, pa);
  ptx::mbarrier_wait(bar, 0);
  const ptx::Sw128Desc v_desc = ptx::Sw128Desc::make(v_s, kOnes, 1024);
  for (int stage = 0; stage < 2; ++stage) {
    const std::uint32_t stage_off = stage * kStage, lbo_back = (stage_off >> 4) << 16;
    float d[36];
    for (int i = 0; i < 36; ++i) d[i] = 0.f;
    ptx::wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < 4; ++kk)
      ptx::Wgmma<__nv_bfloat16, 72>::rs<1>(d, pa[kk], v_desc.at(stage_off + kk * 16 * 128) - lbo_back, 1);
    ptx::wgmma_commit();
    ptx::wgmma_wait<0>();
    ptx::fence_registers(d);
    store_accumulator(d, out + stage * 64 * 72, 72);
  }
#endif
}

TEST(Sm90Ptx, WgmmaRSSumColumnsFromAPanelOfOnes) {
  REQUIRE_SM90();
  std::mt19937_64 rng = make_rng(::testing::UnitTest::GetInstance()->current_test_info()->name());
  std::vector<float> pf, vf;
  exact_matrix(rng, 64, 64, pf);
  const auto v = exact_matrix(rng, 64, 64, vf);
  DeviceBuffer dp(pf.size() * 4), dv(v.size() * 2), dout(2 * 64 * 72 * 4);
  dp.upload(pf.data(), pf.size() * 4);
  dv.upload(v.data(), v.size() * 2);
  const sm90::FwdMaps maps = maps_for(dv.get(), 64, dv.get(), 64, dv.get(), 64);
  const int smem = 1024 + 3 * 64 * 128 + 64;
  CUDA_OK(cudaFuncSetAttribute(wgmma_rs_sum_columns_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  wgmma_rs_sum_columns_kernel<<<1, 128, smem>>>(maps, static_cast<const float*>(dp.get()),
                                                static_cast<float*>(dout.get()));
  CUDA_OK(cudaDeviceSynchronize());
  expect_exact_product(
      dout, 2 * 64, 72,
      [&](int i, int j) {
        const int r = i % 64;
        float ref = 0.f;
        for (int k = 0; k < 64; ++k) ref += pf[r * 64 + k] * (j < 64 ? vf[k * 64 + j] : 1.f);
        return ref;
      },
      "O with sum columns (rows 64..127: stage 1)");
}

// ---------------- stmatrix staging + TMA store ----------------
// Two warpgroups hold a 128 x 128 accumulator tile in the wgmma layout (value of
// (row, col) below), stage it through the forward epilogue's stmatrix helper with
// per-row-half scales, and thread 0 stores both 64-row slices with the O map. The
// tensor has 100 rows and a padded row stride: rows 100..127 of the second box
// and the padding columns must stay untouched.
constexpr int kStoreRows = 100, kStoreCols = 128, kStoreStride = 136;

__host__ __device__ inline float staged_value(int row, int col) { return float((row * 7 + col * 3) % 17 - 8) / 4.f; }
__host__ __device__ inline float staged_scale(int row) { return (row % 16) < 8 ? 0.5f : 0.25f; }

__global__ void __launch_bounds__(256) stage_store_kernel(const __grid_constant__ sm90::FwdMaps maps) {
#if FLASHPP_SM90_ENABLED
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const std::uint32_t base = (ptx::smem_u32(smem_raw) + 1023u) & ~1023u;
  const int c = threadIdx.x / 128, warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  float o[kStoreCols / 2];
  for (int j = 0; j < kStoreCols / 8; ++j)
    for (int e = 0; e < 4; ++e) {
      const int row = c * 64 + warp * 16 + g + 8 * (e / 2), col = 8 * j + 2 * t + (e % 2);
      o[4 * j + e] = staged_value(row, col);
    }
  const float inv[2] = {0.5f, 0.25f};
  sm90::stage_o_rows<__nv_bfloat16, kStoreCols, 128>(o, inv, base, c, warp, lane);
  ptx::fence_proxy_async_smem();
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int slice = 0; slice < 2; ++slice)
      for (int pn = 0; pn < kStoreCols / 64; ++pn)
        ptx::tma_store_4d(&maps.o, base + pn * 128 * 128 + slice * 64 * 128, pn * 64, slice * 64, 0, 0);
    ptx::tma_store_commit();
    ptx::tma_store_wait_all();
  }
#endif
}

TEST(Sm90Ptx, StmatrixStagingAndClippedTmaStore) {
  REQUIRE_SM90();
  constexpr int kAllocRows = 128;  // 28 guard rows past the tensor
  DeviceBuffer dout(std::size_t(kAllocRows) * kStoreStride * 2);
  dout.fill_byte(0xff);  // 0xffff: a bf16 NaN, never a staged value
  AttnParams p;
  p.dtype = ElemType::bf16;
  p.o = dout.get();
  p.batch = 1;
  p.heads_q = 1;
  p.head_dim_v = kStoreCols;
  p.seqlen_q = kStoreRows;
  p.o_row_stride = kStoreStride;
  p.o_head_stride = p.o_batch_stride = std::int64_t(kStoreStride) * kStoreRows;
  ASSERT_EQ(sm90::o_store_problem(p), "");
  sm90::FwdMaps maps{};
  sm90::encode_o_map(p, &maps.o);
  const int smem = 1024 + 128 * kStoreCols * 2;
  CUDA_OK(cudaFuncSetAttribute(stage_store_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  stage_store_kernel<<<1, 256, smem>>>(maps);
  CUDA_OK(cudaDeviceSynchronize());
  std::vector<std::uint16_t> got(std::size_t(kAllocRows) * kStoreStride);
  dout.download(got.data(), got.size() * 2);
  int bad = 0;
  for (int r = 0; r < kAllocRows; ++r)
    for (int col = 0; col < kStoreStride; ++col) {
      const std::uint16_t v = got[std::size_t(r) * kStoreStride + col];
      const bool written = r < kStoreRows && col < kStoreCols;
      const std::uint16_t want = written ? float_to_bf16(staged_value(r, col) * staged_scale(r)) : 0xffff;
      if (v != want && bad++ < 5)
        ADD_FAILURE() << "out[" << r << "][" << col << "] = 0x" << std::hex << v << ", expected 0x" << want
                      << std::dec << (written ? "" : " (outside the tensor: untouched)");
    }
  EXPECT_EQ(bad, 0);
}

// ---------------- setmaxnreg + named barriers ----------------
// Warpgroup 0 gives registers away and publishes a value through shared memory;
// warpgroup 1 takes registers, waits on the named barrier and reads it.
__global__ void __launch_bounds__(256, 1) handoff_kernel(int* out) {
#if FLASHPP_SM90_ENABLED
  __shared__ int value[128];
  const int wg = threadIdx.x / 128, i = threadIdx.x % 128;
  if (wg == 0) {
    ptx::setmaxnreg_dec<40>();
    value[i] = 1000 + i;
    ptx::named_barrier_arrive(3, 256);
  } else {
    ptx::setmaxnreg_inc<232>();
    ptx::named_barrier_sync(3, 256);
    out[i] = value[127 - i];
  }
#endif
}

TEST(Sm90Ptx, SetmaxnregAndNamedBarrierHandoff) {
  REQUIRE_SM90();
  DeviceBuffer dout(128 * 4);
  dout.fill_byte(0);
  handoff_kernel<<<1, 256>>>(static_cast<int*>(dout.get()));
  CUDA_OK(cudaDeviceSynchronize());
  std::vector<int> got(128);
  dout.download(got.data(), got.size() * 4);
  for (int i = 0; i < 128; ++i) EXPECT_EQ(got[i], 1000 + 127 - i) << i;
}

// ---------------- L2 bulk prefetch ----------------
// One prefetch per 256-byte row, up to the allocation's last bytes.
__global__ void prefetch_rows_kernel(const char* buf, int rows) {
  for (int r = threadIdx.x; r < rows; r += blockDim.x) ptx::prefetch_l2_bulk(buf + std::size_t(r) * 256, 256);
}

__global__ void overwrite_kernel(int* buf, int n, int base) {
  for (int i = threadIdx.x; i < n; i += blockDim.x) buf[i] = base + i;
}

__global__ void read_cg_kernel(const int* buf, int n, int* out) {
  for (int i = threadIdx.x; i < n; i += blockDim.x) out[i] = __ldcg(buf + i);
}

// The decode kernel prefetches lines the kernel before it may still write
// (span_prefetch.cuh): later reads must see those writes.
TEST(Sm90Ptx, L2BulkPrefetchNeverHidesLaterWrites) {
  REQUIRE_SM90();
  constexpr int kRows = 64, kInts = kRows * 256 / 4;
  DeviceBuffer buf(kRows * 256), out(kRows * 256);
  int* b = static_cast<int*>(buf.get());
  overwrite_kernel<<<1, 256>>>(b, kInts, 7);
  prefetch_rows_kernel<<<1, 64>>>(static_cast<const char*>(buf.get()), kRows);
  overwrite_kernel<<<1, 256>>>(b, kInts, 1000);
  read_cg_kernel<<<1, 256>>>(b, kInts, static_cast<int*>(out.get()));
  CUDA_OK(cudaDeviceSynchronize());
  std::vector<int> got(kInts);
  out.download(got.data(), got.size() * 4);
  for (int i = 0; i < kInts; ++i) ASSERT_EQ(got[i], 1000 + i) << i;
}

// ---------------- clusters: rank, barrier, distributed shared memory ----------------
// Each block of a cluster of `kCluster` (along y, as the decode kernel's split
// clusters) fills its shared memory with values naming its rank, then reads its
// neighbour's through cluster_map() with scalar and 4-wide loads; the second
// barrier keeps every block alive until its neighbour has read.
constexpr int kCluster = 4;

__global__ void __launch_bounds__(128) cluster_exchange_kernel(int* ranks, float* scalar, float* wide) {
#if FLASHPP_SM90_ENABLED
  __shared__ __align__(16) float mine[4 * 128];
  const int rank = int(ptx::cluster_rank());
  const int block = int(blockIdx.y), t = int(threadIdx.x);
  for (int i = t; i < 4 * 128; i += 128) mine[i] = float(rank * 10000 + i);
  if (t == 0) ranks[block] = rank;
  ptx::cluster_sync();
  const std::uint32_t peer = std::uint32_t((rank + 1) % kCluster);
  const std::uint32_t local = ptx::smem_u32(mine);
  scalar[block * 128 + t] = ptx::ld_cluster_f32(ptx::cluster_map(local + 4u * std::uint32_t(t), peer));
  const float4 v = ptx::ld_cluster_f32x4(ptx::cluster_map(local + 16u * std::uint32_t(t), peer));
  float* w = wide + (block * 128 + t) * 4;
  w[0] = v.x;
  w[1] = v.y;
  w[2] = v.z;
  w[3] = v.w;
  ptx::cluster_sync();
#endif
}

TEST(Sm90Ptx, ClusterRankBarrierAndRemoteSharedLoads) {
  REQUIRE_SM90();
  constexpr int kBlocks = 2 * kCluster;
  DeviceBuffer ranks(kBlocks * 4), scalar(kBlocks * 128 * 4), wide(kBlocks * 128 * 16);
  ranks.fill_byte(0xff);
  scalar.fill_byte(0);
  wide.fill_byte(0);
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(1, kBlocks, 1);
  cfg.blockDim = dim3(128);
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = 1;
  attr[0].val.clusterDim.y = kCluster;
  attr[0].val.clusterDim.z = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  CUDA_OK(cudaLaunchKernelEx(&cfg, cluster_exchange_kernel, static_cast<int*>(ranks.get()),
                             static_cast<float*>(scalar.get()), static_cast<float*>(wide.get())));
  CUDA_OK(cudaDeviceSynchronize());
  std::vector<int> got_rank(kBlocks);
  std::vector<float> got_scalar(kBlocks * 128), got_wide(kBlocks * 128 * 4);
  ranks.download(got_rank.data(), got_rank.size() * 4);
  scalar.download(got_scalar.data(), got_scalar.size() * 4);
  wide.download(got_wide.data(), got_wide.size() * 4);
  for (int b = 0; b < kBlocks; ++b) {
    EXPECT_EQ(got_rank[b], b % kCluster) << "block " << b;
    const int peer = (b % kCluster + 1) % kCluster;
    for (int t = 0; t < 128; ++t) {
      ASSERT_EQ(got_scalar[b * 128 + t], float(peer * 10000 + t)) << "block " << b << " thread " << t;
      for (int e = 0; e < 4; ++e)
        ASSERT_EQ(got_wide[(b * 128 + t) * 4 + e], float(peer * 10000 + 4 * t + e)) << "block " << b << " thread " << t;
    }
  }
}

}  // namespace
}  // namespace flashpp::test::gpu
