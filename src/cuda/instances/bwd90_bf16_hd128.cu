// One kernel instance: Hopper bwd bf16 head dim 128 (see instance_list.inc).
#include "cuda/sm90/bwd_launch.cuh"

namespace flashpp::cuda::instances {
KernelEntry bwd_bf16_hd128();  // the FA2-class entry: its fix passes follow the main kernel
KernelEntry bwd90_bf16_hd128() { return sm90::bwd90_entry<__nv_bfloat16, 128, &bwd_bf16_hd128>(); }
}  // namespace flashpp::cuda::instances
