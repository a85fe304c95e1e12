// One kernel instance: bwd_dq bf16 head dim 256 (see instance_list.inc).
#include "cuda/sm80/launch.cuh"

namespace flashpp::cuda::instances {
KernelEntry bwd_dq_bf16_hd256() { return sm80::bwd_dq_entry<__nv_bfloat16, 256>(); }
}  // namespace flashpp::cuda::instances
