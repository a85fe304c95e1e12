// One kernel instance: Hopper bwd f16 head dim 64 (see instance_list.inc).
#include "cuda/sm90/bwd_launch.cuh"

namespace flashpp::cuda::instances {
KernelEntry bwd_f16_hd64();  // the FA2-class entry: its fix passes follow the main kernel
KernelEntry bwd90_f16_hd64() { return sm90::bwd90_entry<__half, 64, &bwd_f16_hd64>(); }
}  // namespace flashpp::cuda::instances
