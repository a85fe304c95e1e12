// One kernel instance: Hopper bwd f16 head dim 128 (see instance_list.inc).
#include "cuda/sm90/bwd_launch.cuh"

namespace flashpp::cuda::instances {
KernelEntry bwd_f16_hd128();  // the FA2-class entry: its fix passes follow the main kernel
KernelEntry bwd90_f16_hd128() { return sm90::bwd90_entry<__half, 128, &bwd_f16_hd128>(); }
}  // namespace flashpp::cuda::instances
