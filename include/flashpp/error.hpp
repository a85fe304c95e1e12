#pragma once
// The one error type every flashpp entry point throws. The message always names
// the offending argument and the rule it broke, e.g.
//   "flashpp: q: head dim must be a multiple of 8 (got 12)".
#include <stdexcept>
#include <string>

namespace flashpp {

enum class ErrorKind {
  value,          // a shape, size or option has a bad value
  type,           // a dtype or device is wrong
  not_supported,  // valid input that this build or backend cannot run
  runtime,        // a backend failed while running (CUDA error, ...)
};

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, std::string argument, const std::string& rule)
      : std::runtime_error("flashpp: " + argument + ": " + rule),
        kind_(kind),
        argument_(std::move(argument)) {}
  ErrorKind kind() const noexcept { return kind_; }
  // The argument the message is about ("q", "cu_seqlens_k", "window", ...).
  const std::string& argument() const noexcept { return argument_; }

 private:
  ErrorKind kind_;
  std::string argument_;
};

}  // namespace flashpp
