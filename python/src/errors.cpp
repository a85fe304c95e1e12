#include "errors.hpp"

#include <Python.h>

#include "flashpp/error.hpp"

namespace nb = nanobind;

namespace flashpp::python {
namespace {

// Owned for the life of the interpreter: the translator may run at any time.
PyObject* g_error = nullptr;
PyObject* g_value = nullptr;
PyObject* g_type = nullptr;
PyObject* g_not_supported = nullptr;
PyObject* g_runtime = nullptr;

PyObject* make_class(nb::module_& m, const char* name, PyObject* builtin, const char* doc) {
  PyObject* bases = PyTuple_Pack(2, g_error, builtin);
  const std::string qual = std::string("flashpp.") + name;
  PyObject* cls = PyErr_NewExceptionWithDoc(qual.c_str(), doc, bases, nullptr);
  Py_DECREF(bases);
  if (!cls) throw nb::python_error();
  m.attr(name) = nb::handle(cls);
  return cls;
}

PyObject* class_for(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::value: return g_value;
    case ErrorKind::type: return g_type;
    case ErrorKind::not_supported: return g_not_supported;
    case ErrorKind::runtime: return g_runtime;
  }
  return g_runtime;
}

const char* kind_name(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::value: return "value";
    case ErrorKind::type: return "type";
    case ErrorKind::not_supported: return "not_supported";
    case ErrorKind::runtime: return "runtime";
  }
  return "runtime";
}

// Raises `cls(message)` with .argument and .kind set, like the Python helper
// flashpp._errors.fail() does for errors found on the Python side.
void raise(PyObject* cls, const char* message, const std::string& argument, const char* kind) {
  PyObject* exc = PyObject_CallFunction(cls, "s", message);
  if (!exc) return;  // the failed call left its own exception set
  PyObject* arg = PyUnicode_FromStringAndSize(argument.data(), Py_ssize_t(argument.size()));
  PyObject* knd = PyUnicode_FromString(kind);
  if (arg && knd) {
    PyObject_SetAttrString(exc, "argument", arg);
    PyObject_SetAttrString(exc, "kind", knd);
  }
  Py_XDECREF(arg);
  Py_XDECREF(knd);
  PyErr_SetObject(cls, exc);
  Py_DECREF(exc);
}

}  // namespace

void register_errors(nb::module_& m) {
  g_error = PyErr_NewExceptionWithDoc(
      "flashpp.Error",
      "Base class of every error flashpp raises. `argument` names the offending argument, "
      "`kind` is one of 'value', 'type', 'not_supported', 'runtime'.",
      PyExc_Exception, nullptr);
  if (!g_error) throw nb::python_error();
  m.attr("Error") = nb::handle(g_error);
  g_value = make_class(m, "InvalidValueError", PyExc_ValueError, "A shape, size or option has a bad value.");
  g_type = make_class(m, "InvalidTypeError", PyExc_TypeError, "A dtype or device is wrong.");
  g_not_supported = make_class(m, "NotSupportedError", PyExc_NotImplementedError,
                               "Valid input that this build or backend cannot run.");
  g_runtime = make_class(m, "BackendError", PyExc_RuntimeError, "A backend failed while running.");

  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const Error& e) {
      raise(class_for(e.kind()), e.what(), e.argument(), kind_name(e.kind()));
    }
  });
}

}  // namespace flashpp::python
