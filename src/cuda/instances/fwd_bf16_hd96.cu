// One kernel instance: fwd bf16 head dim 96 (see instance_list.inc).
#include "cuda/sm80/launch.cuh"

namespace flashpp::cuda::instances {
KernelEntry fwd_bf16_hd96() { return sm80::fwd_entry<__nv_bfloat16, 96>(); }
}  // namespace flashpp::cuda::instances
