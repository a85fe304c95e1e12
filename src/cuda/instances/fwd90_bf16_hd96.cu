// One kernel instance: Hopper fwd bf16 head dim 96 (see instance_list.inc).
#include "cuda/sm90/launch.cuh"

namespace flashpp::cuda::instances {
KernelEntry fwd90_bf16_hd96() { return sm90::fwd_entry<__nv_bfloat16, 96>(); }
}  // namespace flashpp::cuda::instances
