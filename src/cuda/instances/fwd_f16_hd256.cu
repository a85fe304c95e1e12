// One kernel instance: fwd f16 head dim 256 (see instance_list.inc).
#include "cuda/sm80/launch.cuh"

namespace flashpp::cuda::instances {
KernelEntry fwd_f16_hd256() { return sm80::fwd_entry<__half, 256>(); }
}  // namespace flashpp::cuda::instances
