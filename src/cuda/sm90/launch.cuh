#pragma once
// Launcher and table entry of the Hopper forward, instantiated once per
// (dtype, head dim) by the files under instances/ (fwd90_*).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdlib>
#include <string_view>

#include "cuda/check.hpp"
#include "cuda/launch_common.cuh"
#include "cuda/registry.hpp"
#include "cuda/sm90/fwd_kernel.cuh"
#include "cuda/sm90/fwd_tiles.hpp"
#include "cuda/sm90/plain_loop.hpp"
#include "cuda/sm90/tensor_maps.hpp"

namespace flashpp::cuda::sm90 {

// L2 bytes of the current device (head groups keep their K/V within half of it:
// the rest holds the Q and O streams, and on H100/H200 each half of the L2 serves
// its own half of the SMs).
inline long long l2_bytes() { return device_attribute(cudaDevAttrL2CacheSize, "cudaDeviceGetAttribute(L2 size)"); }

// The launch's runtime choices (fwd_epilogue.cuh). Defaults from the same-run
// A/B on an H100 (docs/hopper_forward.md, "Runtime knobs"):
//  - TMA-store epilogue for head dims from 128 on the narrow tiles (variant 0):
//    +2-20% at 512-2K keys; at head dim 64 and on the wide tiles it lost up to 5%;
//  - snake rounds for masked orders: causal +6-21% from 4K keys, unmasked neutral;
//  - dynamic schedule for varlen batches (+2-40% on the --varlen batches; with
//    head groups by rule, tile_order.cuh, causal d 128 +5-20% more), and for
//    masked ones from head dim 128 where the rule cuts head groups, when the caller
//    passed the workspace (forward_workspace_bytes): causal +25-33% at 512-2K
//    keys (d 128; d 256 at 512-1K), +1-6% at d 128 4K; at head dim 64, groups of
//    86 pairs over 1K-2K keys (+3.3-3.9%; head_group_rule_d64);
//  - one Q buffer: the second lost 0-5% (predicted a gain; see the doc);
//  - the half-width first key tile for masked calls (d 64 / 128): d 64 causal
//    +1 to +3.4%, d 128 within +-1.5% but causal 1K (+3.9%, a noisy base);
//  - the plain-loop kernel where it is safe (plain_loop.hpp) and pays
//    (plain_loop_pays): d 128 / 256 +3-6% from 2K keys.
// The environment overrides each per call, so one process can compare them:
// FLASHPP_SM90_O_STORE=tma|direct, FLASHPP_SM90_ORDER=snake|plain,
// FLASHPP_SM90_SCHEDULE=dynamic|static, FLASHPP_SM90_Q_BUFFERS=2|1,
// FLASHPP_SM90_HEAD_GROUP=<pairs per group, 0 = none>, FLASHPP_SM90_HALF_FIRST=on|off,
// FLASHPP_SM90_PLAIN_LOOP=on|off; FLASHPP_SM90_GRID=<blocks> (launch_fwd_tiles).
inline int env_choice(const char* name, std::string_view on, std::string_view off, bool fallback) {
  const char* v = std::getenv(name);
  if (v != nullptr && on == v) return 1;
  if (v != nullptr && off == v) return 0;
  return fallback ? 1 : 0;
}
inline FwdKnobs fwd_knobs(const AttnParams& p, const LaunchArgs& a, const FwdTiles& t, int variant, int grid) {
  FwdKnobs k;
  const bool masked = has_window(p.window_left, p.window_right);
  const bool varlen = p.cu_seqlens_q != nullptr;
  // Head groups by rule for varlen batches and masked calls from head dim 128,
  // and at head dim 64 by its own rule (tile_order.cuh), when there is a counter
  // to claim with; masked calls claim tiles only where a rule cuts groups: the
  // claimed order alone was 0.97-1.03 of the static one.
  int groups = 0;
  if (a.tile_counter != nullptr && (varlen || (masked && t.head_dim >= 128)))
    groups = head_group_rule(p, grid, l2_bytes() / 2);
  else if (a.tile_counter != nullptr && masked && t.head_dim == 64)
    groups = head_group_rule_d64(p, grid);
  if (env_choice("FLASHPP_SM90_SCHEDULE", "dynamic", "static", varlen || groups > 0))
    k.tile_counter = a.tile_counter;
  k.o_tma = env_choice("FLASHPP_SM90_O_STORE", "tma", "direct", t.head_dim >= 128 && variant == 0) &&
            o_store_problem(p).empty();
  k.snake = env_choice("FLASHPP_SM90_ORDER", "snake", "plain", masked);
  k.q_double = env_choice("FLASHPP_SM90_Q_BUFFERS", "2", "1", false);
  k.half_first = env_choice("FLASHPP_SM90_HALF_FIRST", "on", "off", masked);
  // Groups break the longest-first order the static rounds rely on: by rule only
  // with the dynamic schedule.
  k.head_group = env_count("FLASHPP_SM90_HEAD_GROUP", k.tile_counter != nullptr ? groups : 0);
  return k;
}

// Whether the plain-loop kernel pays at this head dim and key count. Same run on
// an H100 (three rounds, over the kernel with the generic loop): d 128 unmasked
// +1.6 / +4.0 / +3.2 / +6.0 / +5.4 / +5.9% at 512 .. 16K, causal +2.4 / +6.4 /
// +5.3% at 1K / 2K / 4K (8K and up take the 176-key tile, plain with its second
// key tile peeled: +4.5 / +6% at 8K / 16K, bench/results/h100-2026-12-07-s11-run1);
// d 256 unmasked +0.7 to +5.1% from 1K, causal +1.2 / +4.2% at 1K / 2K;
// d 64 +0.9 to +2.8% unmasked, causal within +-1%. At 512 keys d 256 lost 1.9%
// (unmasked) and 2.3% (causal) and d 128 causal 4.4% (a noisy cell), so from
// 1K keys only, but at d 64 (+2.8 / +1.3% at 512).
constexpr bool plain_loop_pays(int d, long long seqlen_k) { return d == 64 || seqlen_k > 512; }

// Whether this call runs the plain-loop kernel (plain_loop.hpp): where it is safe
// and pays, unless FLASHPP_SM90_PLAIN_LOOP=on|off forces it (read per call).
inline bool plain_loop_choice(const AttnParams& p, const FwdTiles& t) {
  return env_choice("FLASHPP_SM90_PLAIN_LOOP", "on", "off", plain_loop_pays(t.head_dim, p.seqlen_k)) &&
         plain_loop_safe(p, t.block_m, t.block_n);
}

template <typename T, int D, int V>
void launch_fwd_tiles(const AttnParams& p, const LaunchArgs& a) {
  constexpr FwdTiles t = fwd_tiles(D, V);
  const TileOrder order = TileOrder::make(p, t.block_m);
  if (order.count == 0) return;
  // FLASHPP_SM90_GRID=<blocks> caps the persistent grid, so that tests of small
  // shapes still walk many tiles per block (the paths between one tile and the next).
  const int blocks = std::max(1, env_count("FLASHPP_SM90_GRID", multiprocessors()));
  const unsigned grid = unsigned(std::min(order.count, blocks));
  const FwdKnobs knobs = fwd_knobs(p, a, t, V, int(grid));
  FwdMaps maps = encode_fwd_maps(p, t.block_m, t.block_n);
  if (knobs.o_tma != 0) encode_o_map(p, &maps.o);
  // The counter starts at zero each call (a memset node under graph capture).
  if (knobs.tile_counter != nullptr)
    check_cuda(cudaMemsetAsync(knobs.tile_counter, 0, sizeof(int), a.stream), "cudaMemsetAsync(tile counter)");
  const auto kernel = plain_loop_choice(p, t) ? fwd_kernel<T, D, V, true> : fwd_kernel<T, D, V>;
  launch_kernel(kernel, dim3(grid), fwd_threads(t), fwd_launch_smem(t, knobs.o_tma != 0), a.stream,
                "Hopper forward kernel", p, maps, knobs);
}

#if FLASHPP_SM90_TUNING
inline constexpr bool kTuningBuild = true;
#else
inline constexpr bool kTuningBuild = false;
#endif

// Variants a build compiles: those the rule of fwd_tiles.hpp can pick, and in
// tuning builds every variant the head dim has.
constexpr bool compiled_variant(int d, int v, bool tuning) {
  return fwd_has_variant(d, v) && (tuning || fwd_rule_picks(d, v));
}
template <int D, int V>
inline constexpr bool kCompiled = compiled_variant(D, V, kTuningBuild);

// The tile variant for this call: the rule of fwd_tiles.hpp, or what
// FLASHPP_SM90_TILES forces where this build compiled it for this head dim (read
// per call, so one benchmark process can compare variants). A default build has
// the variants the rule picks on either side of its thresholds, so the
// thresholds can be re-checked without a tuning build.
template <int D>
int fwd_tile_variant(const AttnParams& p) {
  const int v = forced_variant("FLASHPP_SM90_TILES", kTileVariants);
  if (v >= 0 && compiled_variant(D, v, kTuningBuild)) return v;
  return fwd_default_variant(D, p.seqlen_k, has_window(p.window_left, p.window_right));
}

template <typename T, int D>
void launch_fwd(const AttnParams& p, const LaunchArgs& a) {
  with_variant<kTileVariants>(fwd_tile_variant<D>(p), [&](auto v) {
    if constexpr (kCompiled<D, decltype(v)::value>) launch_fwd_tiles<T, D, decltype(v)::value>(p, a);
  });
}

// Attributes (registers, spills) of the variant short calls run, which the
// device tests of the kernel wrappers read.
inline constexpr long long kShortKeys = 512;
template <typename T, int D>
cudaError_t fwd_attributes(cudaFuncAttributes* attr) {
  return cudaFuncGetAttributes(attr, fwd_kernel<T, D, fwd_default_variant(D, kShortKeys, false)>);
}

// The largest shared-memory need of the variants this build compiles.
constexpr std::size_t compiled_smem(int d, bool tuning) {
  std::size_t most = 0;
  for (int v = 0; v < kTileVariants; ++v)
    if (compiled_variant(d, v, tuning)) most = std::max(most, fwd_launch_smem(fwd_tiles(d, v), true));
  return most;
}

template <typename T, int D>
KernelEntry fwd_entry() {
  return {90, Pass::forward, elem_type_of<T>(), D, compiled_smem(D, kTuningBuild), &launch_fwd<T, D>, &fwd_attributes<T, D>};
}

}  // namespace flashpp::cuda::sm90
