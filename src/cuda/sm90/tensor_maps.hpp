#pragma once
// TMA descriptors (CUtensorMap) of the Hopper forward's Q, K and V, encoded on the
// host through the driver entry point cuTensorMapEncodeTiled (fetched once through
// cudaGetDriverEntryPointByVersion, so no link-time dependency on libcuda).
// Each is a 4-d view (head dim, rows, heads, batch) of the caller's strided tensor
// with a box of 64 columns x `box_rows` rows and the 128-byte swizzle.
#include <cuda.h>

#include <string>

#include "common/params.hpp"

namespace flashpp::cuda::sm90 {

struct FwdMaps {
  CUtensorMap q, k, v;
  CUtensorMap o;  // encoded only for the TMA-store epilogue (boxes of 64 columns x 64 rows)
};

// The Hopper backward's loads (bwd_kernel.cuh): Q and dO in boxes of 64 columns x
// block_m rows, K and V in boxes of 64 columns x block_n rows.
struct BwdMaps {
  CUtensorMap q, k, v, dout;
};

// Rows of O one TMA store writes: one consumer warpgroup's share of a query block.
inline constexpr int kOStoreRows = 64;

// Empty when TMA can address these tensors (16-byte aligned base and strides, sizes
// in range); otherwise the rule that fails. A null base pointer (shape-only
// queries) skips the alignment check of the pointer.
std::string tma_problem(const AttnParams& p);

// Throws flashpp::Error (runtime) when the driver rejects a descriptor.
FwdMaps encode_fwd_maps(const AttnParams& p, int block_m, int block_n);

// tma_problem, and dO's rules for the backward's loads.
std::string bwd_tma_problem(const AttnParams& p);
BwdMaps encode_bwd_maps(const AttnParams& p, int block_m, int block_n);

// Empty when a TMA store can write O (same rules as the loads); otherwise why not,
// and the epilogue then stores from registers.
std::string o_store_problem(const AttnParams& p);
void encode_o_map(const AttnParams& p, CUtensorMap* map);

}  // namespace flashpp::cuda::sm90
