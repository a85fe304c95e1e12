// One kernel instance: Hopper fwd f16 head dim 256 (see instance_list.inc).
#include "cuda/sm90/launch.cuh"

namespace flashpp::cuda::instances {
KernelEntry fwd90_f16_hd256() { return sm90::fwd_entry<__half, 256>(); }
}  // namespace flashpp::cuda::instances
