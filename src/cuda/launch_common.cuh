#pragma once
// What every kernel family's launcher shares: the element type tag of a template
// argument and a checked launch with the dynamic shared-memory opt-in.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstddef>

#include "common/params.hpp"
#include "cuda/check.hpp"

namespace flashpp::cuda {

template <typename T>
constexpr ElemType elem_type_of();
template <>
constexpr ElemType elem_type_of<__half>() { return ElemType::f16; }
template <>
constexpr ElemType elem_type_of<__nv_bfloat16>() { return ElemType::bf16; }

inline unsigned blocks(int n, int per_block) { return unsigned((n + per_block - 1) / per_block); }

template <typename Kernel, typename... Args>
void launch_kernel(Kernel kernel, dim3 grid, int threads, std::size_t smem, cudaStream_t stream, const char* what,
                   const Args&... args) {
  if (grid.x == 0 || grid.y == 0 || grid.z == 0) return;
  // Per launch rather than once: the attribute is per device, and this keeps
  // concurrent first calls from several threads and devices trivially safe.
  check_cuda(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)),
             "cudaFuncSetAttribute(max dynamic shared memory)");
  kernel<<<grid, threads, smem, stream>>>(args...);
  check_launch(what);
}

}  // namespace flashpp::cuda
