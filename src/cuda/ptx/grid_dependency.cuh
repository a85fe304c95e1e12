#pragma once
// Programmatic dependent launch (sm90+): a kernel launched with
// cudaLaunchAttributeProgrammaticStreamSerialization may start while the kernel
// before it on the stream is still running. It must call wait_prior_grids()
// before it touches memory that kernel could have written; the kernel before
// it lets it start early with allow_dependent_launch(). On older GPUs, or
// without the attribute, both are no-ops and launches serialize as usual.

namespace flashpp::cuda::ptx {

// griddepcontrol.wait: returns once every prerequisite grid has completed and
// its memory operations are visible.
__device__ __forceinline__ void wait_prior_grids() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

// griddepcontrol.launch_dependents: once every block of this grid has issued it
// (or exited), a dependent grid may be scheduled onto free SMs.
__device__ __forceinline__ void allow_dependent_launch() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

}  // namespace flashpp::cuda::ptx
