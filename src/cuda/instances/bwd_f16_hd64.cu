// One kernel instance: bwd f16 head dim 64 (see instance_list.inc).
#include "cuda/sm80/launch.cuh"

namespace flashpp::cuda::instances {
KernelEntry bwd_f16_hd64() { return sm80::bwd_entry<__half, 64>(); }
}  // namespace flashpp::cuda::instances
