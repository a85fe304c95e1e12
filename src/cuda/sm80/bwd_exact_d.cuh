#pragma once
// Exact D for rows whose softmax is concentrated on one key.
//
// The backward's dS = P (dP - D) takes D = rowsum(dO * O) from O rounded to 16 bits
// (bwd_prep.cuh). With most of a row's mass on one key, dP - D of that key is a
// small difference, (1 - P) times the spread of dP in the row, while the rounding
// of O puts an error of about u |dP| / 4 into D (u: the dtype's unit roundoff).
// dK = scale * sum dS q (and dQ) carry that error times q; under large logits
// (|q| ~ 100) it is many times the error of an unfused computation, whose D =
// sum P dP keeps the cancellation. The fix costs two of the backward's five
// products over the affected rows, so it runs only where needed:
//   1. the main kernel (bwd_kernel.cuh) flags the row groups of a warp's query
//      share (flag_q) when one of its stored 16-bit P reaches kLongRowConcentrated,
//      the lowest of the thresholds below: a packed max and one vote per step, no
//      per-row work in its loop. When the vote fires on a masked step whose rows
//      all see at most kShortRowKeys keys, it is retaken at one_hot_probability
//      without a single-key first row (causal heads' first blocks);
//   2. the exact-D pass (bwd_dq_kernel.cuh, ExactD) runs over the flagged query
//      blocks. It recomputes S and dP of their rows over every visible key, in the
//      main kernel's mma orientation and order, so every P and dP is bitwise the
//      main kernel's, and applies each row's threshold to its stored P,
//      concentrated_probability<T>(keys of the row):
//      - rows with more than kShortRowKeys keys (D from O) from 1/2: the relative
//        error of dS of the top key is about (u / 4) / (1 - P). By a CPU emulation
//        of single rows (65-465 keys, |q| up to 100, the tolerance rule of the
//        tests) D from O fails 2-35% of the rows with a top P in [1/2, 1 - 1e-4)
//        and 0.04-0.1% of those below 1/2;
//      - rows with 2 .. kShortRowKeys keys, whose D the short-row pass sums exactly
//        in fp32 (bwd_short_rows.cuh) but in another order than the mma that gives
//        the main kernel its dP, only when the row is one-hot: where the unfused
//        form's P rounds to 1 (above about 1 - 2^-9 in bf16 and 1 - 2^-12 in fp16;
//        the thresholds keep a 2x margin);
//      - a row with one visible key never: O is that key's v exactly, and the D of
//        bwd_prep.cuh is already its dP.
//      Keys at or above their row's threshold mark their group (hot_k). A warp
//      with a concentrated row among its 16 forms D = sum P dP / sum P
//      (ShiftedSum) for all 16, writes it to dsum and its difference from the used
//      D to ddelta, and marks their groups (hot_q);
//   3. the fix pass (bwd_kernel.cuh, Fix) redoes dK of the marked key blocks with
//      that D (overwriting it, so it is rounded once) and adds -P * delta K to the
//      dQ accumulator on steps with marked rows (in deterministic mode bwd_dq_kernel
//      reads the new D instead).
// The other keys of a marked row hold at most 1 - P of its mass and their dP - D
// does not cancel, so their dS keeps the relative error of D (~u / 4): their dK is
// left as it was.
// Random inputs of unit scale never reach P = 1/2 beyond a few keys per row, and
// rows of at most kShortRowKeys keys are flagged only from their own threshold
// (step 1), so both extra passes mostly exit on their first loads of *any_flag,
// *any_hot and the group bytes.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "cuda/common/element.cuh"
#include "cuda/ptx/cp_async.cuh"
#include "cuda/ptx/math.cuh"
#include "cuda/sm80/bwd_args.hpp"

namespace flashpp::cuda::sm80 {

// The 16-bit P from which a row with `keys` visible keys is marked (see above).
inline constexpr float kLongRowConcentrated = 0.5f;
template <typename T>
__host__ __device__ constexpr float one_hot_probability() {
  return std::is_same_v<T, __half> ? 1.f - 1.f / 2048.f : 1.f - 1.f / 256.f;
}
template <typename T>
__device__ __forceinline__ float concentrated_probability(int keys) {
  return keys > kShortRowKeys ? kLongRowConcentrated : keys > 1 ? one_hot_probability<T>() : 2.f;
}

// Elementwise max of two pairs of 16-bit probabilities (one HMNMX2; ptxas fuses
// a chain of them into three-input VHMNMX).
template <typename T>
__device__ __forceinline__ std::uint32_t max_pair(std::uint32_t a, std::uint32_t b) {
  if constexpr (std::is_same_v<T, __half>)
    return ptx::max_f16x2(a, b);
  else
    return ptx::max_bf16x2(a, b);
}

// Whether any group of kHotGroupRows rows in [row0, row0 + rows) is marked.
__device__ __forceinline__ bool any_group_marked(const unsigned char* marks, std::int64_t row0, int rows) {
  if (rows <= 0) return false;
  for (std::int64_t gi = row0 / kHotGroupRows; gi <= (row0 + rows - 1) / kHotGroupRows; ++gi)
    if (marks[gi] != 0) return true;
  return false;
}

// The exact-D and fix passes run on every backward and almost never have work; as
// full grids, their blocks would start in waves only to read a flag and exit. Each is
// launched with at most one wave (one_wave, launch_common.cuh) and walks the
// nx x ny x nz blocks of the grid it stands for: block(x, y, z) per block, the block's
// copies drained and a barrier between two, since the next reuses shared memory.
template <typename Block>
__device__ __forceinline__ void walk_blocks(int nx, int ny, int nz, Block&& block) {
  const std::int64_t total = std::int64_t(nx) * ny * nz;
  for (std::int64_t i = blockIdx.x; i < total; i += gridDim.x) {
    block(int(i % nx), int(i / nx % ny), int(i / (std::int64_t(nx) * ny)));
    ptx::cp_async_wait_group<0>();
    __syncthreads();
  }
}

// Main kernel: flags the row groups of `count` global query rows from row0 of head h
// (one lane per group) and sets *any_flag. Called by a whole warp.
__device__ __forceinline__ void flag_query_groups(const BwdArgs& a, int h, std::int64_t row0, int count, int lane) {
  if (count <= 0) return;
  const std::int64_t g0 = row0 / kHotGroupRows, groups = (row0 + count - 1) / kHotGroupRows - g0 + 1;
  if (lane < groups) a.flag_q[std::int64_t(h) * a.hot_q_head_stride + g0 + lane] = 1;
  if (lane == 0) *a.any_flag = 1;
}

// A probability as the main kernel stored it (rounded to T): the thresholds apply
// to that value.
template <typename T>
__device__ __forceinline__ float stored_probability(float pr) {
  float lo, hi;
  unpack2<T>(Element<T>::pack(pr, 0.f), lo, hi);
  return lo;
}

// sum P dP / sum P over a row's keys, kept relative to the dP of the most probable
// key so far (`shift`): for a one-hot row the result is that key's dP bit for bit,
// the other keys adding their P (dP - shift) well below its last bit. Partial sums
// of the same row merge like two LSEs.
struct ShiftedSum {
  float shift = 0.f, top = 0.f, rel = 0.f, mass = 0.f;

  __device__ __forceinline__ void add(float pr, float dp) {
    if (pr > top) {
      rel += (shift - dp) * mass;
      shift = dp;
      top = pr;
    }
    rel += pr * (dp - shift);
    mass += pr;
  }
  __device__ __forceinline__ void merge(const ShiftedSum& o) {
    if (o.top > top) {
      rel = o.rel + rel + (shift - o.shift) * mass;
      shift = o.shift;
      top = o.top;
    } else {
      rel += o.rel + (o.shift - shift) * o.mass;
    }
    mass += o.mass;
  }
  __device__ __forceinline__ ShiftedSum shuffled_xor(int mask) const {
    ShiftedSum o;
    o.shift = __shfl_xor_sync(0xffffffffu, shift, mask);
    o.top = __shfl_xor_sync(0xffffffffu, top, mask);
    o.rel = __shfl_xor_sync(0xffffffffu, rel, mask);
    o.mass = __shfl_xor_sync(0xffffffffu, mass, mask);
    return o;
  }
  // D, or `fallback` for a row that saw no probability mass.
  __device__ __forceinline__ float value(float fallback) const { return mass > 0.f ? shift + rel / mass : fallback; }
};

}  // namespace flashpp::cuda::sm80
