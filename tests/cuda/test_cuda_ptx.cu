// Device unit tests of the PTX wrappers (src/cuda/ptx) and of the fragment loaders
// and warp products built on them, each against a host computation of the layout
// or product its comment documents.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "common/half.hpp"
#include "cuda/common/element.cuh"
#include "cuda/common/smem_tile.cuh"
#include "cuda/common/warp_gemm.cuh"
#include "cuda/ptx/cp_async.cuh"
#include "cuda/ptx/ldmatrix.cuh"
#include "cuda/ptx/math.cuh"
#include "cuda/ptx/mma.cuh"
#include "cuda/ptx/red.cuh"
#include "gpu_support.hpp"
#include "support/seed.hpp"

namespace flashpp::test::gpu {
namespace {

using namespace flashpp::cuda;

#define CUDA_OK(x) ASSERT_EQ((x), cudaSuccess) << #x << ": " << cudaGetErrorString(cudaGetLastError())

template <typename T>
std::uint16_t to_bits(float f) {
  return std::is_same_v<T, __half> ? float_to_fp16(f) : float_to_bf16(f);
}
template <typename T>
float from_bits(std::uint16_t h) {
  return std::is_same_v<T, __half> ? fp16_to_float(h) : bf16_to_float(h);
}

template <typename T>
std::vector<std::uint16_t> random_matrix(std::mt19937_64& rng, int n) {
  std::uniform_real_distribution<float> u(-2.f, 2.f);
  std::vector<std::uint16_t> m(static_cast<std::size_t>(n));
  for (auto& x : m) x = to_bits<T>(u(rng));
  return m;
}

// ---------------- ldmatrix ----------------

// 32 rows x 8 b16 columns, row r holding values r*8 + c. Lane l addresses row l
// (x4: matrix l/8; x2/x1 use the lower lanes' addresses), as the wrapper comment says.
template <int N, bool TRANS>
__global__ void ldmatrix_kernel(const std::uint16_t* src, std::uint32_t* out) {
  __shared__ alignas(16) std::uint16_t tile[32 * 8];
  const int lane = threadIdx.x;
  for (int i = lane; i < 32 * 8; i += 32) tile[i] = src[i];
  __syncwarp();
  const std::uint32_t addr = ptx::smem_u32(&tile[lane * 8]);
  std::uint32_t r[4] = {0, 0, 0, 0};
  if constexpr (N == 1) {
    if constexpr (TRANS) ptx::ldmatrix_x1_trans(r[0], addr); else ptx::ldmatrix_x1(r[0], addr);
  } else if constexpr (N == 2) {
    if constexpr (TRANS) ptx::ldmatrix_x2_trans(r[0], r[1], addr); else ptx::ldmatrix_x2(r[0], r[1], addr);
  } else {
    if constexpr (TRANS) ptx::ldmatrix_x4_trans(r[0], r[1], r[2], r[3], addr);
    else ptx::ldmatrix_x4(r[0], r[1], r[2], r[3], addr);
  }
  for (int j = 0; j < 4; ++j) out[lane * 4 + j] = r[j];
}

template <int N, bool TRANS>
void check_ldmatrix() {
  std::vector<std::uint16_t> src(32 * 8);
  for (int i = 0; i < 32 * 8; ++i) src[std::size_t(i)] = std::uint16_t(i);
  DeviceBuffer d_src(src.size() * 2), d_out(32 * 4 * 4);
  d_src.upload(src.data(), src.size() * 2);
  ldmatrix_kernel<N, TRANS><<<1, 32>>>(static_cast<const std::uint16_t*>(d_src.get()),
                                        static_cast<std::uint32_t*>(d_out.get()));
  CUDA_OK(cudaDeviceSynchronize());
  std::vector<std::uint32_t> out(32 * 4);
  d_out.download(out.data(), out.size() * 4);
  for (int lane = 0; lane < 32; ++lane)
    for (int j = 0; j < N; ++j) {
      const int r = lane / 4, c = 2 * (lane % 4);
      // matrix j is rows 8j..8j+7; .trans delivers element (r, c) of its transpose
      auto value = [&](int row, int col) { return TRANS ? (8 * j + col) * 8 + row : (8 * j + row) * 8 + col; };
      const std::uint32_t want = std::uint32_t(value(r, c)) | (std::uint32_t(value(r, c + 1)) << 16);
      EXPECT_EQ(out[std::size_t(lane * 4 + j)], want) << "x" << N << (TRANS ? ".trans" : "") << " lane " << lane
                                                      << " register " << j;
    }
}

TEST(CudaPtx, LdmatrixX1) { FLASHPP_REQUIRE_GPU(); check_ldmatrix<1, false>(); }
TEST(CudaPtx, LdmatrixX2) { FLASHPP_REQUIRE_GPU(); check_ldmatrix<2, false>(); }
TEST(CudaPtx, LdmatrixX4) { FLASHPP_REQUIRE_GPU(); check_ldmatrix<4, false>(); }
TEST(CudaPtx, LdmatrixX1Trans) { FLASHPP_REQUIRE_GPU(); check_ldmatrix<1, true>(); }
TEST(CudaPtx, LdmatrixX2Trans) { FLASHPP_REQUIRE_GPU(); check_ldmatrix<2, true>(); }
TEST(CudaPtx, LdmatrixX4Trans) { FLASHPP_REQUIRE_GPU(); check_ldmatrix<4, true>(); }

// ---------------- mma.m16n8k16 ----------------

// A row-major 16x16, B given as [n][k] (8x16), C row-major 16x8; fragments built by
// the register layout documented in ptx/mma.cuh.
template <typename T>
__global__ void mma_kernel(const std::uint16_t* A, const std::uint16_t* B, const float* C, float* D) {
  const int lane = threadIdx.x, g = lane / 4, t = lane % 4;
  auto pair = [](const std::uint16_t* p) { return std::uint32_t(p[0]) | (std::uint32_t(p[1]) << 16); };
  const std::uint32_t a[4] = {pair(A + g * 16 + 2 * t), pair(A + (g + 8) * 16 + 2 * t), pair(A + g * 16 + 2 * t + 8),
                              pair(A + (g + 8) * 16 + 2 * t + 8)};
  const std::uint32_t b[2] = {pair(B + g * 16 + 2 * t), pair(B + g * 16 + 2 * t + 8)};
  float c[4] = {C[g * 8 + 2 * t], C[g * 8 + 2 * t + 1], C[(g + 8) * 8 + 2 * t], C[(g + 8) * 8 + 2 * t + 1]};
  Element<T>::mma(c, a, b);
  D[g * 8 + 2 * t] = c[0];
  D[g * 8 + 2 * t + 1] = c[1];
  D[(g + 8) * 8 + 2 * t] = c[2];
  D[(g + 8) * 8 + 2 * t + 1] = c[3];
}

template <typename T>
void check_mma(const char* name) {
  auto rng = make_rng(std::string("CudaPtx.mma.") + name);
  const auto A = random_matrix<T>(rng, 256), B = random_matrix<T>(rng, 128);
  std::vector<float> C(128);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  for (auto& x : C) x = u(rng);
  DeviceBuffer dA(512), dB(256), dC(512), dD(512);
  dA.upload(A.data(), 512);
  dB.upload(B.data(), 256);
  dC.upload(C.data(), 512);
  mma_kernel<T><<<1, 32>>>(static_cast<const std::uint16_t*>(dA.get()), static_cast<const std::uint16_t*>(dB.get()),
                           static_cast<const float*>(dC.get()), static_cast<float*>(dD.get()));
  CUDA_OK(cudaDeviceSynchronize());
  std::vector<float> D(128);
  dD.download(D.data(), 512);
  for (int m = 0; m < 16; ++m)
    for (int n = 0; n < 8; ++n) {
      double want = C[std::size_t(m * 8 + n)];
      for (int k = 0; k < 16; ++k)
        want += double(from_bits<T>(A[std::size_t(m * 16 + k)])) * from_bits<T>(B[std::size_t(n * 16 + k)]);
      EXPECT_NEAR(D[std::size_t(m * 8 + n)], want, 1e-5 * (1 + std::abs(want))) << name << " at " << m << "," << n;
    }
}

TEST(CudaPtx, MmaM16n8k16F16) { FLASHPP_REQUIRE_GPU(); check_mma<__half>("f16"); }
TEST(CudaPtx, MmaM16n8k16Bf16) { FLASHPP_REQUIRE_GPU(); check_mma<__nv_bfloat16>("bf16"); }

// ---------------- packed 16-bit max, unpack2 ----------------

// Thread i takes pairs a[i], b[i]: out[3i] = max(a, b) packed, out[3i+1..2] = the two
// floats unpack2 reads from a[i].
template <typename T>
__global__ void max_pair_kernel(const std::uint32_t* a, const std::uint32_t* b, std::uint32_t* out) {
  const int i = threadIdx.x;
  out[3 * i] = std::is_same_v<T, __half> ? ptx::max_f16x2(a[i], b[i]) : ptx::max_bf16x2(a[i], b[i]);
  float lo, hi;
  unpack2<T>(a[i], lo, hi);
  out[3 * i + 1] = __float_as_uint(lo);
  out[3 * i + 2] = __float_as_uint(hi);
}

template <typename T>
void check_max_pair() {
  constexpr int kN = 256;
  auto rng = make_rng(std::string("CudaPtx.max_pair.") + Element<T>::name);
  std::uniform_real_distribution<float> u(-4.f, 4.f);
  std::vector<std::uint32_t> a(kN), b(kN);
  for (int i = 0; i < kN; ++i) {
    // Every 8th pair ties or differs only in sign, so equal and signed-zero cases occur.
    const float x0 = u(rng), x1 = u(rng);
    const float y0 = i % 8 == 0 ? x0 : u(rng), y1 = i % 8 == 1 ? -x1 : u(rng);
    a[std::size_t(i)] = to_bits<T>(x0) | std::uint32_t(to_bits<T>(x1)) << 16;
    b[std::size_t(i)] = to_bits<T>(y0) | std::uint32_t(to_bits<T>(y1)) << 16;
  }
  DeviceBuffer da(4 * kN), db(4 * kN), dout(12 * kN);
  da.upload(a.data(), 4 * kN);
  db.upload(b.data(), 4 * kN);
  max_pair_kernel<T><<<1, kN>>>(static_cast<const std::uint32_t*>(da.get()), static_cast<const std::uint32_t*>(db.get()),
                                static_cast<std::uint32_t*>(dout.get()));
  CUDA_OK(cudaDeviceSynchronize());
  std::vector<std::uint32_t> out(3 * kN);
  dout.download(out.data(), 12 * kN);
  for (int i = 0; i < kN; ++i) {
    const std::uint32_t m = out[std::size_t(3 * i)];
    for (int half = 0; half < 2; ++half) {
      const float x = from_bits<T>(std::uint16_t(a[std::size_t(i)] >> (16 * half)));
      const float y = from_bits<T>(std::uint16_t(b[std::size_t(i)] >> (16 * half)));
      EXPECT_EQ(from_bits<T>(std::uint16_t(m >> (16 * half))), std::max(x, y)) << "pair " << i << " half " << half;
      float got;
      std::memcpy(&got, &out[std::size_t(3 * i + 1 + half)], 4);
      EXPECT_EQ(got, x) << "unpack2, pair " << i << " half " << half;
    }
  }
}

TEST(CudaPtx, MaxF16x2AndUnpack) { FLASHPP_REQUIRE_GPU(); check_max_pair<__half>(); }
TEST(CudaPtx, MaxBf16x2AndUnpack) { FLASHPP_REQUIRE_GPU(); check_max_pair<__nv_bfloat16>(); }

// ---------------- cp.async ----------------

// 64 chunks of 16 bytes in two commit groups (chunks 0-31, 32-63); every third
// chunk is invalid and must be zero-filled. Then 32 single words through cp_async_4.
__global__ void cp_async_kernel(const uint4* src, const float* words, uint4* out, float* out_words, int* early_ok) {
  __shared__ alignas(16) uint4 tile[64];
  __shared__ alignas(16) float w[32];
  const int lane = threadIdx.x;
  tile[lane] = tile[lane + 32] = make_uint4(0xabababab, 0xabababab, 0xabababab, 0xabababab);
  w[lane] = -1.f;
  __syncwarp();
  ptx::cp_async_16(ptx::smem_u32(&tile[lane]), src + lane, lane % 3 != 0);
  ptx::cp_async_commit_group();
  ptx::cp_async_16(ptx::smem_u32(&tile[lane + 32]), src + lane + 32, (lane + 32) % 3 != 0);
  ptx::cp_async_4(ptx::smem_u32(&w[lane]), words + lane, lane % 2 == 0);
  ptx::cp_async_commit_group();
  ptx::cp_async_wait_group<1>();  // the first group is complete, the second may not be
  __syncwarp();
  const uint4 x = tile[lane], want = lane % 3 != 0 ? src[lane] : make_uint4(0, 0, 0, 0);
  early_ok[lane] = x.x == want.x && x.y == want.y && x.z == want.z && x.w == want.w;
  ptx::cp_async_wait_group<0>();
  __syncwarp();
  out[lane] = tile[lane];
  out[lane + 32] = tile[lane + 32];
  out_words[lane] = w[lane];
}

TEST(CudaPtx, CpAsyncCopiesAndZeroFills) {
  FLASHPP_REQUIRE_GPU();
  auto rng = make_rng("CudaPtx.cp_async");
  std::vector<std::uint32_t> src(256);
  for (auto& x : src) x = std::uint32_t(rng()) | 1u;  // never zero
  std::vector<float> words(32);
  for (auto& x : words) x = float(rng() % 1000) + 0.5f;
  DeviceBuffer d_src(1024), d_words(128), d_out(1024), d_out_words(128), d_early(128);
  d_src.upload(src.data(), 1024);
  d_words.upload(words.data(), 128);
  cp_async_kernel<<<1, 32>>>(static_cast<const uint4*>(d_src.get()), static_cast<const float*>(d_words.get()),
                             static_cast<uint4*>(d_out.get()), static_cast<float*>(d_out_words.get()),
                             static_cast<int*>(d_early.get()));
  CUDA_OK(cudaDeviceSynchronize());
  std::vector<std::uint32_t> out(256);
  std::vector<float> out_words(32);
  std::vector<int> early(32);
  d_out.download(out.data(), 1024);
  d_out_words.download(out_words.data(), 128);
  d_early.download(early.data(), 128);
  for (int c = 0; c < 64; ++c)
    for (int j = 0; j < 4; ++j) {
      const std::uint32_t want = c % 3 != 0 ? src[std::size_t(c * 4 + j)] : 0u;
      EXPECT_EQ(out[std::size_t(c * 4 + j)], want) << "chunk " << c << " word " << j;
    }
  for (int i = 0; i < 32; ++i) {
    EXPECT_EQ(out_words[std::size_t(i)], i % 2 == 0 ? words[std::size_t(i)] : 0.f) << "word " << i;
    EXPECT_TRUE(early[std::size_t(i)]) << "group 0 incomplete after cp.async.wait_group 1, lane " << i;
  }
}

// ---------------- red.global.add.v2.f32 ----------------

// 256 threads add (i, -2i) into pair i % 16 of 16 float pairs (integer values: exact).
__global__ void red_kernel(float* pairs) {
  const int i = threadIdx.x;
  ptx::red_add_v2_f32(pairs + 2 * (i % 16), float(i), float(-2 * i));
}

TEST(CudaPtx, RedAddV2F32) {
  FLASHPP_REQUIRE_GPU();
  std::vector<float> init(32);
  for (int j = 0; j < 32; ++j) init[std::size_t(j)] = float(j) + 0.5f;
  DeviceBuffer d(128);
  d.upload(init.data(), 128);
  red_kernel<<<1, 256>>>(static_cast<float*>(d.get()));
  CUDA_OK(cudaDeviceSynchronize());
  std::vector<float> out(32);
  d.download(out.data(), 128);
  for (int pr = 0; pr < 16; ++pr) {
    double sum = 0;
    for (int i = pr; i < 256; i += 16) sum += i;
    EXPECT_EQ(out[std::size_t(2 * pr)], float(init[std::size_t(2 * pr)] + sum)) << "pair " << pr;
    EXPECT_EQ(out[std::size_t(2 * pr + 1)], float(init[std::size_t(2 * pr + 1)] - 2 * sum)) << "pair " << pr;
  }
}

// ---------------- fragment loaders + warp products on swizzled tiles ----------------

// acc(16*MT x 8*NT) = A(16*MT x 16*KS) * B(16*KS x 8*NT), operands stored in swizzled
// tiles either [m][k] or [k][m] (B: [n][k] or [k][n]), written with SmemTile::offset.
template <typename T, int MT, int NT, int KS, Major AM, Major BM, int ACOLS, int BCOLS>
__global__ void gemm_kernel(const std::uint16_t* A, const std::uint16_t* B, float* C) {
  constexpr int M = 16 * MT, N = 8 * NT, K = 16 * KS;
  using ATile = SmemTile<(AM == Major::mk ? M : K), ACOLS>;
  using BTile = SmemTile<(BM == Major::mk ? N : K), BCOLS>;
  __shared__ alignas(128) unsigned char a_s[ATile::kBytes];
  __shared__ alignas(128) unsigned char b_s[BTile::kBytes];
  const int lane = threadIdx.x;
  // Logical element (m, k) of A lives at tile row/col (m, k) or (k, m).
  for (int i = lane; i < M * K; i += 32) {
    const int m = i / K, k = i % K;
    const int row = AM == Major::mk ? m : k, col = AM == Major::mk ? k : m;
    *reinterpret_cast<std::uint16_t*>(a_s + ATile::offset(row, col / 8) + (col % 8) * 2) = A[i];
  }
  for (int i = lane; i < K * N; i += 32) {
    const int k = i / N, n = i % N;
    const int row = BM == Major::mk ? n : k, col = BM == Major::mk ? k : n;
    *reinterpret_cast<std::uint16_t*>(b_s + BTile::offset(row, col / 8) + (col % 8) * 2) = B[i];
  }
  __syncwarp();
  float acc[MT][NT][4];
  zero(acc);
  gemm_ss<T, ATile, AM, BTile, BM, MT, NT, KS>(acc, ptx::smem_u32(a_s), 0, 0, ptx::smem_u32(b_s), 0, 0, lane);
  const int g = lane / 4, t = lane % 4;
  for (int mt = 0; mt < MT; ++mt)
    for (int nt = 0; nt < NT; ++nt)
      for (int e = 0; e < 4; ++e) C[(mt * 16 + g + 8 * (e / 2)) * N + nt * 8 + 2 * t + (e % 2)] = acc[mt][nt][e];
}

template <typename T, int MT, int NT, int KS, Major AM, Major BM, int ACOLS, int BCOLS>
void check_gemm(const std::string& name) {
  constexpr int M = 16 * MT, N = 8 * NT, K = 16 * KS;
  auto rng = make_rng("CudaPtx.gemm." + name);
  const auto A = random_matrix<T>(rng, M * K), B = random_matrix<T>(rng, K * N);  // A (m,k), B (k,n) row-major
  DeviceBuffer dA(A.size() * 2), dB(B.size() * 2), dC(std::size_t(M) * N * 4);
  dA.upload(A.data(), A.size() * 2);
  dB.upload(B.data(), B.size() * 2);
  gemm_kernel<T, MT, NT, KS, AM, BM, ACOLS, BCOLS><<<1, 32>>>(static_cast<const std::uint16_t*>(dA.get()),
                                                             static_cast<const std::uint16_t*>(dB.get()),
                                                             static_cast<float*>(dC.get()));
  CUDA_OK(cudaDeviceSynchronize());
  std::vector<float> C(std::size_t(M) * N);
  dC.download(C.data(), C.size() * 4);
  int bad = 0;
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) {
      double want = 0;
      for (int k = 0; k < K; ++k)
        want += double(from_bits<T>(A[std::size_t(m * K + k)])) * from_bits<T>(B[std::size_t(k * N + n)]);
      if (std::abs(C[std::size_t(m * N + n)] - want) > 1e-4 * (1 + std::abs(want)) && bad++ < 5)
        ADD_FAILURE() << name << ": C(" << m << "," << n << ") = " << C[std::size_t(m * N + n)] << ", want " << want;
    }
}

// Tile widths 32 and 96 columns use the 4-chunk swizzle, 64 and 128 the 8-chunk one.
TEST(CudaFragments, GemmSharedShared) {
  FLASHPP_REQUIRE_GPU();
  check_gemm<__half, 2, 4, 2, Major::mk, Major::mk, 32, 32>("f16 mk.mk 32");
  check_gemm<__half, 1, 8, 4, Major::mk, Major::mk, 64, 64>("f16 mk.mk 64");
  check_gemm<__nv_bfloat16, 2, 4, 6, Major::mk, Major::mk, 96, 96>("bf16 mk.mk 96");
  check_gemm<__nv_bfloat16, 1, 4, 8, Major::mk, Major::mk, 128, 128>("bf16 mk.mk 128");
  check_gemm<__half, 2, 8, 2, Major::km, Major::km, 32, 64>("f16 km.km 32/64");
  check_gemm<__nv_bfloat16, 1, 12, 4, Major::km, Major::km, 32, 96>("bf16 km.km 32/96");
  check_gemm<__half, 2, 16, 4, Major::mk, Major::km, 64, 128>("f16 mk.km 64/128");
  check_gemm<__nv_bfloat16, 4, 4, 2, Major::km, Major::mk, 64, 32>("bf16 km.mk 64/32");
  check_gemm<__half, 2, 4, 6, Major::km, Major::mk, 32, 96>("f16 km.mk 32/96");
}

// acc_to_a + gemm_rs: E = round_T(A B) C, the path P V and dS K take.
template <typename T>
__global__ void chain_kernel(const std::uint16_t* A, const std::uint16_t* B, const std::uint16_t* Cm, float* E) {
  using ATile = SmemTile<16, 32>;  // A 16x32 [m][k]
  using BTile = SmemTile<16, 32>;  // B stored [n][k]: 16 n x 32 k
  using CTile = SmemTile<16, 32>;  // C stored [k][n]: 16 k x 32 n
  __shared__ alignas(128) unsigned char a_s[ATile::kBytes], b_s[BTile::kBytes], c_s[CTile::kBytes];
  const int lane = threadIdx.x;
  for (int i = lane; i < 16 * 32; i += 32) {
    const int r = i / 32, c = i % 32;
    *reinterpret_cast<std::uint16_t*>(a_s + ATile::offset(r, c / 8) + (c % 8) * 2) = A[i];
    *reinterpret_cast<std::uint16_t*>(b_s + BTile::offset(r, c / 8) + (c % 8) * 2) = B[i];
    *reinterpret_cast<std::uint16_t*>(c_s + CTile::offset(r, c / 8) + (c % 8) * 2) = Cm[i];
  }
  __syncwarp();
  float p[1][2][4];
  zero(p);
  gemm_ss<T, ATile, Major::mk, BTile, Major::mk, 1, 2, 2>(p, ptx::smem_u32(a_s), 0, 0, ptx::smem_u32(b_s), 0, 0, lane);
  std::uint32_t pa[1][1][4];
  acc_to_a<T>(pa, p);
  float e[1][4][4];
  zero(e);
  gemm_rs<T, CTile, Major::km, 1, 4, 1>(e, pa, ptx::smem_u32(c_s), 0, 0, lane);
  const int g = lane / 4, t = lane % 4;
  for (int nt = 0; nt < 4; ++nt)
    for (int q = 0; q < 4; ++q) E[(g + 8 * (q / 2)) * 32 + nt * 8 + 2 * t + (q % 2)] = e[0][nt][q];
}

template <typename T>
void check_chain(const char* name) {
  auto rng = make_rng(std::string("CudaFragments.chain.") + name);
  const auto A = random_matrix<T>(rng, 512), B = random_matrix<T>(rng, 512), C = random_matrix<T>(rng, 512);
  DeviceBuffer dA(1024), dB(1024), dC(1024), dE(2048);
  dA.upload(A.data(), 1024);
  dB.upload(B.data(), 1024);
  dC.upload(C.data(), 1024);
  chain_kernel<T><<<1, 32>>>(static_cast<const std::uint16_t*>(dA.get()), static_cast<const std::uint16_t*>(dB.get()),
                             static_cast<const std::uint16_t*>(dC.get()), static_cast<float*>(dE.get()));
  CUDA_OK(cudaDeviceSynchronize());
  std::vector<float> E(512);
  dE.download(E.data(), 2048);
  // P(m, j) = sum_k A(m, k) B[n=j][k], rounded to T; E(m, n) = sum_j P(m, j) C[k=j][n]
  std::vector<double> P(256);
  for (int m = 0; m < 16; ++m)
    for (int j = 0; j < 16; ++j) {
      float acc = 0;
      for (int k = 0; k < 32; ++k) acc += from_bits<T>(A[std::size_t(m * 32 + k)]) * from_bits<T>(B[std::size_t(j * 32 + k)]);
      P[std::size_t(m * 16 + j)] = from_bits<T>(to_bits<T>(acc));
    }
  int bad = 0;
  for (int m = 0; m < 16; ++m)
    for (int n = 0; n < 32; ++n) {
      double want = 0, mag = 0;
      for (int j = 0; j < 16; ++j) {
        want += P[std::size_t(m * 16 + j)] * from_bits<T>(C[std::size_t(j * 32 + n)]);
        mag += std::abs(P[std::size_t(m * 16 + j)] * from_bits<T>(C[std::size_t(j * 32 + n)]));
      }
      // P's rounding may differ by one unit where the fp32 sums differ in order.
      const double tol = (std::is_same_v<T, __half> ? 2e-3 : 1.6e-2) * mag + 1e-4;
      if (std::abs(E[std::size_t(m * 32 + n)] - want) > tol && bad++ < 5)
        ADD_FAILURE() << name << ": E(" << m << "," << n << ") = " << E[std::size_t(m * 32 + n)] << ", want " << want;
    }
}

TEST(CudaFragments, AccumulatorToOperandChain) {
  FLASHPP_REQUIRE_GPU();
  check_chain<__half>("f16");
  check_chain<__nv_bfloat16>("bf16");
}

}  // namespace
}  // namespace flashpp::test::gpu
