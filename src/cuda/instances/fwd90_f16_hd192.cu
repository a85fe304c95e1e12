// One kernel instance: Hopper fwd f16 head dim 192 (see instance_list.inc).
#include "cuda/sm90/launch.cuh"

namespace flashpp::cuda::instances {
KernelEntry fwd90_f16_hd192() { return sm90::fwd_entry<__half, 192>(); }
}  // namespace flashpp::cuda::instances
