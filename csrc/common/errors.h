// The host side's one error, raised by the argument checks and the CPU
// kernels: std::runtime_error("sgl_meta.<op>: <message>"), which the boxed
// call hands to Python as a RuntimeError. The message is the arguments
// streamed in order, formatted only once a check has failed. Free of torch
// headers, as the CPU kernels are.
#pragma once

#include <sstream>
#include <stdexcept>

namespace sgl_meta {

template <typename... Args>
[[noreturn]] void raise_error(const char* op, const Args&... args) {
  std::ostringstream msg;
  msg << "sgl_meta." << op << ": ";
  ((msg << args), ...);
  throw std::runtime_error(msg.str());
}

}  // namespace sgl_meta
