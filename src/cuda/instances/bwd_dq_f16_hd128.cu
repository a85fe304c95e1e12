// One kernel instance: bwd_dq f16 head dim 128 (see instance_list.inc).
#include "cuda/sm80/launch.cuh"

namespace flashpp::cuda::instances {
KernelEntry bwd_dq_f16_hd128() { return sm80::bwd_dq_entry<__half, 128>(); }
}  // namespace flashpp::cuda::instances
