// One kernel instance: Hopper fwd bf16 head dim 128 (see instance_list.inc).
#include "cuda/sm90/launch.cuh"

namespace flashpp::cuda::instances {
KernelEntry fwd90_bf16_hd128() { return sm90::fwd_entry<__nv_bfloat16, 128>(); }
}  // namespace flashpp::cuda::instances
