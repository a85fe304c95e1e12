// One kernel instance: Hopper fwd f16 head dim 96 (see instance_list.inc).
#include "cuda/sm90/launch.cuh"

namespace flashpp::cuda::instances {
KernelEntry fwd90_f16_hd96() { return sm90::fwd_entry<__half, 96>(); }
}  // namespace flashpp::cuda::instances
