// Stand-in for the CUDA backend in builds without a CUDA toolkit: every call
// reports clearly that CUDA tensors cannot run here.
#include "cuda/cuda_backend.hpp"
#include "flashpp/error.hpp"

namespace flashpp::cuda {
namespace {
const char* kWhy = "flashpp was built without CUDA support; rebuild with a CUDA toolkit to use CUDA tensors";
[[noreturn]] void unavailable() { throw Error(ErrorKind::not_supported, "q", kWhy); }
}  // namespace

Choice select_forward(const AttnParams&, int) { return {false, "", kWhy, ""}; }
Choice select_backward(const AttnParams&, int) { return {false, "", kWhy, ""}; }
std::size_t forward_workspace_bytes(const AttnParams&, int) { unavailable(); }
void forward(const AttnParams&, void*, std::size_t, void*, int) { unavailable(); }
std::size_t backward_workspace_bytes(const AttnParams&, int) { unavailable(); }
void backward(const AttnParams&, void*, std::size_t, void*, int) { unavailable(); }

}  // namespace flashpp::cuda
