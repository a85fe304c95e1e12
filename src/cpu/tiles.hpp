#pragma once
// Tile sizes and the small dense kernels the CPU backend is built from. Score
// tiles are kBlockQ x kBlockK; every inner loop runs over a fixed 64-wide
// block so the compiler keeps the accumulators in vector registers.
#include <cmath>
#include <cstdint>
#include <cstring>

#include "common/mask.hpp"
#include "common/params.hpp"

namespace flashpp::cpu {

// 64 x 64 score tiles: Q/K/V tiles of head_dim 256 are 64 KB each in fp32,
// which keeps one task's working set within a core's L2.
inline constexpr int kBlockQ = 64;
inline constexpr int kBlockK = 64;
inline constexpr int kCols = 64;  // width of one register block

// a * b + c, fused where the target has FMA. The CPU backend is compiled
// with -ffp-contract=off so that every other expression rounds exactly as
// written: the backward must recompute the forward's scores bit for bit
// (P = exp(S - LSE) is exactly 1 for a row that sees one key).
// (float for the tiles, double for the fp64-accumulated scores of fp32 inputs).
template <class T>
inline T madd(T a, T b, T c) {
#if defined(__FMA__)
  return std::fma(a, b, c);
#else
  return a * b + c;
#endif
}

// Row length rounded up to whole register blocks (buffers are zero padded).
inline int padded(int n) { return (n + kCols - 1) / kCols * kCols; }

// C[r][c] = sum_k A[r][k] * Bt[k][c] for r < rows, c < kBlockK (C row stride kBlockK),
// accumulated in Acc and rounded to Out once at the end. Every C[r][c] is a
// sequential madd chain over k, whatever the blocking: the forward and the
// backward, which recomputes the forward's scores, get the same bits.
// Register blocks of RB rows x kGemmCols columns: RB broadcasts of A and one row of
// Bt per k feed RB x kGemmCols multiply-adds. RB fills most of the vector register
// file with accumulators: 8 rows of 16 floats or doubles are 8 or 16 of AVX-512's 32
// registers; with 16 AVX2 registers, 6 rows of floats (12) or 3 of doubles (12).
// (On this project's 2-core AMD EPYC, fp32 inputs, one thread, N 2048: the forward
// 89 -> 80 ms at d 64 and 151 -> 130 ms at d 128, the backward 430 -> 400 ms and
// 744 -> 671 ms, against two rows of all 64 columns, whose accumulators spilled.)
inline constexpr int kGemmCols = 16;
#if defined(__AVX512F__)
template <class Acc>
inline constexpr int kGemmRows = 8;
#else
template <class Acc>
inline constexpr int kGemmRows = sizeof(Acc) == 4 ? 6 : 3;
#endif
template <int RB, class Acc, class Out>
inline void gemm_abt_block(const float* __restrict A, int lda, const float* __restrict Bt, int K, Out* __restrict C) {
  for (int c0 = 0; c0 < kBlockK; c0 += kGemmCols) {
    Acc acc[RB][kGemmCols] = {};
    for (int k = 0; k < K; ++k) {
      const float* b = Bt + std::int64_t(k) * kBlockK + c0;
      Acc bk[kGemmCols];
#pragma omp simd
      for (int c = 0; c < kGemmCols; ++c) bk[c] = Acc(b[c]);
#pragma GCC unroll 8
      for (int i = 0; i < RB; ++i) {
        const Acc x = A[std::int64_t(i) * lda + k];
#pragma omp simd
        for (int c = 0; c < kGemmCols; ++c) acc[i][c] = madd(x, bk[c], acc[i][c]);
      }
    }
#pragma GCC unroll 8
    for (int i = 0; i < RB; ++i) {
      Out* ci = C + std::int64_t(i) * kBlockK + c0;
#pragma omp simd
      for (int c = 0; c < kGemmCols; ++c) ci[c] = Out(acc[i][c]);
    }
  }
}
template <class Acc, class Out = float>
inline void gemm_abt_in(const float* __restrict A, int lda, int rows, const float* __restrict Bt, int K,
                        Out* __restrict C) {
  constexpr int RB = kGemmRows<Acc>;
  int r = 0;
  for (; r + RB <= rows; r += RB)
    gemm_abt_block<RB, Acc, Out>(A + std::int64_t(r) * lda, lda, Bt, K, C + std::int64_t(r) * kBlockK);
  for (; r < rows; ++r) gemm_abt_block<1, Acc, Out>(A + std::int64_t(r) * lda, lda, Bt, K, C + std::int64_t(r) * kBlockK);
}

// The score-like products S = Q K^T and dP = dO V^T. For fp32 inputs they are
// accumulated in fp64: a sequential fp32 dot product over head_dim 128..256
// carries several ulps of error into S, which exp() and the large dP - D of
// the backward amplify, and a plain fp32 sum would then be no more accurate
// than an unfused implementation. For 16-bit inputs each product is exact in
// fp32 and the inputs' own rounding dominates, so fp32 accumulation suffices.
// (The backward keeps fp32 inputs' S in fp64 all the way to P; see ProbTile.)
inline void gemm_abt(const float* __restrict A, int lda, int rows, const float* __restrict Bt, int K,
                     float* __restrict C, bool wide) {
  if (wide)
    gemm_abt_in<double>(A, lda, rows, Bt, K, C);
  else
    gemm_abt_in<float>(A, lda, rows, Bt, K, C);
}

// Y[o][:N] += sum_j P[o * so + j * sj] * X[j][:N] for o < outs, j < terms (N a
// multiple of kCols): the two products below, P X and P^T X, as strides of P. Each
// output row's sum is formed from zero over j in order and then added to Y: sums
// over many tiles (dK/dV over hundreds of query rows) round per tile, not per term.
// Output rows go in pairs that share each load of X; every row's sum runs over j in
// the same order either way, so the result does not depend on the pairing.
template <int RB>
inline void gemm_acc_rows(const float* __restrict P, std::int64_t so, std::int64_t sj, int terms,
                          const float* __restrict X, int ldx, int N, float* __restrict Y, int ldy) {
  for (int n0 = 0; n0 < N; n0 += kCols) {
    float acc[RB][kCols] = {};
    for (int j = 0; j < terms; ++j) {
      const float* x = X + std::int64_t(j) * ldx + n0;
#pragma GCC unroll 2
      for (int i = 0; i < RB; ++i) {
        const float pv = P[i * so + j * sj];
#pragma omp simd
        for (int n = 0; n < kCols; ++n) acc[i][n] = madd(pv, x[n], acc[i][n]);
      }
    }
#pragma GCC unroll 2
    for (int i = 0; i < RB; ++i) {
      float* y = Y + std::int64_t(i) * ldy + n0;
#pragma omp simd
      for (int n = 0; n < kCols; ++n) y[n] += acc[i][n];
    }
  }
}
inline void gemm_acc(const float* __restrict P, std::int64_t so, std::int64_t sj, int outs, int terms,
                     const float* __restrict X, int ldx, int N, float* __restrict Y, int ldy) {
  int o = 0;
  for (; o + 1 < outs; o += 2)
    gemm_acc_rows<2>(P + o * so, so, sj, terms, X, ldx, N, Y + std::int64_t(o) * ldy, ldy);
  if (o < outs) gemm_acc_rows<1>(P + o * so, so, sj, terms, X, ldx, N, Y + std::int64_t(o) * ldy, ldy);
}

// Y[r][:N] += sum_c P[r][c] * X[c][:N]  (P row stride kBlockK).
inline void gemm_ab_acc(const float* __restrict P, int rows, int cols, const float* __restrict X, int ldx, int N,
                        float* __restrict Y, int ldy) {
  gemm_acc(P, kBlockK, 1, rows, cols, X, ldx, N, Y, ldy);
}

// Y[c][:N] += sum_r P[r][c] * X[r][:N]  (Y = Y + P^T X).
inline void gemm_atb_acc(const float* __restrict P, int rows, int cols, const float* __restrict X, int ldx, int N,
                         float* __restrict Y, int ldy) {
  gemm_acc(P, 1, kBlockK, cols, rows, X, ldx, N, Y, ldy);
}

// exp(x), written so that a loop of it vectorizes: x = n ln2 + r with
// |r| <= ln2/2 (Cody-Waite: ln2 split in a short high part, so n * ln2_hi is
// exact, and a low part), e^r from a degree-7 Taylor polynomial (truncation
// < 1e-8 relative), times 2^n built in the exponent bits. Accurate to a few
// ulp for every argument; scaling x by log2(e) in fp32 instead would cost
// |x| * 2^-24 of relative accuracy, which P = exp(S - LSE) cannot afford.
// Arguments are clamped to [-87, 88] first (NaN takes the low bound), so the
// float -> int conversion is always defined; callers mask what that affects.
inline float exp_fast(float x) {
  x = x > -87.f ? x : -87.f;
  x = x < 88.f ? x : 88.f;
  const float n = std::floor(madd(x, 1.44269504088896341f, 0.5f));
  float r = madd(-n, 0.693145751953125f, x);
  r = madd(-n, 1.428606765330187e-06f, r);
  float p = 1.f / 5040.f;
  p = madd(p, r, 1.f / 720.f);
  p = madd(p, r, 1.f / 120.f);
  p = madd(p, r, 1.f / 24.f);
  p = madd(p, r, 1.f / 6.f);
  p = madd(p, r, 0.5f);
  p = madd(p, r, 1.f);
  p = madd(p, r, 1.f);
  const std::int32_t bits = (std::int32_t(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, 4);
  return p * scale;
}

// Keys a block of query rows [i0, i1) can see at all (visible ranges are
// monotone in the row index, so first/last row bound the union).
inline VisibleRange block_visible_keys(std::int64_t i0, std::int64_t i1, int sq, int sk, const AttnParams& p) {
  const VisibleRange first = visible_keys(i0, sq, sk, p.window_left, p.window_right);
  const VisibleRange last = visible_keys(i1 - 1, sq, sk, p.window_left, p.window_right);
  return {first.lo, last.hi};
}

// Columns [lo, hi) of a key tile starting at key j0 (width cols) that query
// row i sees.
struct ColRange {
  int lo, hi;
};
inline ColRange visible_cols(std::int64_t i, std::int64_t j0, int cols, int sq, int sk, const AttnParams& p) {
  const VisibleRange vr = visible_keys(i, sq, sk, p.window_left, p.window_right);
  auto clamp = [&](std::int64_t x) { return int(x < 0 ? 0 : (x > cols ? cols : x)); };
  return {clamp(vr.lo - j0), clamp(vr.hi - j0)};
}

}  // namespace flashpp::cpu
