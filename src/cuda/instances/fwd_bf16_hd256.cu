// One kernel instance: fwd bf16 head dim 256 (see instance_list.inc).
#include "cuda/sm80/launch.cuh"

namespace flashpp::cuda::instances {
KernelEntry fwd_bf16_hd256() { return sm80::fwd_entry<__nv_bfloat16, 256>(); }
}  // namespace flashpp::cuda::instances
