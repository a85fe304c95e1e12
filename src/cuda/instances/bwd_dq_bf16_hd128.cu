// One kernel instance: bwd_dq bf16 head dim 128 (see instance_list.inc).
#include "cuda/sm80/launch.cuh"

namespace flashpp::cuda::instances {
KernelEntry bwd_dq_bf16_hd128() { return sm80::bwd_dq_entry<__nv_bfloat16, 128>(); }
}  // namespace flashpp::cuda::instances
