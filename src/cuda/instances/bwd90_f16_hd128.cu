// One kernel instance: Hopper bwd f16 head dim 128 (see instance_list.inc).
#include "cuda/sm90/bwd_launch.cuh"

namespace flashpp::cuda::instances {
KernelEntry bwd_f16_hd128();  // the FA2-class entry: its fix passes follow the main kernel

namespace {
void launch(const AttnParams& p, const LaunchArgs& a) {
  static const KernelEntry fa2 = bwd_f16_hd128();
  sm90::launch_bwd90<__half, 128>(p, a, fa2);
}
}  // namespace

KernelEntry bwd90_f16_hd128() {
  return {90, Pass::backward, ElemType::f16, 128, sm90::bwd90_smem_bytes(128), &launch,
          &sm90::bwd90_attributes<__half, 128>};
}
}  // namespace flashpp::cuda::instances
