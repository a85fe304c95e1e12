#pragma once
// Exact D for rows whose softmax sits on one key.
//
// The backward's dS = P (dP - D) takes D = rowsum(dO * O) from O rounded to 16 bits
// (bwd_prep.cuh). For a row with one key at P ~ 1, dP - D of that key is the
// softmax's own tiny difference, and the rounding of O becomes most of it; dK =
// scale * sum dS q (and dQ) then carry that rounding times q, which under large
// logits (|q| ~ 100) is many times the error of an unfused computation, whose P
// rounds to 1 and whose D rounds to that key's dP. The fix costs two of the
// backward's five products over the affected rows, so it runs only where needed:
//   1. the main kernel (bwd_kernel.cuh) marks groups of rows and keys where it saw
//      P above hot_probability<T>() (the unfused form's P rounds to 1 above about
//      1 - 2^-9 in bf16 and 1 - 2^-12 in fp16; the threshold keeps a 2x margin) in
//      a row with more than one visible key (with one, O is that key's v exactly
//      and the mma-order D of bwd_prep.cuh is already its dP);
//   2. the exact-D pass (bwd_dq_kernel.cuh, ExactD) recomputes S and dP of the
//      marked rows over every visible key, in the main kernel's mma orientation
//      and order, so every P and dP is bitwise the main kernel's, and forms
//      D = sum P dP / sum P (ShiftedSum), writing it to dsum and its difference
//      from the used D to ddelta;
//   3. the fix pass (bwd_kernel.cuh, Fix) redoes dK of the marked key blocks with
//      that D (overwriting it, so it is rounded once) and adds -P * delta K to the
//      dQ accumulator (in deterministic mode bwd_dq_kernel reads the new D instead).
// Keys of a marked row outside the marked key blocks have P < 1 - threshold in sum,
// so leaving their dK as it was is an error below that fraction of the correction.
// Without marks both extra passes exit on their first load of *any_hot.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "cuda/sm80/bwd_args.hpp"

namespace flashpp::cuda::sm80 {

template <typename T>
__host__ __device__ constexpr float hot_probability() {
  return std::is_same_v<T, __half> ? 1.f - 1.f / 2048.f : 1.f - 1.f / 256.f;
}

// Whether any group of kHotGroupRows rows in [row0, row0 + rows) is marked.
__device__ __forceinline__ bool any_group_marked(const unsigned char* marks, std::int64_t row0, int rows) {
  if (rows <= 0) return false;
  for (std::int64_t gi = row0 / kHotGroupRows; gi <= (row0 + rows - 1) / kHotGroupRows; ++gi)
    if (marks[gi] != 0) return true;
  return false;
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
