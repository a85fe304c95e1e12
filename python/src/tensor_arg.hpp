#pragma once
// Turns the Python arguments of the bindings into flashpp::TensorView.
#include <vector>

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include "flashpp/tensor.hpp"

namespace flashpp::python {

// Arrays imported through DLPack or the buffer protocol during one call; they
// keep the producers' memory alive until the call returns.
using KeepAlive = std::vector<nanobind::ndarray<nanobind::ro>>;

// `obj` is one of
//  - None: an optional argument that was not given (undefined view);
//  - a spec tuple (data_ptr, dtype_code, shape, strides, device_kind,
//    device_index) built by the Python layer from a NumPy array or a torch
//    tensor, with strides in elements and dtype_code a flashpp::DType value.
//    This path never calls __dlpack__, which matters for torch: exporting a
//    CUDA tensor without naming a stream synchronizes streams, which breaks
//    CUDA graph capture;
//  - anything nanobind imports as an ndarray: a DLPack capsule, an object
//    with __dlpack__ (CuPy, JAX, ...) or a buffer-protocol object.
// `name` is the argument name used in error messages.
TensorView to_view(nanobind::handle obj, const char* name, KeepAlive& keep);

}  // namespace flashpp::python
