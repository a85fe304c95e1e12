#pragma once
// Warp-level tile products on mma.m16n8k16: acc[MT][NT] (16x8 blocks) += A * B over
// KSTEPS k16 steps. A comes from shared memory or from registers (a probability or
// gradient tile produced by the previous product); B always from shared memory.
#include <cstdint>

#include "cuda/common/element.cuh"
#include "cuda/common/fragments.cuh"

namespace flashpp::cuda {

// AStep / BStep: the operand's loads are addressed from its first one by
// stepped_addr (fragments.cuh), which requires that operand's first chunk, k0 / 8
// for a [m][k] tile or m0 / 8 (n0 / 8) for a [k][m] one, to be a multiple of the
// tile's swizzle group (every caller's k0 is 0; the [k][m] callers whose warp
// offsets break it pass false and take the general form).
template <typename T, class ATile, Major AM, class BTile, Major BM, int MT, int NT, int KSTEPS, bool AStep = true,
          bool BStep = true>
__device__ __forceinline__ void gemm_ss(float (&acc)[MT][NT][4], std::uint32_t a_tile, int m0, int a_k0,
                                        std::uint32_t b_tile, int n0, int b_k0, int lane) {
  static_assert(NT % 2 == 0, "B fragments are loaded in pairs");
  const std::uint32_t a_base = a_lane_addr<ATile, AM>(a_tile, m0, a_k0, lane);
  const std::uint32_t b_base = b_lane_addr<BTile, BM>(b_tile, n0, b_k0, lane);
#pragma unroll
  for (int ks = 0; ks < KSTEPS; ++ks) {
    std::uint32_t a[MT][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
      load_a_at<AM>(a[mt], AStep ? stepped_addr<ATile, AM>(a_base, mt, ks)
                                 : a_lane_addr<ATile, AM>(a_tile, m0 + mt * 16, a_k0 + ks * 16, lane));
#pragma unroll
    for (int np = 0; np < NT / 2; ++np) {
      std::uint32_t b0[2], b1[2];
      load_b_pair_at<BM>(b0, b1, BStep ? stepped_addr<BTile, BM>(b_base, np, ks)
                                       : b_lane_addr<BTile, BM>(b_tile, n0 + np * 16, b_k0 + ks * 16, lane));
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        Element<T>::mma(acc[mt][2 * np], a[mt], b0);
        Element<T>::mma(acc[mt][2 * np + 1], a[mt], b1);
      }
    }
  }
}

// A from registers: a[MT][KSTEPS][4] already in fragment layout.
template <typename T, class BTile, Major BM, int MT, int NT, int KSTEPS, bool BStep = true>
__device__ __forceinline__ void gemm_rs(float (&acc)[MT][NT][4], const std::uint32_t (&a)[MT][KSTEPS][4],
                                        std::uint32_t b_tile, int n0, int b_k0, int lane) {
  static_assert(NT % 2 == 0, "B fragments are loaded in pairs");
  const std::uint32_t b_base = b_lane_addr<BTile, BM>(b_tile, n0, b_k0, lane);
#pragma unroll
  for (int ks = 0; ks < KSTEPS; ++ks) {
#pragma unroll
    for (int np = 0; np < NT / 2; ++np) {
      std::uint32_t b0[2], b1[2];
      load_b_pair_at<BM>(b0, b1, BStep ? stepped_addr<BTile, BM>(b_base, np, ks)
                                       : b_lane_addr<BTile, BM>(b_tile, n0 + np * 16, b_k0 + ks * 16, lane));
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        Element<T>::mma(acc[mt][2 * np], a[mt][ks], b0);
        Element<T>::mma(acc[mt][2 * np + 1], a[mt][ks], b1);
      }
    }
  }
}

// Accumulator blocks (16x8, f32) -> A fragments (16x16, T) of the next product, whose
// k index is the accumulator's column: k step ks takes column blocks 2ks and 2ks+1.
template <typename T, int MT, int NT>
__device__ __forceinline__ void acc_to_a(std::uint32_t (&a)[MT][NT / 2][4], const float (&acc)[MT][NT][4]) {
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int ks = 0; ks < NT / 2; ++ks) {
      a[mt][ks][0] = Element<T>::pack(acc[mt][2 * ks][0], acc[mt][2 * ks][1]);
      a[mt][ks][1] = Element<T>::pack(acc[mt][2 * ks][2], acc[mt][2 * ks][3]);
      a[mt][ks][2] = Element<T>::pack(acc[mt][2 * ks + 1][0], acc[mt][2 * ks + 1][1]);
      a[mt][ks][3] = Element<T>::pack(acc[mt][2 * ks + 1][2], acc[mt][2 * ks + 1][3]);
    }
}

template <int MT, int NT>
__device__ __forceinline__ void zero(float (&acc)[MT][NT][4]) {
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[mt][nt][e] = 0.f;
}

}  // namespace flashpp::cuda
