#pragma once
// Python exception types for flashpp::Error. Each ErrorKind gets a class that
// derives from flashpp.Error and from the matching builtin, so callers can
// catch either: value -> ValueError, type -> TypeError, not_supported ->
// NotImplementedError (a RuntimeError), runtime -> RuntimeError.
#include <nanobind/nanobind.h>

namespace flashpp::python {

// Creates the classes as attributes of `m` and installs the translator.
void register_errors(nanobind::module_& m);

}  // namespace flashpp::python
