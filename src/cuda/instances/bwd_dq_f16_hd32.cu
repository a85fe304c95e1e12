// One kernel instance: bwd_dq f16 head dim 32 (see instance_list.inc).
#include "cuda/sm80/launch.cuh"

namespace flashpp::cuda::instances {
KernelEntry bwd_dq_f16_hd32() { return sm80::bwd_dq_entry<__half, 32>(); }
}  // namespace flashpp::cuda::instances
