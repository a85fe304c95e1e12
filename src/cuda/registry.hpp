#pragma once
// The kernel table of the CUDA backend. Each file under instances/ compiles one
// kernel and describes it with a KernelEntry (its key: arch, dtype, head dim, pass);
// select() is the one place that answers "which kernel runs these arguments" or
// "why none can", for the launchers, flashpp::select_*() and the test skips alike.
#include <cuda_runtime.h>

#include <cstddef>
#include <string>

#include "common/params.hpp"
#include "cuda/sm80/bwd_args.hpp"

namespace flashpp::cuda {

enum class Pass : unsigned char { forward, backward, backward_dq };

const char* pass_name(Pass pass);

struct LaunchArgs {
  cudaStream_t stream = nullptr;
  sm80::BwdArgs bwd;           // backward passes only
  int* tile_counter = nullptr;  // forward (varlen, masked): workspace for the Hopper kernel's dynamic schedule
};

struct KernelEntry {
  int arch;          // kernel family: 80 = FA2-class (mma.sync), runs on sm80 and newer;
                     // 90 = FA3-class (TMA + wgmma, sm90a): the forward, and the backward
                     // at head dims 64 and 128
  Pass pass;
  ElemType dtype;
  int head_dim;      // compiled head dim; smaller ones round up to it
  std::size_t smem_bytes;
  void (*launch)(const AttnParams&, const LaunchArgs&);
  cudaError_t (*attributes)(cudaFuncAttributes*);  // fails when the build has no code for the device
  // FA2-class backward entries: the exact-D and fix passes alone (sm80/bwd_exact_d.cuh),
  // which the Hopper backward's launcher runs after its own main kernel.
  void (*launch_fix)(const AttnParams&, const LaunchArgs&) = nullptr;
};

struct Selected {
  const KernelEntry* entry = nullptr;  // null: see reason
  std::string name;                    // e.g. "cuda-sm80 fwd bf16 hdim128"
  std::string reason;
  std::string note;  // set when a faster family was passed over: why
};

// The forward and the backward prefer the Hopper family on sm_90 devices and fall back
// to the FA2-class kernels (saying why in `note`). FLASHPP_CUDA_FORWARD_FAMILY=sm80 and
// FLASHPP_CUDA_BACKWARD_FAMILY=sm80 in the environment force the FA2-class forward and
// backward (tests and benchmarks of both families).
// Needs the CUDA context of `device` only for the first query per (kernel, device).
Selected select(Pass pass, const AttnParams& p, int device);

}  // namespace flashpp::cuda
