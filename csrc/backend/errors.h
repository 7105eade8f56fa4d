// The runtime's errors as PyTorch's, in one place (OpenReg's OPENREG_CHECK, for a runtime that throws
// typed C++ exceptions instead of returning codes): neuron_rt::OutOfMemory -> torch.OutOfMemoryError,
// a core that is not visible (std::out_of_range) -> torch.AcceleratorError, a bad configuration or
// argument (std::invalid_argument) -> ValueError, anything else -> RuntimeError.
#pragma once

#include <c10/core/Device.h>

#include <initializer_list>
#include <string_view>
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

// An environment variable that names one of a fixed set of choices (TORCHNEURON_EXT_NUMERICS,
// TORCHNEURON_EXT_RNG): the index of the choice it names, 0 (the default) when unset or empty, -1 when
// it names none. Callers keep the index and raise with throw_bad_env_choice when the setting is first
// used, not when it is read, which may be while the library loads (an import must not fail).
int env_choice(const char* var, std::initializer_list<std::string_view> choices);

// ValueError: "VAR='value' is not WHAT; use HELP".
[[noreturn]] void throw_bad_env_choice(const char* var, const char* what, const char* help);

// neuron_rt::CurrentDeviceScope whose bad-index error is PyTorch's.
class CurrentDeviceScope : public neuron_rt::CurrentDeviceScope {
 public:
  explicit CurrentDeviceScope(c10::DeviceIndex device) try : neuron_rt::CurrentDeviceScope(device) {
  } catch (...) {
    rethrow_runtime_error();
  }
};

}  // namespace torchneuron
