// One kernel instance: Hopper bwd f16 head dim 64 (see instance_list.inc).
#include "cuda/sm90/bwd_launch.cuh"

namespace flashpp::cuda::instances {
KernelEntry bwd_f16_hd64();  // the FA2-class entry: its fix passes follow the main kernel

namespace {
void launch(const AttnParams& p, const LaunchArgs& a) {
  static const KernelEntry fa2 = bwd_f16_hd64();
  sm90::launch_bwd90<__half, 64>(p, a, fa2);
}
}  // namespace

KernelEntry bwd90_f16_hd64() {
  return {90, Pass::backward, ElemType::f16, 64, sm90::bwd90_smem_bytes(64), &launch,
          &sm90::bwd90_attributes<__half, 64>};
}
}  // namespace flashpp::cuda::instances
