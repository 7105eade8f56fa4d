// The runtime's errors as PyTorch's, in one place (OpenReg's OPENREG_CHECK, for a runtime that throws
// typed C++ exceptions instead of returning codes): neuron_rt::OutOfMemory -> torch.OutOfMemoryError,
// a core that is not visible (std::out_of_range) -> torch.AcceleratorError, a bad configuration or
// argument (std::invalid_argument) -> ValueError, anything else -> RuntimeError.
#pragma once

#include <c10/core/Device.h>

#include <utility>

#include "../runtime/device.h"

namespace torchneuron {

// Call inside a catch block: rethrows the exception being handled as PyTorch's (c10::Error as is).
[[noreturn]] void rethrow_runtime_error();

// f(), with runtime errors raised as PyTorch's: every call into the runtime that can throw goes
// through this (or through CurrentDeviceScope below).
template <typename F>
decltype(auto) guarded(F&& f) {
  try {
    return std::forward<F>(f)();
  } catch (...) {
    rethrow_runtime_error();
  }
}

// neuron_rt::CurrentDeviceScope whose bad-index error is PyTorch's.
class CurrentDeviceScope : public neuron_rt::CurrentDeviceScope {
 public:
  explicit CurrentDeviceScope(c10::DeviceIndex device) try : neuron_rt::CurrentDeviceScope(device) {
  } catch (...) {
    rethrow_runtime_error();
  }
};

}  // namespace torchneuron
