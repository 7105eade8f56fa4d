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

// The environment switches, in the one grammar the Python side reads them with (torchneuron_ext/_env.py): a
// value counts in any case and with surrounding blanks; unset or empty gives the default. What is not
// understood is an error (ValueError) when the setting is first used, not when it is read, which may be while
// the library loads: a switch read then warns and keeps its default instead, since an import must not fail.

// An on/off switch: 1/true/on/yes or 0/false/off/no. Anything else raises (`OnBadEnv::kRaise`), or warns
// and gives `fallback` (`kWarn`): "VAR='value' is not understood: use 1 (or true/on/yes) to turn it on, ...".
enum class OnBadEnv { kRaise, kWarn };
bool env_flag(const char* var, bool fallback, OnBadEnv on_bad);

// A variable that names one of a fixed set of choices (TORCHNEURON_EXT_NUMERICS, TORCHNEURON_EXT_RNG,
// TORCHNEURON_EXT_AUTOGRAD_THREADS), written in lower case: the index of the choice it names, 0 (the
// default) when unset or empty, -1 when it names none. Callers keep the index and raise with
// throw_bad_env_choice when the setting is first used.
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
