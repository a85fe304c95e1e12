// One kernel instance: fwd f16 head dim 192 (see instance_list.inc).
#include "cuda/sm80/launch.cuh"

namespace flashpp::cuda::instances {
KernelEntry fwd_f16_hd192() { return sm80::fwd_entry<__half, 192>(); }
}  // namespace flashpp::cuda::instances
