#pragma once
// Launchers and table entries of the FA2-class kernels, instantiated once per
// (dtype, head dim) by the files under instances/.
#include <cuda_runtime.h>

#include <cstddef>

#include "common/mask.hpp"
#include "cuda/check.hpp"
#include "cuda/launch_common.cuh"
#include "cuda/registry.hpp"
#include "cuda/sm80/bwd_dq_kernel.cuh"
#include "cuda/sm80/bwd_kernel.cuh"
#include "cuda/sm80/fwd_kernel.cuh"
#include "cuda/sm80/fwd_persistent_kernel.cuh"
#include "cuda/sm80/tile_configs.hpp"

namespace flashpp::cuda::sm80 {

#if FLASHPP_SM80_TUNING
inline constexpr bool kTuningBuild = true;
#else
inline constexpr bool kTuningBuild = false;
#endif

// Forward kernels a build compiles: the head dim's rules (rescale, full-tile copies),
// and in tuning builds every combination.
template <int D, bool Lazy, bool FullKV>
inline constexpr bool kFwdCompiled =
    (Lazy == fwd_lazy_rescale(D) && FullKV == fwd_full_tile_copies(D)) || kTuningBuild;

// Tile variant 1 (tile_configs.hpp): one block per (query block, head, batch), two
// blocks per SM.
template <typename T, int D, bool Lazy, bool FullKV>
void launch_fwd_short_tiles(const AttnParams& p, const LaunchArgs& a) {
  constexpr FwdTiles t = fwd_tiles(D, 1);
  const dim3 grid(blocks(p.seqlen_q, t.block_m), p.heads_q, p.batch);
  launch_kernel(fwd_kernel<T, D, Lazy, FullKV, false, 1>, grid, t.warps * 32, sizeof(FwdSmem<D, 1>), a.stream,
                "forward kernel (64-row tiles)", p);
}

template <typename T, int D, bool Lazy, bool FullKV, bool Skip>
void launch_fwd_kernel(const AttnParams& p, const LaunchArgs& a) {
  constexpr FwdTiles t = fwd_tiles(D);
  if constexpr (fwd_persist(D)) {
    if (fwd_persist_pays(p.seqlen_k)) {
      // One block of threads per SM (one wave), each walking query blocks in rounds.
      const long long tiles = (long long)blocks(p.seqlen_q, t.block_m) * p.heads_q * p.batch;
      auto kernel = fwd_persistent_kernel<T, D, Lazy, FullKV, Skip>;
      launch_kernel(kernel, dim3(one_wave(kernel, t.warps * 32, sizeof(FwdSmem<D>), tiles)), t.warps * 32,
                    sizeof(FwdSmem<D>), a.stream, "forward kernel (persistent)", p);
      return;
    }
  }
  const dim3 grid(blocks(p.seqlen_q, t.block_m), p.heads_q, p.batch);
  launch_kernel(fwd_kernel<T, D, Lazy, FullKV, Skip>, grid, t.warps * 32, sizeof(FwdSmem<D>), a.stream,
                Lazy ? "forward kernel (lazy rescale)" : "forward kernel", p);
}

// Tile variant 1 where the head dim has it and either FLASHPP_SM80_FWD_TILES=0|1
// forces it (read per call, so one process can compare both on the same inputs) or
// the call is masked with few keys (fwd_short_tiles_pay). Otherwise the warp-skip
// flavour where the head dim has it, a window bounds some row's keys (causal
// included; without a window no warp can leave a tile out) and the keys are few
// enough that the diagonal tiles it thins out outweigh its longer loop
// (fwd_warp_skip_pays).
template <typename T, int D, bool Lazy, bool FullKV>
void launch_fwd_flavour(const AttnParams& p, const LaunchArgs& a) {
  const bool masked = has_window(p.window_left, p.window_right);
  if constexpr (fwd_has_variant(D, 1)) {
    const int forced = forced_variant("FLASHPP_SM80_FWD_TILES", kFwdVariants);
    if (forced == 1 || (forced < 0 && masked && fwd_short_tiles_pay(D, p.seqlen_k)))
      return launch_fwd_short_tiles<T, D, Lazy, FullKV>(p, a);
  }
  if constexpr (fwd_warp_skip(D)) {
    if (masked && fwd_warp_skip_pays(p.seqlen_k)) return launch_fwd_kernel<T, D, Lazy, FullKV, true>(p, a);
  }
  launch_fwd_kernel<T, D, Lazy, FullKV, false>(p, a);
}

// The forward for this call: the head dim's rules, or what FLASHPP_SM80_FWD_LAZY=0|1
// and FLASHPP_SM80_FWD_FULL_COPY=0|1 force in a tuning build (read per call, so one
// benchmark process can compare them).
template <typename T, int D>
void launch_fwd(const AttnParams& p, const LaunchArgs& a) {
  bool lazy = fwd_lazy_rescale(D), full = fwd_full_tile_copies(D);
  if constexpr (kTuningBuild) {
    const int l = forced_variant("FLASHPP_SM80_FWD_LAZY", 2);
    if (l >= 0) lazy = l == 1;
    const int f = forced_variant("FLASHPP_SM80_FWD_FULL_COPY", 2);
    if (f >= 0) full = f == 1;
  }
  with_variant<2>(int(lazy), [&](auto l) {
    with_variant<2>(int(full), [&](auto f) {
      constexpr bool kL = decltype(l)::value == 1, kF = decltype(f)::value == 1;
      if constexpr (kFwdCompiled<D, kL, kF>) launch_fwd_flavour<T, D, kL, kF>(p, a);
    });
  });
}

// Backward variants a build compiles: variant 0, and in tuning builds every
// variant the head dim has.
template <int D, int V>
inline constexpr bool kBwdCompiled = bwd_has_variant(D, V) && (V == 0 || kTuningBuild);

// The backward variant for this call: 0, or what FLASHPP_SM80_BWD_TILES forces in
// a tuning build where this head dim has it (read per call, so one benchmark
// process can compare variants).
template <int D>
int bwd_tile_variant() {
  if constexpr (kTuningBuild) {
    const int v = forced_variant("FLASHPP_SM80_BWD_TILES", kBwdVariants);
    if (v >= 0 && bwd_has_variant(D, v)) return v;
  }
  return 0;
}

// The two passes of bwd_exact_d.cuh after a main kernel (this family's or the Hopper
// backward's), which return at once unless the main kernel marked a row. With
// partial_keys there is no exact D to form (O covers keys this call does not see),
// so they are not launched.
template <typename T, int D, int V>
void launch_bwd_fix_passes(const AttnParams& p, const LaunchArgs& a) {
  constexpr BwdTiles t = bwd_tiles(D, V);
  const dim3 grid(blocks(p.seqlen_k, t.block_n), p.heads_kv, p.batch);
  if (p.partial_keys || a.bwd.any_hot == nullptr) return;
  // Both passes walk their blocks from one wave (walk_blocks, bwd_exact_d.cuh says why).
  constexpr DqTiles dt = dq_tiles(D);
  const long long dq_blocks = (long long)blocks(p.seqlen_q, dt.block_m) * p.heads_q * p.batch;
  launch_kernel(bwd_dq_kernel<T, D, true>,
                dim3(one_wave(bwd_dq_kernel<T, D, true>, dt.warps * 32, sizeof(DqSmem<D>), dq_blocks)),
                dt.warps * 32, sizeof(DqSmem<D>), a.stream, "backward exact-D pass", p, a.bwd);
  const long long fix_blocks = (long long)grid.x * grid.y * grid.z;
  launch_kernel(bwd_kernel<T, D, V, true>,
                dim3(one_wave(bwd_kernel<T, D, V, true>, t.warps * 32, sizeof(BwdSmem<D, V>), fix_blocks)),
                t.warps * 32, sizeof(BwdSmem<D, V>), a.stream, "backward fix pass", p, a.bwd);
}

// The main kernel, then the fix passes.
template <typename T, int D, int V>
void launch_bwd_tiles(const AttnParams& p, const LaunchArgs& a) {
  constexpr BwdTiles t = bwd_tiles(D, V);
  const dim3 grid(blocks(p.seqlen_k, t.block_n), p.heads_kv, p.batch);
  launch_kernel(bwd_kernel<T, D, V>, grid, t.warps * 32, sizeof(BwdSmem<D, V>), a.stream, "backward kernel", p, a.bwd);
  launch_bwd_fix_passes<T, D, V>(p, a);
}

template <typename T, int D>
void launch_bwd(const AttnParams& p, const LaunchArgs& a) {
  with_variant<kBwdVariants>(bwd_tile_variant<D>(), [&](auto v) {
    if constexpr (kBwdCompiled<D, decltype(v)::value>) launch_bwd_tiles<T, D, decltype(v)::value>(p, a);
  });
}


template <typename T, int D>
void launch_bwd_dq(const AttnParams& p, const LaunchArgs& a) {
  constexpr DqTiles t = dq_tiles(D);
  launch_kernel(bwd_dq_kernel<T, D>, dim3(blocks(p.seqlen_q, t.block_m), p.heads_q, p.batch), t.warps * 32,
                sizeof(DqSmem<D>), a.stream, "deterministic dQ kernel", p, a.bwd);
}

template <typename T, int D>
cudaError_t fwd_attributes(cudaFuncAttributes* attr) {
  return cudaFuncGetAttributes(attr, fwd_kernel<T, D, fwd_lazy_rescale(D), fwd_full_tile_copies(D)>);
}
template <typename T, int D>
cudaError_t bwd_attributes(cudaFuncAttributes* attr) { return cudaFuncGetAttributes(attr, bwd_kernel<T, D>); }
template <typename T, int D>
cudaError_t bwd_dq_attributes(cudaFuncAttributes* attr) { return cudaFuncGetAttributes(attr, bwd_dq_kernel<T, D>); }

template <typename T, int D>
KernelEntry fwd_entry() {
  return {80, Pass::forward, elem_type_of<T>(), D, sizeof(FwdSmem<D>), &launch_fwd<T, D>, &fwd_attributes<T, D>};
}
template <typename T, int D>
KernelEntry bwd_entry() {
  // Variant 0's shared memory: what select() checks for the default path (a forced
  // tuning variant that needs more fails at launch with the CUDA error).
  return {80,           Pass::backward,           elem_type_of<T>(),
          D,            sizeof(BwdSmem<D>),       &launch_bwd<T, D>,
          &bwd_attributes<T, D>, &launch_bwd_fix_passes<T, D, 0>};
}
template <typename T, int D>
KernelEntry bwd_dq_entry() {
  return {80, Pass::backward_dq, elem_type_of<T>(), D, sizeof(DqSmem<D>), &launch_bwd_dq<T, D>,
          &bwd_dq_attributes<T, D>};
}

}  // namespace flashpp::cuda::sm80
