// rethrow_runtime_error and the environment switches' grammar (errors.h).
#include "errors.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "../runtime/memory.h"

namespace torchneuron {

void rethrow_runtime_error() {
  try {
    throw;
  } catch (const neuron_rt::OutOfMemory& e) {
    TORCH_CHECK_WITH(OutOfMemoryError, false, e.what());
  } catch (const std::out_of_range& e) {
    // A bad device index: torch.AcceleratorError (a RuntimeError), as CUDA
    // raises for an invalid device ordinal.
    throw c10::AcceleratorError({__func__, __FILE__, static_cast<uint32_t>(__LINE__)}, /*code=*/101, e.what());
  } catch (const std::invalid_argument& e) {
    TORCH_CHECK_VALUE(false, e.what());
  } catch (const c10::Error&) {
    throw;
  } catch (const std::exception& e) {
    TORCH_CHECK(false, e.what());
  }
  // Not a std::exception: `throw;` above has let it through unchanged.
}

namespace {

// `var`'s value as the grammar compares it: without surrounding blanks, in lower case.
std::string normalized_env(const char* var) {
  const char* raw = std::getenv(var);
  std::string_view v = raw == nullptr ? "" : raw;
  constexpr std::string_view kBlanks = " \t\n\r\f\v";
  const size_t first = v.find_first_not_of(kBlanks);
  v = first == std::string_view::npos ? std::string_view() : v.substr(first, v.find_last_not_of(kBlanks) - first + 1);
  std::string out(v);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

}  // namespace

bool env_flag(const char* var, bool fallback, OnBadEnv on_bad) {
  const std::string v = normalized_env(var);
  if (v.empty()) return fallback;
  if (v == "1" || v == "true" || v == "on" || v == "yes") return true;
  if (v == "0" || v == "false" || v == "off" || v == "no") return false;
  const char* raw = std::getenv(var);
  // Python's wording (_env.flag), so one message names a bad switch whichever side reads it.
  if (on_bad == OnBadEnv::kRaise) {
    TORCH_CHECK_VALUE(false, var, "='", raw, "' is not understood: use 1 (or true/on/yes) to turn it on, 0 (or ",
                      "false/off/no) to turn it off");
  }
  TORCH_WARN(var, "='", raw, "' is not understood: use 1 (or true/on/yes) to turn it on, 0 (or false/off/no) to ",
             "turn it off");
  return fallback;
}

int env_choice(const char* var, std::initializer_list<std::string_view> choices) {
  const std::string value = normalized_env(var);
  if (value.empty()) return 0;
  int index = 0;
  for (std::string_view choice : choices) {
    if (choice == value) return index;
    ++index;
  }
  return -1;
}

void throw_bad_env_choice(const char* var, const char* what, const char* help) {
  const char* value = std::getenv(var);
  TORCH_CHECK_VALUE(false, var, "='", value == nullptr ? "" : value, "' is not ", what, "; use ", help);
}

}  // namespace torchneuron
